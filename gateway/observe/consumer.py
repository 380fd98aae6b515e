"""The live tail's WebSocket (``/captures/live/ws``): staff only, joins the ``live_tail``
group and forwards each request event as JSON. Routed by ``gateway.asgi`` through Channels'
``AuthMiddlewareStack`` (the Django session cookie)."""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from . import live


class LiveTailConsumer(AsyncJsonWebsocketConsumer):
    joined = False

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not (user.is_active and user.is_staff) or self.channel_layer is None:
            await self.close(code=4403)
            return
        await self.channel_layer.group_add(live.GROUP, self.channel_name)
        self.joined = True
        live.add_viewer()
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.joined:
            self.joined = False
            live.remove_viewer()
            await self.channel_layer.group_discard(live.GROUP, self.channel_name)

    async def live_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["event"])
