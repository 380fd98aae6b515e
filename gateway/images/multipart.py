"""multipart/form-data, both ways: parsing what clients send to ``/v1/images/edits`` (and what the
mock upstream receives), and writing the edits request the ``openai_image`` codec sends.

Parsing uses the standard library's MIME parser (correct on boundaries, quoting and headers); the
caller has already bounded the body size.
"""

from __future__ import annotations

import email.parser
import email.policy
import os
from dataclasses import dataclass


class MultipartError(ValueError):
    """The body is not usable multipart/form-data."""


@dataclass(slots=True)
class Part:
    name: str
    data: bytes
    filename: str | None = None
    content_type: str | None = None

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


def parse(body: bytes, content_type: str) -> list[Part]:
    """The parts of a multipart/form-data body, in order."""
    if not content_type.lower().startswith("multipart/form-data") or "boundary=" not in content_type:
        raise MultipartError("expected multipart/form-data with a boundary")
    head = b"Content-Type: " + content_type.encode("latin-1") + b"\r\nMIME-Version: 1.0\r\n\r\n"
    try:
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    except Exception as exc:  # the stdlib parser raises a variety of errors on garbage
        raise MultipartError(f"malformed multipart body: {type(exc).__name__}") from None
    if not msg.is_multipart():
        raise MultipartError("malformed multipart body")
    parts: list[Part] = []
    for sub in msg.iter_parts():
        disposition = sub.get("Content-Disposition", "")
        if not str(disposition).lower().startswith("form-data"):
            continue
        name = sub.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        filename = sub.get_filename()
        raw_payload = sub.get_payload(decode=True)
        payload = raw_payload if isinstance(raw_payload, bytes) else b""
        ctype = sub.get_content_type() if sub.get("Content-Type") else None
        parts.append(Part(name=name, data=payload, filename=filename, content_type=ctype))
    return parts


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\r", " ").replace("\n", " ")


def encode(fields: list[tuple[str, str]], files: list[tuple[str, str, str, bytes]]) -> tuple[bytes, str]:
    """(body, content type) for text ``fields`` (name, value) and ``files`` (name, filename,
    content type, bytes)."""
    boundary = "----monogate" + os.urandom(12).hex()
    out = bytearray()
    for name, value in fields:
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{_quote(name)}"\r\n\r\n'.encode()
        out += value.encode("utf-8") + b"\r\n"
    for name, filename, ctype, data in files:
        out += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{_quote(name)}"; '
            f'filename="{_quote(filename)}"\r\nContent-Type: {ctype}\r\n\r\n'
        ).encode()
        out += data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out), f"multipart/form-data; boundary={boundary}"
