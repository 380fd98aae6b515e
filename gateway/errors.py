"""Every exception type the gateway raises on the request path, in one place.

::

    Exception
    ├── ProtocolError            a client request a codec cannot decode   -> 400
    ├── UpstreamProtocolError    an upstream answer a codec cannot decode -> failed attempt
    ├── TransformRejected        a rule refuses the client's request      -> 400
    ├── TransformFailed          an operator's rule failed at run time    -> 500 transform_apply_failed
    │   └── TransformInitFailed  a stored rule could not be built         -> 500 transform_init_failed
    ├── AttemptFailed            one upstream attempt failed, nothing sent -> next attempt / 502 / 503
    └── ClientError              answer the client with this status and code (every path ends here)

``gateway.proxy.errors`` writes a ``ClientError`` in the client protocol's error shape;
``gateway.proxy.serve.to_client_error`` maps the others to a ``ClientError``. This module imports
nothing from the project, so codecs, transforms and the proxy can all depend on it.
"""

from __future__ import annotations

from typing import Any


class ProtocolError(Exception):
    """The client's request is malformed. Becomes a 400 naming the field."""

    status = 400

    def __init__(
        self, message: str, *, param: str | None = None, code: str = "invalid_request_error"
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code


class UpstreamProtocolError(Exception):
    """The upstream answered something we cannot decode (bad JSON, missing fields, an embedded
    error object). The proxy treats it as a failed attempt."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "invalid_upstream_response",
        status: int | None = None,
        error_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.error_type = error_type


class TransformRejected(Exception):
    """The client's request cannot be served under this rule (a client mistake): 400 in the
    client's protocol shape."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class TransformFailed(Exception):
    """An operator's rule failed at run time: 500 ``transform_apply_failed``."""


class TransformInitFailed(TransformFailed):
    """A stored rule could not be instantiated (unknown id, config its class refuses): 500
    ``transform_init_failed`` when a request reaches it, never a crash of the snapshot build."""


class AttemptFailed(Exception):
    """An upstream attempt failed before anything reached the client.

    ``retryable``: connect errors, timeouts, 408, 429, 5xx (same channel may be retried, and the
    breaker counts it). Otherwise the router moves straight to the next channel."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        error_type: str | None = None,
        retryable: bool = False,
        rate_limited: bool = False,
        detail: str | None = None,
        retry_after: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.error_type = error_type
        self.retryable = retryable
        self.rate_limited = rate_limited
        self.detail = detail  # server-side log text (may name the URL), never sent to the client
        self.retry_after = retry_after  # a sanitised upstream Retry-After (see proxy.failure.exhausted)


class ClientError(Exception):
    """Stop and answer the client with this status/code/message in its protocol's shape."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        param: str | None = None,
        error_type: str | None = None,
        upstream: dict[str, Any] | None = None,
        headers: tuple[tuple[bytes, bytes], ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.error_type = error_type
        self.upstream = upstream  # upstream_status / upstream_code / upstream_type diagnostics
        self.headers = headers  # extra response headers, e.g. Retry-After on a 429
