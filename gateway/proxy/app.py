"""Placeholder until the proxy lands: answers 501 in OpenAI's error shape."""

import orjson


class ProxyApp:
    async def __call__(self, scope, receive, send):
        body = orjson.dumps({"error": {"message": "proxy not implemented yet", "type": "server_error",
                                       "param": None, "code": "not_implemented"}})
        await send({"type": "http.response.start", "status": 501,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    async def lifespan(self, scope, receive, send):
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
