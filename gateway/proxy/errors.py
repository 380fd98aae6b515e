"""How the proxy turns failures into answers: the client's protocol error shape for a
``ClientError`` (the hierarchy itself is ``gateway.errors``), the mapping of every other failure
to a ``ClientError`` or an ``AttemptFailed``, and sanitising upstream error text (no URL, host,
IP, key or body)."""

from __future__ import annotations

import logging
import re
from typing import Any

import orjson

from gateway.errors import (
    AttemptFailed,
    ClientError,
    ProtocolError,
    TransformFailed,
    TransformInitFailed,
    TransformRejected,
)
from gateway.protocols import codec
from gateway.urp import events as ev

log = logging.getLogger("gateway.proxy")

__all__ = [
    "ClientError",
    "error_body",
    "error_bytes",
    "mask",
    "safe_token",
    "describe_upstream_error",
    "to_client_error",
    "exhausted",
    "from_stream_error",
    "masked_stream_error",
    "transport_failure",
    "status_failure",
    "is_retryable_status",
]


def error_body(protocol: str, err: ClientError, request_id: str | None = None) -> dict[str, Any]:
    """The client codec's error envelope, plus upstream diagnostics and (Messages) the request id."""
    body = codec(protocol).error_body(
        err.status, err.code, err.message, param=err.param, error_type=err.error_type
    )
    inner = body.get("error")
    if err.upstream and isinstance(inner, dict):
        for k, v in err.upstream.items():
            if v is not None:
                inner.setdefault(k, v)
    if protocol == "messages" and request_id:
        body.setdefault("request_id", request_id)
    return body


def error_bytes(protocol: str, err: ClientError, request_id: str | None = None) -> bytes:
    return orjson.dumps(error_body(protocol, err, request_id))


# -- sanitising upstream text -------------------------------------------------------------------

_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>]+")
_DOMAIN = re.compile(r"\b(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,24}\b")
_IPV4 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")
_API_KEY = re.compile(r"(?i)(api[_-]?key\s*[:=]\s*)\S+")
_BEARER = re.compile(r"(?i)(bearer\s+)\S+")
_SECRETISH = re.compile(r"\b(?:sk|pk|rk|key)[-_][A-Za-z0-9_-]{12,}\b")
_QUOTA = re.compile(
    r"(?i)insufficient_quota|rate_limit_exceeded|resource_exhausted|credit_balance_too_low|"
    r"quota exceeded|exceeded your current quota|billing_hard_limit|insufficient_balance"
)
_SAFE_TOKEN = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
QUOTA_TEXT = "upstream provider quota exceeded; please retry later or contact the operator"
MAX_MESSAGE = 2048


def mask(text: str, secrets: tuple[str, ...] = ()) -> str:
    """URLs, bare host names, IPv4 addresses and key-looking tokens become ``***``; any of the
    given secrets (the channel key) is removed verbatim first."""
    for secret in secrets:  # longest first (see ``secrets.channel_secrets``)
        if secret and len(secret) >= 4 and secret in text:
            text = text.replace(secret, "***")
    text = _URL.sub("***", text)
    text = _IPV4.sub("***.***.***.***", text)
    text = _DOMAIN.sub("***", text)
    text = _API_KEY.sub(r"\1***", text)
    text = _BEARER.sub(r"\1***", text)
    text = _SECRETISH.sub("***", text)
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE] + "... (truncated)"
    return text


def safe_token(value: Any) -> str | None:
    """An upstream code/type passes through only when enum-shaped."""
    if isinstance(value, str) and _SAFE_TOKEN.match(value):
        return value
    return None


def describe_upstream_error(
    status: int, raw: bytes, secrets: tuple[str, ...] = ()
) -> tuple[str, str | None, str | None]:
    """(client-safe message, upstream code, upstream type) for a non-2xx upstream answer."""
    message = code = etype = None
    try:
        body = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, list) and body and isinstance(body[0], dict):  # Gemini sometimes wraps in a list
        body = body[0]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            message = err.get("message") if isinstance(err.get("message"), str) else None
            code = safe_token(err.get("code")) or safe_token(err.get("status"))
            etype = safe_token(err.get("type"))
        elif isinstance(err, str):
            message = err
    if message is None:
        return f"upstream status {status}", code, etype
    if _QUOTA.search(message) or (code and _QUOTA.search(code)):
        return QUOTA_TEXT, code, etype
    return f"upstream status {status}: {mask(message, secrets)}", code, etype


# -- classifying failures ------------------------------------------------------------------------


def is_retryable_status(status: int) -> bool:
    return status in (408, 429) or status >= 500


def to_client_error(exc: Exception) -> ClientError:
    """Rule and encoder failures stop routing; this is what the client sees."""
    if isinstance(exc, ClientError):
        return exc
    if isinstance(exc, TransformRejected):
        return ClientError(400, "invalid_request", exc.message, param=exc.param)
    if isinstance(exc, TransformInitFailed):
        return ClientError(500, "transform_init_failed", str(exc), error_type="server_error")
    if isinstance(exc, TransformFailed):
        return ClientError(
            500, "transform_apply_failed", f"transform apply failed: {exc}", error_type="server_error"
        )
    if isinstance(exc, ProtocolError):
        return ClientError(400, "invalid_request", exc.message, param=exc.param)
    log.exception("unexpected error in the proxy", exc_info=exc)
    return ClientError(500, "internal_error", "internal gateway error", error_type="server_error")


def exhausted(last: AttemptFailed | None, logical_model: str) -> ClientError:
    """Routing ran out of attempts: see ``failure.exhausted`` (the last upstream answer decides)."""
    from .failure import exhausted as decide

    return decide(last, logical_model)


def from_stream_error(se: ev.StreamError, secrets: tuple[str, ...] = ()) -> AttemptFailed:
    """A stream error before anything reached the client: a failed attempt whose message (it
    reaches the 502 body and the log) is masked with the channel's ``secrets``."""
    status = se.status
    retryable = status is None or is_retryable_status(status)
    message = f"upstream stream error: {mask(se.message, secrets)}" if se.message else "upstream stream error"
    return AttemptFailed(
        message,
        status=status,
        code=safe_token(se.code),
        error_type=safe_token(se.error_type),
        retryable=retryable,
        rate_limited=status == 429,
    )


def masked_stream_error(se: ev.StreamError, secrets: tuple[str, ...]) -> ev.StreamError:
    """An upstream's mid-stream error event made safe to relay: message masked, code and type
    only when enum-shaped, no upstream extras (they are upstream text too)."""
    return ev.StreamError(
        message=mask(se.message or "upstream stream error", secrets),
        code=safe_token(se.code),
        error_type=safe_token(se.error_type),
        status=se.status,
    )


def transport_failure(exc: BaseException, secrets: tuple[str, ...] = ()) -> AttemptFailed:
    """``detail`` (logged) is the exception's repr, which names hosts and URLs: masked too."""
    from gateway.fetch import AddressRefused

    detail = mask(repr(exc), secrets)
    refused = exc if isinstance(exc, AddressRefused) else getattr(exc, "os_error", None)
    if isinstance(refused, AddressRefused):  # guard_channel_urls is on and refused this channel
        return AttemptFailed(
            f"channel address refused by guard_channel_urls: {mask(str(refused), secrets)}",
            code="upstream_address_refused",
            detail=detail,
        )
    if isinstance(exc, TimeoutError):
        return AttemptFailed(
            "upstream request timed out", code="upstream_timeout", retryable=True, detail=detail
        )
    return AttemptFailed("failed to request upstream", code="upstream_error", retryable=True, detail=detail)


def status_failure(
    status: int, data: bytes, secrets: tuple[str, ...], retry_after: str | None = None
) -> AttemptFailed:
    from .failure import retry_after_value

    message, code, etype = describe_upstream_error(status, data, secrets)
    return AttemptFailed(
        message,
        status=status,
        code=code,
        error_type=etype,
        retryable=is_retryable_status(status),
        rate_limited=status == 429,
        retry_after=retry_after_value(retry_after),
    )
