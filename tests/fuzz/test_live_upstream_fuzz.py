"""Garbage from upstreams, end to end: the real server in front of ``GarbageUpstream``.

Every client protocol, streaming and not, against every upstream protocol, with a fixed list
of garbage answers (``garbage_upstream.answer``). The client gets a 200, a 502/503/504 or the
upstream's own client-attributable 4xx/429 in its own protocol's shape, never a 500; a committed stream always ends with its protocol's terminal
(``[DONE]`` for Chat, the terminal event for Responses, ``message_stop`` or ``error`` for Messages) and each frame
is JSON; the channel key, the upstream's URL and the internal host named in the garbage never
reach the client; the server logs no unexpected exception.
"""

from __future__ import annotations

import httpx
import orjson
import pytest

from gateway.protocols.sse import SSEParser
from tests.servers import make_key, make_route

from .garbage_upstream import GarbageUpstream

PATHS = {"chat_completion": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
UPSTREAMS = ("chat_completion", "responses", "messages", "gemini")
CASES = 20  # per client protocol, upstream protocol and stream mode: 480 requests in all
LEAKS = ("internal.example.com", "10.1.2.3", "/v1/secret")
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


@pytest.fixture(scope="module")
def garbage():
    server = GarbageUpstream().start()
    yield server
    server.stop()


@pytest.fixture
def routed(gateway, garbage):
    keys = []
    for protocol in UPSTREAMS:
        base = garbage.url if protocol == "gemini" else garbage.url + "/v1"
        # No breaker and no same-channel retries: every request reaches the garbage.
        route = make_route(
            protocol,
            f"junk-{protocol}",
            base,
            upstream_model=f"up-{protocol}",
            circuit_breaker_enabled=False,
            channel_max_retries=0,
            max_retries=0,
        )
        keys.append(route.upstream_key)
    _, secret = make_key(allowed_models=["junk-*"])
    gateway.wait_config()
    return gateway, secret, keys


def body_for(protocol: str, model: str, case: int, stream: bool) -> dict:
    text = f"fuzzcase-{case} please"
    if protocol == "chat_completion":
        return {
            "model": model,
            "messages": [{"role": "user", "content": text}],
            "tools": TOOLS,
            "stream": stream,
        }
    if protocol == "responses":
        return {
            "model": model,
            "input": text,
            "stream": stream,
            "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}],
        }
    return {
        "model": model,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
        "stream": stream,
        "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
    }


def check_error(protocol: str, response: httpx.Response, what: str) -> None:
    assert response.headers.get("content-type", "").startswith("application/json"), what
    payload = response.json()
    error = payload.get("error")
    assert isinstance(error, dict), (what, payload)
    if protocol == "messages":
        assert payload.get("type") == "error" and isinstance(error.get("type"), str), (what, payload)
    else:
        assert isinstance(error.get("code"), str) and error["code"] != "internal_error", (what, payload)
    assert isinstance(error.get("message"), str) and error["message"], (what, payload)


def check_stream(protocol: str, raw: bytes, what: str) -> None:
    parser = SSEParser()
    frames = [*parser.feed(raw), *parser.close()]
    assert frames, (what, "empty stream")
    for name, data in frames:
        if data != "[DONE]":
            obj = orjson.loads(data)
            assert "internal_error" not in data, (what, name, data)
            assert isinstance(obj, dict), (what, data)
    last_name, last_data = frames[-1]
    if protocol == "messages":
        assert last_name in ("message_stop", "error"), (what, frames[-3:])
        assert all(d != "[DONE]" for _, d in frames), what
    elif protocol == "responses":  # no [DONE], like OpenAI's Responses API
        assert all(d != "[DONE]" for _, d in frames), what
        assert last_name in ("response.completed", "response.failed", "response.incomplete"), (
            what,
            frames[-3:],
        )
    else:
        assert last_data == "[DONE]", (what, frames[-3:])
        assert sum(1 for _, d in frames if d == "[DONE]") == 1, what


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
@pytest.mark.parametrize("protocol", list(PATHS))
def test_garbage_upstreams_never_crash_the_server(routed, garbage, protocol, stream):
    server, secret, upstream_keys = routed
    since = server.log_size()
    seen_before = garbage.seen
    statuses: dict[int, int] = {}
    headers = {"authorization": f"Bearer {secret}"}
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for upstream in UPSTREAMS:
            for case in range(CASES):
                what = f"{protocol} stream={stream} <- {upstream} fuzzcase-{case}"
                response = http.post(
                    PATHS[protocol],
                    json=body_for(protocol, f"junk-{upstream}", case, stream),
                    headers=headers,
                )
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                text = response.text
                # 400/404/413/422/429: the garbage upstream's own client-attributable status (issue 19)
                assert response.status_code in (200, 400, 404, 413, 422, 429, 502, 503, 504), (
                    what,
                    response.status_code,
                    text[:500],
                )
                assert "Traceback" not in text and "<html" not in text.lower(), (what, text[:500])
                assert garbage.url.split("//", 1)[1] not in text, (what, text[:500])
                for leak in (*LEAKS, *upstream_keys):
                    assert leak not in text, (what, leak, text[:500])
                if response.status_code != 200:
                    check_error(protocol, response, what)
                elif response.headers.get("content-type", "").startswith("text/event-stream"):
                    assert stream, what
                    check_stream(protocol, response.content, what)
                else:
                    assert not stream, (what, response.headers.get("content-type"))
                    response.json()
    log = server.log_tail(since, limit=400_000)
    assert "unexpected error in the proxy" not in log and "Traceback" not in log, log[-5000:]
    assert garbage.seen - seen_before >= len(UPSTREAMS) * CASES, (
        "every request must reach the garbage upstream"
    )
    assert statuses.get(200, 0) and sum(n for s, n in statuses.items() if s >= 500), statuses
