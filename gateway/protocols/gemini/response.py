"""Gemini whole (non-stream) responses: ``GenerateContentResponse`` -> Response."""

from __future__ import annotations

from gateway.errors import UpstreamProtocolError
from gateway.urp import (
    Response,
)

from ..base import new_id
from .common import NATIVE_FINISH, _Calls, _error, _finish, _parts_to_nodes, decode_usage


def decode_response(body: dict) -> Response:
    if not isinstance(body, dict):
        raise UpstreamProtocolError("upstream response is not a JSON object")
    if "error" in body:
        raise _error(body)
    rid = body.get("responseId") if isinstance(body.get("responseId"), str) else None
    model = str(body.get("modelVersion") or "")
    candidates = body.get("candidates")
    usage = decode_usage(body.get("usageMetadata"))
    if not isinstance(candidates, list) or not candidates:
        feedback = body.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            return Response(
                id=rid or new_id("gemini-", 8),
                model=model,
                output=[],
                finish_reason="content_filter",
                usage=usage,
                extra={NATIVE_FINISH: feedback["blockReason"]},
            )
        raise UpstreamProtocolError("upstream response has no candidates")
    cand = candidates[0] if isinstance(candidates[0], dict) else {}
    content = cand.get("content") if isinstance(cand.get("content"), dict) else {}
    parts = content.get("parts") if isinstance(content.get("parts"), list) else []
    output = _parts_to_nodes(parts, _Calls(rid))
    native = cand.get("finishReason")
    return Response(
        id=rid or new_id("gemini-", 8),
        model=model,
        output=output,
        finish_reason=_finish(native, output),
        usage=usage,
        extra={NATIVE_FINISH: native} if native else {},
    )
