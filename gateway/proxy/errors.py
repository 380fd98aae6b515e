"""Client-facing errors: one exception type for "answer the client with this", the client's
protocol error shape, and sanitising upstream error text (no URL, host, IP, key or body)."""

from __future__ import annotations

import re
from typing import Any

import orjson

from gateway.protocols import codec


class ClientError(Exception):
    """Stop and answer the client with this status/code/message in its protocol's shape."""

    def __init__(self, status: int, code: str, message: str, *, param: str | None = None,
                 error_type: str | None = None, upstream: dict[str, Any] | None = None,
                 headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.error_type = error_type
        self.upstream = upstream  # upstream_status / upstream_code / upstream_type diagnostics
        self.headers = headers  # extra response headers (a 429's Retry-After)


def error_body(protocol: str, err: ClientError, request_id: str | None = None) -> dict[str, Any]:
    """The client codec's error envelope, plus upstream diagnostics and (Messages) the request id."""
    body = codec(protocol).error_body(err.status, err.code, err.message, param=err.param,
                                      error_type=err.error_type)
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
_QUOTA = re.compile(r"(?i)insufficient_quota|rate_limit_exceeded|resource_exhausted|credit_balance_too_low|"
                    r"quota exceeded|exceeded your current quota|billing_hard_limit|insufficient_balance")
_SAFE_TOKEN = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
QUOTA_TEXT = "upstream provider quota exceeded; please retry later or contact the operator"
MAX_MESSAGE = 2048


def mask(text: str, secrets: tuple[str, ...] = ()) -> str:
    """URLs, bare host names, IPv4 addresses and key-looking tokens become ``***``; any of the
    given secrets (the channel key) is removed verbatim first."""
    for secret in secrets:
        if secret and len(secret) >= 4:
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


def describe_upstream_error(status: int, raw: bytes, secrets: tuple[str, ...] = ()
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
