"""Stream captures compared as whole answers: the recorded SSE frames decoded by the protocol's
own stream decoder and folded into one URP ``Response``, so the viewer can diff the upstream's
assembled answer (before the response chains) with the client's (after them) across protocols,
instead of frame by frame."""

from __future__ import annotations

from typing import Any

from gateway.protocols import UPSTREAM_PROTOCOLS, codec
from gateway.protocols.sse import SSEParser
from gateway.urp import Response
from gateway.urp import events as ev
from gateway.urp.serialize import to_jsonable


def _split_recorded(frames: list[str]) -> list[tuple[str | None, str]]:
    """Upstream frames as the capture recorder keeps them: bare data, or ``event: x\\ndata: y``."""
    out: list[tuple[str | None, str]] = []
    for frame in frames:
        if frame.startswith("event: ") and "\ndata: " in frame:
            name, data = frame[7:].split("\ndata: ", 1)
            out.append((name, data))
        else:
            out.append((None, frame))
    return out


def _parse_chunks(chunks: list[str]) -> list[tuple[str | None, str]]:
    parser = SSEParser()
    # The capture keeps each client event as one frame without its blank separator line.
    out = list(
        parser.feed("".join(c if c.endswith("\n\n") else c.rstrip("\n") + "\n\n" for c in chunks).encode())
    )
    out.extend(parser.close())
    return out


def assemble(protocol: str, frames: list[str] | None, *, recorded: bool) -> dict[str, Any] | None:
    """The stream folded into a JSON-able URP Response; None when it cannot be (no frames, an
    unknown protocol, a decoder error). ``recorded``: frames as the upstream recorder stores
    them; else raw SSE chunks as sent to the client."""
    if not frames or protocol not in UPSTREAM_PROTOCOLS:
        return None
    pairs = _split_recorded(frames) if recorded else _parse_chunks(frames)
    try:
        decoder: Any = codec(protocol).StreamDecoder()
        events: list[ev.Event] = []
        for name, payload in pairs:
            if payload.strip() == "[DONE]" and protocol != "chat_completion":
                continue
            events.extend(decoder.feed(name, payload))
            if decoder.finished:
                break
        if not decoder.finished:
            events.extend(decoder.close())
    except Exception:
        return None
    start = None
    for event in events:
        if isinstance(event, ev.ResponseStart):
            start = event
        elif isinstance(event, ev.ResponseDone):
            resp = Response(
                id=start.id if start else "",
                model=start.model if start else "",
                output=list(event.output),
                finish_reason=event.finish_reason,
                usage=event.usage,
                created=start.created if start else None,
                extra=dict(event.extra),
            )
            return to_jsonable(resp)
    return None
