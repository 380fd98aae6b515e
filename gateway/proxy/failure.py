"""What the client hears when every upstream attempt failed (issue 19, error fidelity).

A deliberate difference from the reference (control-plane.md §2.5/§6.2, which answers 502 for
every exhausted route): when the *last* upstream answer was client-attributable — 400, 404 (an
unknown upstream model), 413, 422 — or a 429, the client gets that status in its own protocol's
shape (429 with the upstream's ``Retry-After``). SDKs then raise the right error class
(``BadRequestError``, ``NotFoundError``, ``RateLimitError``...) and, above all, do not retry a
request that can never succeed: a 502 makes the ``openai`` and ``anthropic`` SDKs retry twice,
tripling the upstream calls. Transport failures, upstream 5xx and upstream 401/403 (the
operator's credentials, not the client's) stay 502.
"""

from __future__ import annotations

import re

from gateway.errors import AttemptFailed

from .errors import ClientError, safe_token

CLIENT_ATTRIBUTABLE = frozenset({400, 404, 413, 422, 429})
_RETRY_AFTER = re.compile(r"^(?:\d{1,7}|[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT)$")


def retry_after_value(value: str | None) -> str | None:
    """An upstream ``Retry-After`` worth passing on: delta-seconds or an HTTP date, else None
    (anything else could smuggle text into our response headers)."""
    if value is None:
        return None
    value = value.strip()
    return value if _RETRY_AFTER.match(value) else None


def exhausted(last: AttemptFailed | None, logical_model: str) -> ClientError:
    """The client error after the route ran out of attempts (``last`` is the final failure)."""
    if last is None:
        return ClientError(
            503,
            "no_healthy_upstream",
            f"No available upstream provider for model: {logical_model}",
            error_type="server_error",
        )
    upstream = {
        "upstream_status": last.status,
        "upstream_code": safe_token(last.code),
        "upstream_type": safe_token(last.error_type),
    }
    message = f"All upstream attempts failed for model: {logical_model}. Last error: {last.message}"
    if last.status in CLIENT_ATTRIBUTABLE:
        headers: tuple[tuple[bytes, bytes], ...] = ()
        if last.status == 429 and last.retry_after:
            headers = ((b"retry-after", last.retry_after.encode("ascii")),)
        default_code = "rate_limit_exceeded" if last.status == 429 else "upstream_error"
        return ClientError(
            last.status, safe_token(last.code) or default_code, message, upstream=upstream, headers=headers
        )
    return ClientError(
        502,
        safe_token(last.code) or "upstream_error",
        message,
        error_type="upstream_error",
        upstream=upstream,
    )
