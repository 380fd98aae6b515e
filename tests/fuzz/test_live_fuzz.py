"""Mutated client bodies against the real server (uvicorn subprocess) and the mock upstream.

For each of the three endpoints, streaming and not, a fixed-seed generator (``corpus.mutate``,
not hypothesis: no shrinking against a live server) posts a few hundred mutations of a rich valid
request, routed to each upstream protocol in turn. Every answer must be a 2xx or a 4xx in the
client's protocol shape: never a 5xx, never HTML, never a Python traceback, never the upstream
key or the mock upstream's address; a stream never carries an ``internal_error`` event; and the
server never logs an unexpected exception.
"""

from __future__ import annotations

import random
from typing import Any

import httpx
import orjson
import pytest

from gateway.protocols.sse import SSEParser
from tests.servers import make_key, make_route

from .corpus import REQUEST_SEEDS, mutate

PATHS = {"chat_completion": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
UPSTREAMS = ("chat_completion", "responses", "messages", "gemini")
BODIES_PER_CASE = 150  # per endpoint and stream mode: 900 requests in all
SEED = 20261130


@pytest.fixture
def routed(gateway, mock_upstream):
    """A logical model per upstream protocol, all on the mock; returns (server, secret, upstream keys)."""
    keys = []
    for protocol in UPSTREAMS:
        route = make_route(
            protocol, f"fuzz-{protocol}", mock_upstream.base_url(protocol), upstream_model=f"up-{protocol}"
        )
        keys.append(route.upstream_key)
    _, secret = make_key(allowed_models=["fuzz-*"])
    gateway.wait_config()
    return gateway, secret, keys


def _bodies(protocol: str, stream: bool) -> list[tuple[str, bytes]]:
    """(description, raw body) pairs, deterministic for a protocol and mode."""
    rng = random.Random(f"{SEED}-{protocol}-{stream}")
    out = []
    for i in range(BODIES_PER_CASE):
        seed: dict[str, Any] = dict(REQUEST_SEEDS[protocol])
        upstream = UPSTREAMS[i % len(UPSTREAMS)]
        seed["model"] = f"fuzz-{upstream}"
        seed["stream"] = stream
        if upstream in ("messages", "gemini") and isinstance(seed.get("tools"), list):
            # custom tools cannot reach these upstreams (a 400, issue 19): keep the mutations answerable
            seed["tools"] = [
                t for t in seed["tools"] if not (isinstance(t, dict) and t.get("type") == "custom")
            ]
        body = mutate(rng, seed)
        try:
            raw = orjson.dumps(body)
        except orjson.JSONEncodeError:  # nested deeper than orjson writes: the stdlib can
            import json

            raw = json.dumps(body).encode()
        out.append((f"{protocol} stream={stream} #{i}", raw))
    return out


def _assert_error_shape(protocol: str, response: httpx.Response, what: str) -> None:
    assert response.headers.get("content-type", "").startswith("application/json"), what
    payload = response.json()
    if protocol == "messages":
        assert payload.get("type") == "error" and isinstance(payload.get("error"), dict), (what, payload)
        error = payload["error"]
        assert isinstance(error.get("type"), str) and error["type"], (what, payload)
    else:
        assert isinstance(payload.get("error"), dict), (what, payload)
        error = payload["error"]
        assert isinstance(error.get("code"), str) and "type" in error, (what, payload)
    assert isinstance(error.get("message"), str) and error["message"], (what, payload)


def _assert_success_shape(protocol: str, response: httpx.Response, stream: bool, what: str) -> None:
    ctype = response.headers.get("content-type", "")
    if not stream or ctype.startswith("application/json"):
        assert ctype.startswith("application/json"), (what, ctype)
        payload = response.json()
        if protocol == "chat_completion":
            assert isinstance(payload.get("choices"), list), (what, payload)
        elif protocol == "responses":
            assert payload.get("object") == "response", (what, payload)
        else:
            assert payload.get("type") == "message", (what, payload)
        return
    assert ctype.startswith("text/event-stream"), (what, ctype)
    parser = SSEParser()
    frames = [*parser.feed(response.content), *parser.close()]
    assert frames, (what, "empty stream")
    for name, data in frames:
        if data == "[DONE]":
            assert protocol == "chat_completion", (what, "only a Chat stream has a [DONE]")
            continue
        obj = orjson.loads(data)
        error = obj.get("error") if isinstance(obj, dict) else None
        response_obj = obj.get("response") if isinstance(obj, dict) else None
        if isinstance(response_obj, dict) and isinstance(response_obj.get("error"), dict):
            error = response_obj["error"]
        code = obj.get("code") if isinstance(obj, dict) and name == "error" else None
        if isinstance(error, dict):
            code = error.get("code") or error.get("type")
        assert code not in ("internal_error", "api_error", "server_error"), (what, name, data)
    # Nothing half-written: the stream ends with its protocol's terminal.
    last_name, last_data = frames[-1]
    if protocol == "messages":
        assert last_name in ("message_stop", "error"), (what, frames[-3:])
    elif protocol == "responses":  # no [DONE], like OpenAI's Responses API
        assert last_name in ("response.completed", "response.incomplete", "response.failed"), (
            what,
            frames[-3:],
        )
    else:
        assert last_data == "[DONE]", (what, frames[-3:])
        assert sum(1 for _, d in frames if d == "[DONE]") == 1, what


def _assert_clean(response: httpx.Response, secrets: list[str], mock_url: str, what: str) -> None:
    text = response.text
    assert response.status_code < 500, (what, response.status_code, text[:500])
    assert "Traceback" not in text and 'File "' not in text, (what, text[:500])
    assert "<html" not in text.lower(), (what, text[:200])
    assert mock_url not in text and mock_url.split("//", 1)[1] not in text, (what, text[:500])
    for secret in secrets:
        assert secret not in text, (what, "upstream key leaked")


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
@pytest.mark.parametrize("protocol", list(PATHS))
def test_mutated_bodies_never_crash_the_server(routed, mock_upstream, protocol, stream):
    server, secret, upstream_keys = routed
    _post_all(server, secret, upstream_keys, mock_upstream, protocol, stream, _bodies(protocol, stream))


@pytest.mark.parametrize("protocol", list(PATHS))
def test_mutated_bodies_with_capture_on(routed, mock_upstream, protocol):
    """The same with a capturing key: recording odd requests must not break answering them."""
    server, _, upstream_keys = routed
    _, secret = make_key("capture", allowed_models=["fuzz-*"], capture_mode="all")
    server.wait_config()
    for stream in (False, True):
        bodies = _bodies(protocol, stream)[: BODIES_PER_CASE // 3]
        _post_all(server, secret, upstream_keys, mock_upstream, protocol, stream, bodies)


def _post_all(
    server,
    secret: str,
    upstream_keys: list[str],
    mock_upstream,
    protocol: str,
    stream: bool,
    bodies: list[tuple[str, bytes]],
) -> None:
    since = server.log_size()
    statuses: dict[int, int] = {}
    headers = {"authorization": f"Bearer {secret}", "content-type": "application/json"}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for what, raw in bodies:
            response = http.post(PATHS[protocol], content=raw, headers=headers)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            _assert_clean(response, [secret, *upstream_keys], mock_upstream.url, what)
            if response.status_code >= 400:
                _assert_error_shape(protocol, response, what)
            else:
                assert response.status_code == 200, (what, response.status_code)
                _assert_success_shape(protocol, response, stream, what)
    log = server.log_tail(since, limit=200_000)
    assert "unexpected error in the proxy" not in log and "Traceback" not in log, log[-5000:]
    # The mutations must exercise both sides: plenty of refusals and plenty of answers.
    assert statuses.get(200, 0) >= len(bodies) // 10, statuses
    assert sum(n for s, n in statuses.items() if 400 <= s < 500) >= len(bodies) // 10, statuses


RAW_BODIES = [
    b"",
    b"null",
    b"[]",
    b"42",
    b'"text"',
    b"\xef\xbb\xbf{}",
    b'{"model": "fuzz-chat"',
    b"\xff\xfe{}",
    b'{"model": "fuzz-chat", "model": 1}',
    b"{" * 2000 + b"}" * 2000,
    b'{"stream": true}',
    b'{"model": "\\ud800", "stream": true}',
    b"[" * 600 + b"]" * 600,
]
ODD_HEADERS = [
    {},
    {"content-type": "text/plain"},
    {"x-request-id": "\u00e9" * 3},
    {"x-request-id": "a b"},
    {"anthropic-beta": "\u00ff\u00fe,tools-2024"},
    {"content-length-ignored": "x"},
]


@pytest.mark.parametrize("protocol", list(PATHS))
def test_odd_envelopes_are_client_errors(routed, mock_upstream, protocol):
    """Raw bodies that are not a request object, odd headers, wrong methods: 4xx in shape."""
    server, secret, upstream_keys = routed
    since = server.log_size()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for raw in RAW_BODIES:
            for extra in ODD_HEADERS:
                headers = {
                    "authorization": f"Bearer {secret}",
                    **{k: v.encode("latin-1") for k, v in extra.items()},
                }
                what = f"{protocol} {raw[:30]!r} {extra}"
                response = http.post(PATHS[protocol], content=raw, headers=headers)
                _assert_clean(response, [secret, *upstream_keys], mock_upstream.url, what)
                assert 400 <= response.status_code < 500, (what, response.status_code, response.text[:300])
                _assert_error_shape(protocol, response, what)
        for method in ("GET", "PUT", "DELETE", "PATCH"):
            response = http.request(method, PATHS[protocol], headers={"authorization": f"Bearer {secret}"})
            assert response.status_code == 405, (method, response.status_code)
            _assert_error_shape(protocol, response, method)
        # Odd model names: 404 (or 403 outside the key's globs), never a crash in routing.
        for model in (
            "",
            " ",
            "\u0000",
            "fuzz-*",
            "fuzz-?",
            "fuzz-[a]",
            "../fuzz-chat_completion",
            "%2e",
            "fuzz-" + "x" * 5000,
            "fuzz-\u202e\U0001f984",
            "FUZZ-CHAT_COMPLETION",
            "fuzz-chat_completion ",
        ):
            body = dict(REQUEST_SEEDS[protocol], model=model)
            response = http.post(
                PATHS[protocol], content=orjson.dumps(body), headers={"authorization": f"Bearer {secret}"}
            )
            _assert_clean(response, [secret, *upstream_keys], mock_upstream.url, repr(model))
            assert response.status_code in (400, 403, 404), (model, response.status_code, response.text[:300])
            _assert_error_shape(protocol, response, repr(model))
        # A valid request with odd but legal headers still works.
        body = dict(REQUEST_SEEDS[protocol], model="fuzz-messages")  # anthropic-beta is forwarded there
        if isinstance(body.get("tools"), list):  # custom tools cannot reach a Messages upstream (400)
            body["tools"] = [
                t for t in body["tools"] if not (isinstance(t, dict) and t.get("type") == "custom")
            ]
        for extra in ODD_HEADERS[2:]:
            headers = {
                "authorization": f"Bearer {secret}",
                **{k: v.encode("latin-1") for k, v in extra.items()},
            }
            response = http.post(PATHS[protocol], content=orjson.dumps(body), headers=headers)
            assert response.status_code == 200, (extra, response.text[:300])
    log = server.log_tail(since, limit=200_000)
    assert "unexpected error in the proxy" not in log and "Traceback" not in log, log[-5000:]
