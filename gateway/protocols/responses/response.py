"""OpenAI Responses response object <-> ``urp.Response``, usage, status mapping, error body.

A decoded upstream Responses object is retained (minus output/usage) under ``X_OBJECT`` so a
same-protocol client gets the upstream's exact object back (status, error, incomplete_details,
service_tier, absent optional fields stay absent). A cross-protocol response gets a synthesized
full Responses object.

Deliberate choice: finish reason ``content_filter`` becomes ``status: "incomplete"`` with
``incomplete_details.reason = "content_filter"`` (what OpenAI itself reports), where the
reference implementation reports ``completed``.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.errors import ProtocolError, UpstreamProtocolError
from gateway.urp.nodes import (
    INTERNAL_PREFIX,
    ImageNode,
    MediaSource,
    Node,
    ProviderItemNode,
    ToolCallNode,
    accept_extra,
)
from gateway.urp.request import Response, Usage

from ..base import EncodeContext, new_id, token_count, without_internal
from .common import M_BODY, PROTOCOL, decode_items
from .encode import encode_items

X_OBJECT = "_gw_rsp_object"  # Response.extra: the upstream Responses object minus output/usage
X_STATUS = "_gw_rsp_status"  # Response.extra / ResponseDone.extra: exact upstream status
X_USAGE = "_gw_rsp_usage"  # Usage.extra: (raw usage object, typed counters at decode)

# What the Response dataclass itself carries; every other top-level field of an upstream object
# lives in Response.extra, where response rules (the raw-field set/remove ones) can change it.
_TYPED_FIELDS = frozenset(
    {
        "id",
        "object",
        "created_at",
        "completed_at",
        "status",
        "error",
        "incomplete_details",
        "model",
        "output",
        "output_text",
        "usage",
    }
)
_USAGE_KEYS = frozenset(
    {"input_tokens", "output_tokens", "total_tokens", "input_tokens_details", "output_tokens_details"}
)
_IN_DETAIL_KEYS = frozenset({"cached_tokens", "cache_write_tokens", "cache_creation_tokens"})
_OUT_DETAIL_KEYS = frozenset({"reasoning_tokens"})


# --------------------------------------------------------------------------------------------
# usage
# --------------------------------------------------------------------------------------------


def _int(v: Any) -> int:
    return token_count(v) or 0


def _opt_int(v: Any) -> int | None:
    return token_count(v)


def _typed(u: Usage) -> tuple:
    return (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_creation_tokens, u.reasoning_tokens)


def decode_usage(raw: Any) -> Usage | None:
    """Responses usage (also tolerates Chat-style names) -> Usage."""
    if not isinstance(raw, dict):
        return None
    itd = raw.get("input_tokens_details") or raw.get("prompt_tokens_details") or {}
    otd = raw.get("output_tokens_details") or raw.get("completion_tokens_details") or {}
    itd = itd if isinstance(itd, dict) else {}
    otd = otd if isinstance(otd, dict) else {}
    cache_write = itd.get("cache_write_tokens", itd.get("cache_creation_tokens"))
    usage = Usage(
        input_tokens=_int(raw.get("input_tokens", raw.get("prompt_tokens"))),
        output_tokens=_int(raw.get("output_tokens", raw.get("completion_tokens"))),
        cache_read_tokens=_opt_int(itd.get("cached_tokens")),
        cache_creation_tokens=_opt_int(cache_write),
        reasoning_tokens=_opt_int(otd.get("reasoning_tokens")),
    )
    extra = accept_extra(raw, _USAGE_KEYS)
    in_extra = accept_extra(itd, _IN_DETAIL_KEYS)
    out_extra = accept_extra(otd, _OUT_DETAIL_KEYS)
    if in_extra:
        extra["input_tokens_details"] = in_extra
    if out_extra:
        extra["output_tokens_details"] = out_extra
    usage.extra = extra
    extra[X_USAGE] = (without_internal(raw), _typed(usage))
    return usage


def encode_usage(u: Usage) -> dict[str, Any]:
    """Usage -> Responses usage; the upstream's raw object is replayed when counters are unchanged."""
    kept = u.extra.get(X_USAGE)
    if kept and kept[1] == _typed(u):
        return kept[0]
    itd: dict[str, Any] = {}
    otd: dict[str, Any] = {}
    extra_in = u.extra.get("input_tokens_details")
    extra_out = u.extra.get("output_tokens_details")
    if isinstance(extra_in, dict):
        itd.update(extra_in)
    if isinstance(extra_out, dict):
        otd.update(extra_out)
    itd["cached_tokens"] = u.cache_read_tokens or 0
    itd["cache_write_tokens"] = u.cache_creation_tokens or 0
    otd["reasoning_tokens"] = u.reasoning_tokens or 0
    out: dict[str, Any] = {
        "input_tokens": u.input_tokens,
        "input_tokens_details": itd,
        "output_tokens": u.output_tokens,
        "output_tokens_details": otd,
        "total_tokens": u.input_tokens + u.output_tokens,
    }
    for k, v in u.extra.items():
        if (
            k not in out
            and not k.startswith(INTERNAL_PREFIX)
            and k not in ("input_tokens_details", "output_tokens_details")
        ):
            out[k] = v
    return out


# --------------------------------------------------------------------------------------------
# status <-> finish reason
# --------------------------------------------------------------------------------------------


def finish_from_status(status: Any, incomplete_details: Any, output: list[Node]) -> str:
    if status == "incomplete":
        reason = incomplete_details.get("reason") if isinstance(incomplete_details, dict) else None
        return "content_filter" if reason == "content_filter" else "length"
    if status in ("failed", "cancelled"):
        return "other"
    if any(type(n) is ToolCallNode for n in output):
        return "tool_calls"
    return "stop"


def status_for(finish_reason: str | None) -> tuple[str, dict[str, Any] | None]:
    """(status, incomplete_details) for a URP finish reason."""
    if finish_reason == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if finish_reason == "content_filter":
        return "incomplete", {"reason": "content_filter"}
    if finish_reason == "other":
        return "failed", None
    return "completed", None


# --------------------------------------------------------------------------------------------
# decode / encode
# --------------------------------------------------------------------------------------------


def images_from_items(nodes: list[Node]) -> list[Node]:
    """``image_generation_call`` items with a result become assistant images (raw item kept)."""
    out = []
    for n in nodes:
        if (
            type(n) is ProviderItemNode
            and n.item_type == "image_generation_call"
            and isinstance(n.body.get("result"), str)
        ):
            fmt = n.body.get("output_format") or "png"
            out.append(
                ImageNode(
                    id=n.id,
                    role="assistant",
                    extra={M_BODY: n.body},
                    source=MediaSource(kind="base64", data=n.body["result"], media_type=f"image/{fmt}"),
                )
            )
        else:
            out.append(n)
    return out


def decode_output(items: Any) -> list[Node]:
    if not isinstance(items, list):
        raise UpstreamProtocolError("Responses 'output' is not an array")
    try:
        return images_from_items(decode_items(items, "output", "assistant"))
    except ProtocolError as exc:
        raise UpstreamProtocolError(f"malformed Responses output: {exc.message} ({exc.param})") from exc


def raise_embedded_error(err: Any) -> None:
    """An ``error`` object in an upstream body is a failed attempt; anything else returns."""
    if isinstance(err, dict):
        raise UpstreamProtocolError(
            str(err.get("message") or "upstream error"),
            code=str(err.get("code") or "upstream_error"),
            error_type=err.get("type") if isinstance(err.get("type"), str) else None,
        )


def decode_response(body: dict) -> Response:
    """Decode an upstream (non-stream) Responses object."""
    if not isinstance(body, dict):
        raise UpstreamProtocolError("upstream response is not a JSON object")
    err = body.get("error")
    if err is not None and (body.get("status") in (None, "failed") or "output" not in body):
        raise_embedded_error(err)
        raise UpstreamProtocolError(f"upstream error: {err!r}"[:500])
    if "output" not in body:
        raise UpstreamProtocolError("upstream response has no 'output'")
    output = decode_output(body["output"])
    rid = body.get("id")
    resp = Response(
        id=rid if isinstance(rid, str) and rid else new_id("resp_"),
        model=body.get("model") if isinstance(body.get("model"), str) else "",
        output=output,
        finish_reason=finish_from_status(body.get("status"), body.get("incomplete_details"), output),
        usage=decode_usage(body.get("usage")),
        created=_opt_int(body.get("created_at")),
    )
    extra = {k: v for k, v in body.items() if k not in _TYPED_FIELDS and not k.startswith(INTERNAL_PREFIX)}
    extra[X_OBJECT] = {
        k: without_internal(v)
        for k, v in body.items()
        if k not in ("output", "usage", "output_text") and not k.startswith(INTERNAL_PREFIX)
    }
    if isinstance(body.get("status"), str):
        extra[X_STATUS] = body["status"]
    resp.extra = extra
    return resp


def _synthesized(
    *,
    rid: str,
    model: str,
    created_at: int,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    error: dict[str, Any] | None,
    incomplete_details: dict[str, Any] | None,
) -> dict[str, Any]:
    """The standard Responses object's fields and defaults, for when no upstream object is at hand."""
    return {
        "id": rid,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": incomplete_details,
        "instructions": None,
        "max_output_tokens": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "temperature": None,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


def response_object(
    *,
    rid: str,
    model: str,
    created_at: int,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    template: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    incomplete_details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A full Responses object. ``template`` (an upstream object of the same protocol) supplies
    every field it has; otherwise the standard defaults are synthesized."""
    if template is not None:
        obj = dict(template)
        obj["id"] = rid
        obj["model"] = model
        obj.setdefault("object", "response")
        obj.setdefault("created_at", created_at)
        obj["status"] = status
        if error is not None or "error" in obj:
            obj["error"] = error
        if incomplete_details is not None or "incomplete_details" in obj:
            obj["incomplete_details"] = incomplete_details
        obj["output"] = output
        if usage is not None or "usage" in obj:
            obj["usage"] = usage
        if extra is not None:
            # The untyped fields come from ``extra`` as the response rules left it: a field a rule
            # removed goes, a value it set wins over the upstream's.
            for k in [k for k in obj if k not in _TYPED_FIELDS and k not in extra]:
                del obj[k]
            for k, v in extra.items():
                if not k.startswith(INTERNAL_PREFIX):
                    obj[k] = v
        return obj
    obj = _synthesized(
        rid=rid,
        model=model,
        created_at=created_at,
        status=status,
        output=output,
        usage=usage,
        error=error,
        incomplete_details=incomplete_details,
    )
    if status == "completed":
        obj["completed_at"] = int(time.time())
    if extra:
        for k, v in extra.items():
            if k not in obj and not k.startswith(INTERNAL_PREFIX):
                obj[k] = v
    return obj


def terminal_state(
    finish_reason: str | None, extra: dict[str, Any], same: bool
) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
    """(status, error, incomplete_details) for a finished response: a same-protocol upstream's
    exact status is re-emitted when it still agrees with the (possibly transformed) finish reason."""
    template = extra.get(X_OBJECT) if same else None
    upstream_status = extra.get(X_STATUS) if same else None
    if upstream_status is not None:
        details = (template or {}).get("incomplete_details", extra.get("incomplete_details"))
        err = (template or {}).get("error", extra.get("error"))
        synth, _ = status_for(finish_reason)
        if synth == upstream_status or (upstream_status == "cancelled" and finish_reason == "other"):
            return upstream_status, err, details
    status, details = status_for(finish_reason)
    err = {"code": "server_error", "message": "The upstream response failed."} if status == "failed" else None
    return status, err, details


def client_response_id(rid: str | None) -> str:
    """Responses clients expect ``resp_`` ids; foreign ids keep their text after the prefix."""
    if not rid:
        return new_id("resp_")
    return rid if rid.startswith("resp_") else "resp_" + rid


def encode_response(resp: Response, ctx: EncodeContext) -> dict:
    """The client-facing Responses object; ``ctx.model`` is the client's logical model."""
    same = ctx.source_protocol == PROTOCOL
    status, error, details = terminal_state(resp.finish_reason, resp.extra, same)
    template = resp.extra.get(X_OBJECT) if same else None
    return response_object(
        rid=resp.id if same and resp.id else client_response_id(resp.id),
        model=ctx.model,
        created_at=resp.created or int(time.time()),
        status=status,
        output=encode_items(resp.output, same=same, output=True),
        usage=encode_usage(resp.usage) if resp.usage is not None else None,
        template=template,
        extra=resp.extra,
        error=error,
        incomplete_details=details,
    )


def error_body(
    status: int, code: str, message: str, *, param: str | None = None, error_type: str | None = None
) -> dict:
    """OpenAI-style error envelope (reference protocols.md §6.2)."""
    return {
        "error": {
            "message": message,
            "type": error_type or ("server_error" if status >= 500 else "invalid_request_error"),
            "param": param,
            "code": code,
        }
    }
