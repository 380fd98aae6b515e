"""Anthropic Messages whole (non-stream) responses: upstream message -> Response, and Response
-> the client's ``message`` object. Usage is normalised (Anthropic's ``input_tokens`` excludes
cache reads/writes; ours includes them).
"""

from __future__ import annotations

from typing import Any

from gateway.errors import ProtocolError, UpstreamProtocolError
from gateway.urp import (
    EnvelopeExtraNode,
    Response,
    ToolCallNode,
    ToolResultNode,
)

from ..base import EncodeContext, new_id, put_extra
from .common import (
    PROTOCOL,
    STOP_REASON,
    STOP_SEQUENCE,
    decode_block,
    decode_usage,
    encode_content_block,
    encode_usage,
    finish_from_wire,
    stop_to_wire,
    unknown,
)

_RESPONSE_KNOWN = frozenset(
    {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}
)


# -- response ----------------------------------------------------------------------------------


def decode_response(body: dict) -> Response:
    """A Messages response body -> Response. Embedded errors and garbage raise
    UpstreamProtocolError."""
    if not isinstance(body, dict):
        raise UpstreamProtocolError("upstream response is not a JSON object")
    if body.get("type") == "error" or (isinstance(body.get("error"), dict) and "content" not in body):
        err = body.get("error") if isinstance(body.get("error"), dict) else {}
        etype = err.get("type") if isinstance(err.get("type"), str) else None
        raise UpstreamProtocolError(
            str(err.get("message") or "upstream returned an error"),
            code=etype or "upstream_error",
            error_type=etype,
        )
    content = body.get("content")
    if not isinstance(content, list):
        raise UpstreamProtocolError("upstream response has no content list")
    try:
        output = [decode_block(b, "assistant", f"content[{i}]") for i, b in enumerate(content)]
    except ProtocolError as exc:
        raise UpstreamProtocolError(f"bad upstream content block: {exc.message} ({exc.param})") from exc
    extra = unknown(body, _RESPONSE_KNOWN)
    stop = body.get("stop_reason")
    if isinstance(stop, str) and stop:
        extra[STOP_REASON] = stop
        extra[STOP_SEQUENCE] = body.get("stop_sequence")
    finish = finish_from_wire(stop)
    if finish is None:
        finish = "tool_calls" if any(isinstance(n, ToolCallNode) for n in output) else "stop"
    rid = body.get("id")
    return Response(
        id=rid if isinstance(rid, str) and rid else new_id("msg_"),
        model=str(body.get("model") or ""),
        output=output,
        finish_reason=finish,
        usage=decode_usage(body.get("usage")),
        extra=extra,
    )


def encode_response(resp: Response, ctx: EncodeContext) -> dict:
    """Response -> Messages client body with the client's logical model."""
    same = ctx.source_protocol == PROTOCOL
    extras = same or not ctx.strip_nested
    blocks: list[dict[str, Any]] = []
    has_tool = False
    for node in resp.output:
        if isinstance(node, ToolResultNode | EnvelopeExtraNode):
            continue
        block = encode_content_block(node, extras=extras, same_family=same, signature_for_client=True)
        if block is None:
            continue
        if block.get("type") == "tool_use":
            has_tool = True
        blocks.append(block)
    stop_reason, stop_sequence = stop_to_wire(resp.finish_reason, resp.extra, has_tool_use=has_tool)
    body: dict[str, Any] = {
        "id": resp.id or new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": encode_usage(resp.usage, same_family=same),
    }
    if same:
        put_extra(body, resp.extra)
    return body
