"""Client errors end to end, each in the client's own protocol shape, and nothing sent upstream:
bad or missing key (401, via ``Authorization: Bearer`` and ``x-api-key``), model outside the
key's allowlist (403), unknown model (404 ``model_not_found``), malformed bodies (400 naming the
field), oversized bodies (413). Also: the official SDKs raise their own typed errors for these."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from tests.servers import make_key, make_route

PATHS = {"chat_completion": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
MODEL = "e2e-errors"


def body_for(protocol: str, model: str = MODEL, *, stream: bool = False) -> dict:
    if protocol == "chat_completion":
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    elif protocol == "responses":
        body = {"model": model, "input": "hi"}
    else:
        body = {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        body["stream"] = True
    return body


def error_of(protocol: str, response: httpx.Response) -> dict:
    """The error object of a response in ``protocol``'s shape (asserting the envelope)."""
    assert response.headers["content-type"].startswith("application/json"), response.headers["content-type"]
    payload = response.json()
    if protocol == "messages":
        assert payload["type"] == "error", payload
        error = payload["error"]
        assert isinstance(error["type"], str) and error["type"], payload
    else:
        assert set(payload) == {"error"}, payload
        error = payload["error"]
        assert {"message", "type", "code"} <= set(error), payload
    assert isinstance(error["message"], str) and error["message"], payload
    return error


def code_of(protocol: str, error: dict) -> str:
    """Both shapes carry our ``code``; Anthropic's ``type`` is one of Anthropic's own types."""
    return error["code"]


@pytest.fixture
def routed(gateway, mock_upstream):
    """A served model and a key allowed only ``e2e-*``; returns (server, secret)."""
    make_route(
        "chat_completion", MODEL, mock_upstream.base_url("chat_completion"), upstream_model="up-errors"
    )
    make_route("chat_completion", "other-model", mock_upstream.base_url("chat_completion"))
    _, secret = make_key(allowed_models=["e2e-*"])
    gateway.wait_config()
    mock_upstream.clear()
    return gateway, secret


@pytest.fixture
def http(routed):
    server, _ = routed
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def assert_nothing_forwarded(mock_upstream) -> None:
    assert mock_upstream.requests() == [], "a rejected request must never reach the upstream"


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
@pytest.mark.parametrize("header", ["authorization", "x-api-key", "none"])
@pytest.mark.parametrize("protocol", list(PATHS))
def test_bad_or_missing_key_is_401(http, mock_upstream, protocol, header, stream):
    headers = (
        {"authorization": "Bearer sk-gw-not-a-real-key-000000"}
        if header == "authorization"
        else ({"x-api-key": "sk-gw-not-a-real-key-000000"} if header == "x-api-key" else {})
    )
    response = http.post(PATHS[protocol], json=body_for(protocol, stream=stream), headers=headers)
    assert response.status_code == 401
    error = error_of(protocol, response)
    assert code_of(protocol, error) in {"unauthorized", "authentication_error", "invalid_api_key"}
    assert "sk-gw-not-a-real-key" not in response.text
    assert_nothing_forwarded(mock_upstream)


@pytest.mark.parametrize("protocol", list(PATHS))
def test_good_key_works_with_both_auth_headers(http, routed, protocol):
    _, secret = routed
    for headers in ({"authorization": f"Bearer {secret}"}, {"x-api-key": secret}):
        response = http.post(PATHS[protocol], json=body_for(protocol), headers=headers)
        assert response.status_code == 200, response.text
        assert "Echo: hi" in response.text


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
@pytest.mark.parametrize("protocol", list(PATHS))
def test_model_not_allowed_is_403(http, routed, mock_upstream, protocol, stream):
    _, secret = routed
    response = http.post(
        PATHS[protocol],
        json=body_for(protocol, "other-model", stream=stream),
        headers={"authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 403
    error = error_of(protocol, response)
    if protocol == "messages":
        assert error["type"] == "permission_error"
    assert error["code"] == "model_not_allowed"
    assert_nothing_forwarded(mock_upstream)


@pytest.mark.parametrize("protocol", list(PATHS))
def test_unknown_model_is_404_model_not_found(http, routed, mock_upstream, protocol):
    _, secret = routed
    response = http.post(
        PATHS[protocol],
        json=body_for(protocol, "e2e-no-such-model"),
        headers={"authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 404
    error = error_of(protocol, response)
    if protocol == "messages":
        assert error["type"] == "not_found_error"
    assert error["code"] == "model_not_found"
    assert "e2e-no-such-model" in error["message"]
    assert_nothing_forwarded(mock_upstream)


MALFORMED = {
    # protocol: [(description, raw body or dict, the field the error must name)]
    "chat_completion": [
        ("missing model", {"messages": [{"role": "user", "content": "hi"}]}, "model"),
        ("messages not a list", {"model": MODEL, "messages": "hi"}, "messages"),
    ],
    "responses": [
        ("missing model", {"input": "hi"}, "model"),
        ("input wrong type", {"model": MODEL, "input": 42}, "input"),
    ],
    "messages": [
        ("missing model", {"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}, "model"),
        ("messages not a list", {"model": MODEL, "max_tokens": 5, "messages": {"x": 1}}, "messages"),
    ],
}


@pytest.mark.parametrize(
    "protocol, case",
    [(p, i) for p, cases in MALFORMED.items() for i in range(len(cases))],
    ids=[f"{p}-{c[0].replace(' ', '_')}" for p, cases in MALFORMED.items() for c in cases],
)
def test_malformed_body_is_400_naming_the_field(http, routed, mock_upstream, protocol, case):
    _, secret = routed
    _, body, field = MALFORMED[protocol][case]
    response = http.post(PATHS[protocol], json=body, headers={"authorization": f"Bearer {secret}"})
    assert response.status_code == 400, response.text
    error = error_of(protocol, response)
    assert field in error["message"] or error.get("param") == field, error
    assert_nothing_forwarded(mock_upstream)


@pytest.mark.parametrize("protocol", list(PATHS))
def test_invalid_json_is_400(http, routed, mock_upstream, protocol):
    _, secret = routed
    response = http.post(
        PATHS[protocol],
        content=b'{"model": "e2e-errors", "messages": [',
        headers={"authorization": f"Bearer {secret}", "content-type": "application/json"},
    )
    assert response.status_code == 400
    error_of(protocol, response)
    assert_nothing_forwarded(mock_upstream)


@pytest.mark.parametrize("protocol", list(PATHS))
def test_oversized_body_is_413(http, routed, mock_upstream, protocol):
    _, secret = routed  # the session server runs with GATEWAY_MAX_BODY_BYTES = 1 MiB (tests/conftest.py)
    body = body_for(protocol)
    filler = "x" * (2 * 1024 * 1024)
    if protocol == "responses":
        body["input"] = filler
    else:
        body["messages"][0]["content"] = filler
    response = http.post(PATHS[protocol], json=body, headers={"authorization": f"Bearer {secret}"})
    assert response.status_code == 413
    error_of(protocol, response)
    assert_nothing_forwarded(mock_upstream)


def test_sdks_raise_their_typed_errors(routed):
    server, secret = routed
    bad_openai = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-gw-wrong-key-000000", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad_openai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.AuthenticationError):
        bad_openai.responses.create(model=MODEL, input="hi")
    good_openai = openai.OpenAI(base_url=server.url + "/v1", api_key=secret, max_retries=0)
    with pytest.raises(openai.NotFoundError) as missing:
        good_openai.chat.completions.create(model="e2e-missing", messages=[{"role": "user", "content": "hi"}])
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.PermissionDeniedError) as denied:
        good_openai.responses.create(model="other-model", input="hi")
    assert denied.value.code == "model_not_allowed"

    bad_claude = anthropic.Anthropic(base_url=server.url, api_key="sk-gw-wrong-key-000000", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        bad_claude.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    good_claude = anthropic.Anthropic(base_url=server.url, api_key=secret, max_retries=0)
    with pytest.raises(anthropic.NotFoundError):
        good_claude.messages.create(
            model="e2e-missing", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(anthropic.PermissionDeniedError):
        good_claude.messages.create(
            model="other-model", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(anthropic.BadRequestError):
        good_claude.messages.create(model=MODEL, max_tokens=5, messages="not a list")  # type: ignore[arg-type]
