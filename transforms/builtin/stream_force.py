"""stream_force: choose the upstream call's execution mode regardless of the client's."""

from __future__ import annotations

from gateway.urp import Request
from transforms.base import NOT_FOR_KEYS, Transform, TransformContext, TransformExample


class StreamForce(Transform):
    """Sets ``request.stream`` to the configured value for the upstream call. The client's own
    mode is unaffected: the runtime collects a forced stream into one response for a
    non-streaming client (it reads the client's mode from ``TransformContext.stream``). Input,
    tools and responses are untouched. Not offered for API keys: it changes the execution mode."""

    type_id = "stream_force"
    aliases = ("force_stream",)
    category = "stream"
    name = {"en": "Stream: force streaming mode", "zh": "流式：强制流式模式"}
    description = {
        "en": "Forces the upstream call to stream (or not to stream) whatever the client asked; "
        "the client still gets the mode it requested.",
        "zh": "无论客户端如何请求，都强制上游调用使用（或不使用）流式；客户端仍按其请求的模式接收响应。",
    }
    phases = ("request",)
    scopes = NOT_FOR_KEYS
    config_schema = {
        "type": "object",
        "properties": {
            "enabled": {
                "type": "boolean",
                "title": "Stream upstream",
                "description": "true: always call the upstream streaming; false: never.",
                "default": True,
            },
        },
        "required": ["enabled"],
    }

    examples = (
        TransformExample(
            title="The upstream call streams although the client did not ask to",
            phase="request",
            config={"enabled": True},
            input={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": False},
            expected={"stream": True},
            note={
                "en": "The client still gets the reply in the mode it asked for (the gateway collects the stream).",
                "zh": "客户端仍按其请求的模式收到回复（网关会收集流）。",
            },
        ),
        TransformExample(
            title="Streaming can be turned off too",
            phase="request",
            config={"enabled": False},
            input={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True},
            expected={"stream": False},
        ),
    )

    def setup(self) -> None:
        self._stream = bool(self.config["enabled"])

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        req.stream = self._stream
