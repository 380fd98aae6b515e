"""Typed errors raised by codecs. The proxy turns them into the client's protocol shape."""

from __future__ import annotations


class ProtocolError(Exception):
    """The client's request is malformed. Becomes a 400 naming the field."""

    status = 400

    def __init__(self, message: str, *, param: str | None = None, code: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code


class UpstreamProtocolError(Exception):
    """The upstream answered something we cannot decode (bad JSON, missing fields, an embedded
    error object). The proxy treats it as a failed attempt."""

    def __init__(self, message: str, *, code: str = "invalid_upstream_response", status: int | None = None,
                 error_type: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.error_type = error_type
