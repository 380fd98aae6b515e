"""The secrets the gateway knows for one channel, so that every path turning upstream bytes
into client-visible, logged or captured text can remove them verbatim.

An upstream can echo anything back in an error (its own URL with a token in the query, the key
we sent, the internal host name). Generic patterns (``errors.mask``) catch URL- and key-shaped
text; this list catches the exact values even when they do not look like secrets (a short key,
a bare host, a token in a path segment)."""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import parse_qsl, unquote, urlsplit

MIN_SECRET = 4  # shorter values would mask ordinary words


def _url_parts(url: str) -> list[str]:
    """The URL itself and the parts of it that may be secret: credentials, host, query values
    and token-like path segments."""
    out = [url, url.rstrip("/")]
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return out
    out.append(parts.netloc)
    if host:
        out.append(host)
        if port:
            out.append(f"{host}:{port}")
    for value in (parts.username, parts.password):
        if value:
            out.extend((value, unquote(value)))
    for _name, value in parse_qsl(parts.query, keep_blank_values=False):
        out.append(value)
    for segment in parts.path.split("/"):
        if len(segment) >= 20 or (len(segment) >= 8 and any(c.isdigit() for c in segment)):
            out.append(segment)
    return out


@lru_cache(maxsize=4096)
def channel_secrets(api_key: str, base_url: str, header_values: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Every secret of a channel, longest first (so a URL is removed before its host), each at
    least ``MIN_SECRET`` characters. Cached: channels are few and their values rarely change."""
    found = {api_key, *header_values, *_url_parts(base_url)} if base_url else {api_key, *header_values}
    return tuple(sorted((s for s in found if s and len(s) >= MIN_SECRET), key=len, reverse=True))


def secrets_of(channel: object) -> tuple[str, ...]:
    """``channel_secrets`` for a ``ChannelSnap`` (header values count: they often carry tokens)."""
    headers = tuple(v for _n, v in getattr(channel, "extra_headers", ()))
    return channel_secrets(
        getattr(channel, "api_key", "") or "", getattr(channel, "base_url", "") or "", headers
    )


def remove(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, "***")
    return text
