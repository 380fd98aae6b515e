"""Gemini wire, fault injection, introspection and scripted turns of the mock upstream (raw HTTP)."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import orjson
import pytest

from tests.servers import ROOT, free_port

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
GEMINI_TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": "lookup",
                "parameters": {
                    "type": "OBJECT",
                    "properties": {"query": {"type": "STRING"}, "limit": {"type": "INTEGER"}},
                },
            }
        ]
    }
]


@pytest.fixture
def mock(mock_upstream):
    mock_upstream.reset()
    return mock_upstream


@pytest.fixture
def http(mock):
    with httpx.Client(base_url=mock.url, timeout=10) as client:
        yield client


def sse_data(text: str) -> list[str]:
    return [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]


def test_gemini_generate_content_echo_and_usage(http):
    response = http.post(
        "/v1beta/models/gemini-mock:generateContent",
        json={"contents": [{"role": "user", "parts": [{"text": "hello gemini"}]}]},
    )
    body = response.json()
    assert response.status_code == 200
    assert body["candidates"][0]["content"]["parts"] == [{"text": "Echo: hello gemini"}]
    assert body["candidates"][0]["finishReason"] == "STOP" and body["modelVersion"] == "gemini-mock"
    usage = body["usageMetadata"]
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"] > 0


def test_gemini_stream_thoughts_and_function_call(http):
    body = {
        "contents": [{"role": "user", "parts": [{"text": "use a tool"}]}],
        "tools": GEMINI_TOOLS,
        "generationConfig": {"thinkingConfig": {"includeThoughts": True}},
    }
    response = http.post("/v1beta/models/gm:streamGenerateContent", params={"alt": "sse"}, json=body)
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks = [orjson.loads(d) for d in sse_data(response.text)]
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    thoughts = [p for p in parts if p.get("thought")]
    assert "".join(p["text"] for p in thoughts).startswith("Thinking about: use a tool")
    assert thoughts[-1]["thoughtSignature"]
    assert parts[-1] == {"functionCall": {"name": "lookup", "args": {"query": "mock-query", "limit": 1}}}
    assert (
        chunks[-1]["candidates"][0]["finishReason"] == "STOP"
        and chunks[-1]["usageMetadata"]["thoughtsTokenCount"] > 0
    )


def test_gemini_function_response_is_answered(http):
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "use a tool"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "lookup", "args": {}}}]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "lookup", "response": {"result": "42 rows"}}}],
            },
        ]
    }
    response = http.post("/v1beta/models/gm:generateContent", json=body)
    assert response.json()["candidates"][0]["content"]["parts"][0]["text"] == "Tool said: 42 rows"


@pytest.mark.parametrize(
    "path, shape_key",
    [
        ("/v1/chat/completions", "openai"),
        ("/v1/responses", "openai"),
        ("/v1/messages", "anthropic"),
        ("/v1beta/models/gm:generateContent", "gemini"),
    ],
)
def test_status_fault_uses_protocol_error_shape(http, path, shape_key):
    body = {**CHAT, "input": "hi", "contents": [{"parts": [{"text": "hi"}]}]}
    response = http.post(path, json=body, headers={"x-mock-status": "429"})
    assert response.status_code == 429
    error = response.json()
    if shape_key == "openai":
        assert error["error"]["code"] == "rate_limit_exceeded" and error["error"]["message"]
    elif shape_key == "anthropic":
        assert error["type"] == "error" and error["error"]["type"] == "rate_limit_error"
    else:
        assert error["error"]["status"] == "RESOURCE_EXHAUSTED" and error["error"]["code"] == 429


def test_fault_from_path_prefix_and_doubled_v1(http, mock):
    assert http.post("/fault/status=503/v1/chat/completions", json=CHAT).status_code == 503
    ok = http.post("/v1/v1/chat/completions", json=CHAT)
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == "Echo: hi"
    assert http.post("/chat/completions", json=CHAT).status_code == 200
    routes = [r["route"] for r in mock.requests()]
    assert routes == ["/v1/chat/completions"] * 3


def test_fail_times_then_succeed_per_key(http):
    headers = {"x-mock-fail-times": "2", "x-mock-fail-key": "retry-a", "x-mock-status": "502"}
    statuses = [http.post("/v1/chat/completions", json=CHAT, headers=headers).status_code for _ in range(4)]
    assert statuses == [502, 502, 200, 200]
    other = http.post("/fault/fail-times=1,fail-key=retry-b/v1/chat/completions", json=CHAT)
    assert other.status_code == 500  # a different key has its own counter; default status 500
    assert http.post("/fault/fail-times=1,fail-key=retry-b/v1/chat/completions", json=CHAT).status_code == 200


def test_delay_first_byte_still_answers(http):
    started = time.monotonic()
    response = http.post("/v1/chat/completions", json=CHAT, headers={"x-mock-delay-first-byte": "0.3"})
    assert response.status_code == 200
    assert time.monotonic() - started >= 0.3  # a lower bound only: the mock slept at least that long


def test_disconnect_after_ends_stream_without_terminal(http):
    response = http.post(
        "/v1/chat/completions", json={**CHAT, "stream": True}, headers={"x-mock-disconnect-after": "2"}
    )
    frames = sse_data(response.text)
    assert len(frames) == 2 and "[DONE]" not in frames


def test_stall_after_goes_silent_mid_stream(mock):
    with httpx.Client(base_url=mock.url, timeout=httpx.Timeout(10, read=0.5)) as client:
        frames = []
        with pytest.raises(httpx.ReadTimeout):
            with client.stream(
                "POST",
                "/v1/responses",
                json={"model": "m", "input": "hi", "stream": True},
                headers={"x-mock-stall-after": "3"},
            ) as response:
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        frames.append(orjson.loads(line[6:])["type"])
    assert frames == ["response.created", "response.in_progress", "response.output_item.added"]
    deadline = time.monotonic() + 10
    while mock.stats()["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert mock.stats()["in_flight"] == 0


def test_malformed_sse_second_frame_is_not_json(http):
    response = http.post(
        "/v1/messages", json={**CHAT, "max_tokens": 10, "stream": True}, headers={"x-mock-malformed-sse": "1"}
    )
    frames = sse_data(response.text)
    assert len(frames) == 2
    orjson.loads(frames[0])
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(frames[1])


def test_hang_is_released_when_the_client_gives_up(mock):
    with httpx.Client(base_url=mock.url, timeout=httpx.Timeout(0.5)) as client:
        with pytest.raises(httpx.ReadTimeout):
            client.post("/v1/chat/completions", json=CHAT, headers={"x-mock-hang": "1"})
        deadline = time.monotonic() + 10
        while mock.stats()["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.02)
    stats = mock.stats()
    assert stats["in_flight"] == 0 and stats["client_disconnects"] >= 1
    assert stats["open_connections"] >= 1  # at least the connection asking


def test_client_disconnect_mid_stream_frees_the_request(mock):
    with httpx.Client(base_url=mock.url, timeout=10) as client:
        with client.stream(
            "POST",
            "/v1/chat/completions",
            json={**CHAT, "stream": True},
            headers={"x-mock-frame-delay": "0.2"},
        ) as response:
            lines = response.iter_lines()  # keep a reference: a dropped generator closes the stream
            assert next(lines).startswith("data: ")
            assert mock.stats()["in_flight"] == 1
            disconnects = mock.stats()["client_disconnects"]
    deadline = time.monotonic() + 10
    while mock.stats()["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.02)
    stats = mock.stats()
    assert stats["in_flight"] == 0 and stats["client_disconnects"] == disconnects + 1


def test_requests_are_recorded_newest_last_and_cleared(http, mock):
    http.post(
        "/v1/messages?beta=true",
        json={"model": "first", "max_tokens": 5, "messages": []},
        headers={"x-api-key": "sk-upstream-1", "anthropic-version": "2023-06-01"},
    )
    http.post(
        "/v1/responses", json={"model": "second", "input": "x"}, headers={"authorization": "Bearer sk-up-2"}
    )
    recorded = mock.requests()
    assert [r["body"]["model"] for r in recorded] == ["first", "second"]
    assert recorded[0]["query"] == "beta=true" and recorded[0]["method"] == "POST"
    assert recorded[0]["headers"]["x-api-key"] == "sk-upstream-1"
    assert recorded[1]["headers"]["authorization"] == "Bearer sk-up-2"
    mock.clear()
    assert mock.requests() == []


def test_script_turns_are_consumed_in_order(http, mock):
    mock.script(
        [{"text": "first scripted"}, {"tool_calls": [{"name": "search", "arguments": {"q": "docs"}}]}]
    )
    first = http.post("/v1/chat/completions", json=CHAT).json()
    second = http.post("/v1/messages", json={**CHAT, "max_tokens": 10}).json()
    third = http.post("/v1/chat/completions", json=CHAT).json()
    assert first["choices"][0]["message"]["content"] == "first scripted"
    assert second["content"] == [
        {"type": "tool_use", "id": second["content"][0]["id"], "name": "search", "input": {"q": "docs"}}
    ]
    assert second["stop_reason"] == "tool_use"
    assert third["choices"][0]["message"]["content"] == "Echo: hi"


def test_unknown_route_and_bad_body(http):
    assert http.post("/v1/no-such-route", json={}).status_code == 404
    bad = http.post("/v1/messages", content=b"{not json")
    assert bad.status_code == 400 and bad.json()["type"] == "error"


def test_management_command_serves_the_mock(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "mockupstream", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                response = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=CHAT, timeout=2)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert response.json()["choices"][0]["message"]["content"] == "Echo: hi"
        assert httpx.get(f"http://127.0.0.1:{port}/_mock/stats").json()["open_connections"] >= 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)
