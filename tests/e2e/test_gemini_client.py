"""Gemini as a client protocol (issue 19) through the real server with the official
``google-genai`` SDK: generateContent and streamGenerateContent (alt=sse) against every upstream
protocol, a tool round trip, thinking, images, countTokens, and both ways of sending the key."""

from __future__ import annotations

import base64

import httpx
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from gateway.mock_upstream.behaviour import signature_for
from tests.servers import make_key, make_route

UPSTREAMS = ("chat_completion", "responses", "messages", "gemini")
WEATHER = types.FunctionDeclaration(
    name="get_weather",
    description="Weather for a city",
    parameters_json_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def _client(gateway, secret: str) -> genai.Client:
    return genai.Client(api_key=secret, http_options=types.HttpOptions(base_url=gateway.url, timeout=30_000))


@pytest.fixture
def routed(gateway, mock_upstream, request):
    upstream = request.param
    make_route(upstream, "e2e-gem", mock_upstream.base_url(upstream), upstream_model=f"up-gem-{upstream}")
    _, secret = make_key()
    gateway.wait_config()
    mock_upstream.clear()
    return gateway, secret, upstream


@pytest.mark.parametrize("routed", UPSTREAMS, indirect=True)
def test_generate_content_whole_and_streamed(routed, mock_upstream):
    gateway, secret, upstream = routed
    client = _client(gateway, secret)
    answer = client.models.generate_content(model="e2e-gem", contents="hello there")
    assert answer.text == "Echo: hello there"
    assert answer.candidates[0].finish_reason == types.FinishReason.STOP
    assert answer.usage_metadata.total_token_count > 0
    sent = mock_upstream.requests()[-1]
    assert ("up-gem-" + upstream) in (sent["route"] + str((sent["body"] or {}).get("model")))
    pieces = [
        chunk.text or ""
        for chunk in client.models.generate_content_stream(model="e2e-gem", contents="stream me")
    ]
    assert "".join(pieces) == "Echo: stream me" and len(pieces) > 1


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
@pytest.mark.parametrize("routed", UPSTREAMS, indirect=True)
def test_tool_round_trip(routed, mock_upstream, stream):
    gateway, secret, upstream = routed
    client = _client(gateway, secret)
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[WEATHER])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    history = [types.Content(role="user", parts=[types.Part(text="call get_weather please")])]
    if stream:
        chunks = list(client.models.generate_content_stream(model="e2e-gem", contents=history, config=config))
        calls = [fc for c in chunks for fc in (c.function_calls or [])]
    else:
        calls = client.models.generate_content(
            model="e2e-gem", contents=history, config=config
        ).function_calls
    assert len(calls) == 1 and calls[0].name == "get_weather"
    history.append(types.Content(role="model", parts=[types.Part(function_call=calls[0])]))
    history.append(
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id=calls[0].id, name="get_weather", response={"result": "sunny"}
                    )
                )
            ],
        )
    )
    final = client.models.generate_content(model="e2e-gem", contents=history, config=config)
    assert final.text.startswith("Tool said:") and "sunny" in final.text


@pytest.mark.parametrize("routed", ["chat_completion", "messages"], indirect=True)
def test_thinking_and_images(routed, mock_upstream):
    gateway, secret, upstream = routed
    client = _client(gateway, secret)
    answer = client.models.generate_content(
        model="e2e-gem",
        contents=[types.Part.from_bytes(data=PIXEL, mime_type="image/png"), "think about it"],
        config=types.GenerateContentConfig(
            thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=2048)
        ),
    )
    thoughts = [p.text for p in answer.candidates[0].content.parts if p.thought]
    assert thoughts == ["Thinking about: think about it"]
    assert answer.text == "Echo: think about it"
    sent = mock_upstream.requests()[-1]["body"]
    assert "iVBORw0KGgo" in str(sent), "the image reached the upstream"
    assert signature_for("Thinking about: think about it")  # the mock signs its reasoning


@pytest.mark.parametrize("routed", ["chat_completion", "messages"], indirect=True)
def test_count_tokens(routed):
    gateway, secret, upstream = routed
    client = _client(gateway, secret)  # keep a reference: the SDK closes its transport when collected
    counted = client.models.count_tokens(model="e2e-gem", contents="count these words please")
    assert counted.total_tokens > 0


@pytest.mark.parametrize("routed", ["chat_completion"], indirect=True)
def test_key_by_query_parameter_and_errors(routed, mock_upstream):
    gateway, secret, _ = routed
    url = f"{gateway.url}/v1beta/models/e2e-gem:generateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    response = httpx.post(url, params={"key": secret}, json=body)
    assert (
        response.status_code == 200
        and response.json()["candidates"][0]["content"]["parts"][0]["text"] == "Echo: hi"
    )
    response = httpx.post(url, params={"key": "sk-gw-wrong-000000000000"}, json=body)
    assert response.status_code == 401 and response.json()["error"]["status"] == "UNAUTHENTICATED"
    bad, good = _client(gateway, "sk-gw-wrong-000000000000"), _client(gateway, secret)
    with pytest.raises(genai_errors.ClientError) as info:
        bad.models.generate_content(model="e2e-gem", contents="x")
    assert info.value.code == 401
    with pytest.raises(genai_errors.ClientError) as info:
        good.models.generate_content(model="e2e-gem-missing", contents="x")
    assert info.value.code == 404
    response = httpx.post(url, params={"key": secret}, json={"contents": "not a list"})
    assert response.status_code == 400 and response.json()["error"]["status"] == "INVALID_ARGUMENT"
