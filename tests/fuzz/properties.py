"""The properties every codec must keep, as plain functions (shared by the hypothesis tests and
regression tests): they return normally or fail with an AssertionError that names what broke.
Any other exception escaping a codec propagates, which is the crash being hunted.

- ``check_request``: a client body either decodes into a Request that every upstream protocol can
  prepare and encode into JSON-serialisable bytes (no internal ``_gw_`` key the client did not
  send), or raises ProtocolError naming the field. An encoder may also refuse with a
  ProtocolError that names a field (Messages' thinking rules): the proxy turns that into a 400.
- ``check_response``: an upstream body either decodes (and every client protocol can encode the
  Response) or raises UpstreamProtocolError.
- ``check_stream``: StreamDecoder.feed/close only ever return events; once a terminal
  (ResponseDone or StreamError) is out, nothing but more of nothing follows; every client
  StreamEncoder can encode what came out.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from gateway.errors import ProtocolError, UpstreamProtocolError
from gateway.protocols import CLIENT_PROTOCOLS, UPSTREAM_PROTOCOLS, codec
from gateway.protocols.base import EncodeContext
from gateway.protocols.json_depth import too_deep
from gateway.protocols.sse import SSEParser
from gateway.proxy.prepare import prepare_for_upstream
from gateway.urp import Request, Response, clone
from gateway.urp import events as ev
from gateway.urp.nodes import INTERNAL_PREFIX
from gateway.urp.synth import response_to_events

TERMINALS = (ev.ResponseDone, ev.StreamError)
REQUIRED_FIELDS = frozenset({"model", "messages", "input", "max_tokens", "contents"})


def internal_keys(value: Any, found: set[str] | None = None) -> set[str]:
    """Every dict key starting with the internal prefix, anywhere in a JSON value."""
    found = set() if found is None else found
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and key.startswith(INTERNAL_PREFIX):
                found.add(key)
            internal_keys(item, found)
    elif isinstance(value, list):
        for item in value:
            internal_keys(item, found)
    return found


def _assert_names_field(exc: ProtocolError, where: str) -> None:
    assert isinstance(exc.param, str) and exc.param.strip(), (
        f"{where}: ProtocolError without a param: {exc.message!r}"
    )
    assert isinstance(exc.message, str) and exc.message, f"{where}: ProtocolError without a message"


def check_request(protocol: str, body: Any) -> Request | None:
    """Decode ``body`` as a ``protocol`` client request and encode it for every upstream."""
    if too_deep(body):
        return None  # the proxy refuses it with a 400 before decoding (gateway/proxy/generate.py)
    try:
        req = codec(protocol).decode_request(body)
    except ProtocolError as exc:
        if isinstance(body, dict):  # a non-object body is refused by the proxy before decoding
            _assert_names_field(exc, f"{protocol}.decode_request")
            root = re.split(r"[.\[]", exc.param)[0]
            assert root in body or root in REQUIRED_FIELDS, (
                f"{protocol}.decode_request: param {exc.param!r} names no field of the body"
            )
        return None
    assert isinstance(req, Request)
    sent = internal_keys(body)
    for upstream in UPSTREAM_PROTOCOLS:
        areq = clone(req)
        try:  # custom tools towards an upstream without them: a 400 naming ``tools`` (issue 19)
            prepare_for_upstream(
                areq,
                upstream_protocol=upstream,
                source_protocol=protocol,
                strip_nested=True,
                extra_whitelist=None,
            )
        except ProtocolError as exc:
            _assert_names_field(exc, f"{protocol}->{upstream}.prepare")
            continue
        try:
            out = codec(upstream).encode_request(
                areq, EncodeContext(model="up-model", source_protocol=protocol)
            )
        except ProtocolError as exc:
            _assert_names_field(exc, f"{protocol}->{upstream}.encode_request")
            continue
        assert isinstance(out, dict), f"{protocol}->{upstream}: encode_request returned {type(out)}"
        orjson.dumps(out)  # what build_attempt does next; raises on non-JSON values
        leaked = internal_keys(out) - sent
        assert not leaked, f"{protocol}->{upstream}: internal markers on the wire: {sorted(leaked)}"
    return req


def encode_for_clients(resp: Response, source: str, sent: frozenset[str] | set[str] = frozenset()) -> None:
    """Every client protocol can encode ``resp`` whole and as a synthesised stream."""
    for client in CLIENT_PROTOCOLS:
        ccodec = codec(client)
        out = ccodec.encode_response(clone(resp), EncodeContext(model="logical", source_protocol=source))
        assert isinstance(out, dict)
        orjson.dumps(out)
        leaked = internal_keys(out) - set(sent)
        assert not leaked, f"{source}->{client}: internal markers in the response: {sorted(leaked)}"
        encode_stream(client, response_to_events(clone(resp)), source, sent)


def check_response(protocol: str, body: Any) -> Response | None:
    """Decode ``body`` as a ``protocol`` upstream answer, then encode it for every client."""
    if too_deep(body):
        return None  # the proxy fails the attempt before decoding (gateway/proxy/generate.py)
    try:
        resp = codec(protocol).decode_response(body)
    except UpstreamProtocolError as exc:
        assert isinstance(exc.message, str)
        return None
    assert isinstance(resp, Response)
    encode_for_clients(resp, protocol, internal_keys(body))
    return resp


def decode_stream(
    protocol: str, frames: list[tuple[str | None, str]], *, close: bool = True
) -> list[ev.Event]:
    """Feed ``frames`` to a fresh decoder the way the proxy does; check the event grammar's
    terminal rule and return every event."""
    decoder = codec(protocol).StreamDecoder()
    events: list[ev.Event] = []
    for name, data in frames:
        got = decoder.feed(name, data)
        assert isinstance(got, list), f"{protocol}.feed returned {type(got)}"
        events.extend(got)
        if getattr(decoder, "finished", False):
            break
    if close and not getattr(decoder, "finished", False):
        got = decoder.close()
        assert isinstance(got, list), f"{protocol}.close returned {type(got)}"
        events.extend(got)
    for event in events:
        assert isinstance(event, ev.Event.__args__), f"{protocol}: not an event: {event!r}"  # type: ignore[attr-defined]
    terminal_at = [i for i, e in enumerate(events) if isinstance(e, TERMINALS)]
    if close:
        assert len(terminal_at) == 1, (
            f"{protocol}: {len(terminal_at)} terminals in {[e.type for e in events]}"
        )
    else:
        assert len(terminal_at) <= 1
    if terminal_at:
        assert terminal_at[0] == len(events) - 1, f"{protocol}: events after the terminal"
    return events


def encode_stream(
    client: str, events: list[ev.Event], source: str | None, sent: frozenset[str] | set[str] = frozenset()
) -> bytes:
    """Run ``events`` through ``client``'s StreamEncoder (and its close): bytes out, each frame's
    data JSON (or ``[DONE]``), no internal key the upstream did not send itself."""
    enc = codec(client).StreamEncoder(EncodeContext(model="logical", source_protocol=source))
    out = [enc.encode(event) for event in events]
    out.append(enc.close() or b"")
    data = b"".join(out)
    assert isinstance(data, bytes)
    parser = SSEParser()
    for _name, payload in [*parser.feed(data), *parser.close()]:
        if payload == "[DONE]":
            continue
        obj = orjson.loads(payload)
        leaked = internal_keys(obj) - set(sent)
        assert not leaked, f"{source}->{client}: internal markers in SSE: {sorted(leaked)}"
    return data


def frames_internal_keys(frames: list[tuple[str | None, str]]) -> set[str]:
    found: set[str] = set()
    for _name, data in frames:
        try:
            internal_keys(orjson.loads(data), found)
        except orjson.JSONDecodeError:
            pass
    return found


def check_stream(protocol: str, frames: list[tuple[str | None, str]]) -> list[ev.Event]:
    events = decode_stream(protocol, frames)
    sent = frames_internal_keys(frames)
    for client in CLIENT_PROTOCOLS:
        encode_stream(client, events, protocol, sent)
    return events
