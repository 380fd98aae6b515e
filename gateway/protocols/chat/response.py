"""Chat Completions whole (non-stream) responses: upstream completion -> Response, and
Response -> the client's ``chat.completion`` object.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.errors import ProtocolError, UpstreamProtocolError
from gateway.urp import (
    Node,
    Response,
    ToolResultNode,
    accept_extra,
)

from ..base import EncodeContext, put_extra
from .common import (
    CHOICE_EXTRA,
    NATIVE_FINISH,
    PROTOCOL,
    chat_id,
    decode_usage,
    encode_usage,
    finish_from_wire,
    finish_to_wire,
)
from .decode import decode_message
from .encode import encode_messages

# -- response -----------------------------------------------------------------------------

_RESPONSE_KEYS = frozenset({"id", "object", "created", "model", "choices", "usage"})
_CHOICE_KEYS = frozenset({"index", "message", "finish_reason"})


def raise_embedded_error(err: Any) -> None:
    """An ``error`` object inside a 200 body is a failed attempt, not a success."""
    if isinstance(err, dict):
        message = err.get("message") if isinstance(err.get("message"), str) else "upstream error"
        code = err.get("code")
        etype = err.get("type") if isinstance(err.get("type"), str) else None
        raise UpstreamProtocolError(
            message,
            code=str(code) if code is not None else "upstream_error",
            status=code if isinstance(code, int) else None,
            error_type=etype,
        )
    raise UpstreamProtocolError(str(err) if err else "upstream error", code="upstream_error")


def decode_response(body: dict) -> Response:
    """Upstream Chat completion -> Response. Embedded errors and garbage raise
    UpstreamProtocolError."""
    if not isinstance(body, dict):
        raise UpstreamProtocolError("upstream body is not a JSON object")
    if body.get("error"):
        raise_embedded_error(body["error"])
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise UpstreamProtocolError("upstream response has no choices")
    choice = choices[0]
    if choice.get("error"):
        raise_embedded_error(choice["error"])
    native = choice.get("finish_reason")
    if native == "error":
        raise UpstreamProtocolError("upstream finished with an error", code="upstream_error")
    msg = choice.get("message")
    if not isinstance(msg, dict):
        raise UpstreamProtocolError("upstream choice has no message")
    msg = msg if msg.get("role") else {**msg, "role": "assistant"}
    if msg.get("role") != "assistant":
        raise UpstreamProtocolError("upstream message role is not assistant")
    out: list[Node] = []
    try:
        decode_message(msg, "choices[0].message", {}, out)
    except ProtocolError as exc:
        raise UpstreamProtocolError(f"bad upstream message: {exc.message}") from exc
    extra = accept_extra(body, _RESPONSE_KEYS)
    if native is not None:
        extra[NATIVE_FINISH] = native
    choice_extra = accept_extra(choice, _CHOICE_KEYS)
    if choice_extra:
        extra[CHOICE_EXTRA] = choice_extra
    if "usage" in body and body["usage"] is None:
        extra["usage"] = None
    rid = body.get("id")
    created = body.get("created")
    return Response(
        id=rid if isinstance(rid, str) and rid else "chatcmpl-unknown",
        model=body.get("model") if isinstance(body.get("model"), str) else "",
        output=out,
        finish_reason=finish_from_wire(native),
        usage=decode_usage(body.get("usage")),
        created=created if isinstance(created, int) else None,
        extra=extra,
    )


def encode_response(resp: Response, ctx: EncodeContext) -> dict:
    """Response -> client ``chat.completion`` object with the client's logical model.
    Upstream-only extras (choice fields, system_fingerprint...) are replayed on a same-Chat hop."""
    same = ctx.source_protocol in (None, PROTOCOL)
    nodes = [n for n in resp.output if not isinstance(n, ToolResultNode)]
    messages = encode_messages(nodes, same, response=True)
    message: dict[str, Any] = {"role": "assistant", "content": None}
    # a response has one assistant message: merge whatever the grouping produced
    for m in messages:
        if m.get("role") != "assistant":
            continue
        if message.get("content") is None or m.get("content") is None:
            message.update({k: v for k, v in m.items() if k != "content" or v is not None})
        else:
            for k, v in m.items():
                if k == "content" and isinstance(v, str) and isinstance(message["content"], str):
                    message["content"] = message["content"] + "\n\n" + v
                elif k in ("tool_calls", "reasoning_details") and k in message:
                    message[k] = message[k] + v
                else:
                    message.setdefault(k, v)
    calls = message.get("tool_calls") or []
    legacy = "function_call" in message
    finish = finish_to_wire(
        resp.finish_reason,
        resp.extra.get(NATIVE_FINISH),
        has_tool_calls=bool(calls) or legacy,
        legacy=legacy and not calls,
    )
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
    if same and isinstance(resp.extra.get(CHOICE_EXTRA), dict):
        put_extra(choice, resp.extra[CHOICE_EXTRA])
    body: dict[str, Any] = {
        "id": resp.id if same and resp.id else chat_id(resp.id),
        "object": "chat.completion",
        "created": resp.created if resp.created is not None else int(time.time()),
        "model": ctx.model,
        "choices": [choice],
    }
    if resp.usage is not None:
        body["usage"] = encode_usage(resp.usage, same_protocol=same)
    if same:
        put_extra(body, resp.extra)
    return body
