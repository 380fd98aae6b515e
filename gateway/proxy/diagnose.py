"""Failed attempts in an operator's words, for captures, the playground and channel checks:
the target (host and port, never the path's query or the key) and the error class
("connect refused 127.0.0.1:9100", "timeout after 30 s", "upstream status 500: ...").

Off the hot path: only called when something records a failure."""

from __future__ import annotations

from urllib.parse import urlsplit

import aiohttp

from gateway.errors import AttemptFailed

EXCERPT = 300


def target(url: str) -> str:
    """``host:port`` of an upstream URL."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.hostname}:{port}"


def describe_exception(
    exc: BaseException, url: str, total: float | None, connect: float | None = None
) -> str:
    """A transport exception as an error class plus the target."""
    where = target(url)
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return f"connect timeout after {connect:g} s ({where})" if connect else f"connect timeout ({where})"
    if isinstance(exc, TimeoutError):
        return f"timeout after {total:g} s ({where})" if total else f"timeout ({where})"
    text = f"{type(exc).__name__}: {exc}"
    low = text.lower()
    if isinstance(exc, ConnectionRefusedError) or "connect call failed" in low or "refused" in low:
        return f"connect refused {where}"
    if (
        isinstance(exc, aiohttp.ClientConnectorDNSError)
        or "name or service not known" in low
        or "getaddrinfo" in low
    ):
        return f"DNS lookup failed for {urlsplit(url).hostname}"
    if "ssl" in low or "certificate" in low:
        return f"TLS error talking to {where}"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return f"server disconnected ({where})"
    return f"{type(exc).__name__} talking to {where}"


def describe_failure(
    failed: AttemptFailed, url: str, total: float | None, connect: float | None = None, body: object = None
) -> str:
    """A failed attempt: the transport error behind it when there was one (kept as the
    exception's context by ``errors.transport_failure``), else its upstream status with an
    excerpt of the body, else its own message."""
    cause = failed.__cause__ or failed.__context__
    if cause is not None and not isinstance(cause, AttemptFailed) and failed.status is None:
        return describe_exception(cause, url, total, connect)
    if failed.code == "upstream_timeout":
        return f"timeout after {total:g} s ({target(url)})" if total else f"timeout ({target(url)})"
    if failed.status is not None:
        excerpt = ""
        if isinstance(body, str | bytes) and body:
            text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
            excerpt = text[:EXCERPT] + ("…" if len(text) > EXCERPT else "")
        elif body is not None:
            import orjson

            text = orjson.dumps(body, default=repr).decode()
            excerpt = text[:EXCERPT] + ("…" if len(text) > EXCERPT else "")
        return f"upstream status {failed.status} from {target(url)}" + (f": {excerpt}" if excerpt else "")
    return f"{failed.message} ({target(url)})"
