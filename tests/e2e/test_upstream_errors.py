"""Error fidelity end to end (issue 19): an upstream's final answer reaches the official SDKs as
the right exception class, with the right number of upstream calls (no retry storms).

Client-attributable upstream answers (400, 404, 413, 422) and 429 keep their status; transport
failures, 5xx and upstream 401/403 (the operator's credentials) are 502. The 4xx cases use the
SDKs' default retry policy (two retries) to show that they do not retry; the 429 and 502 cases
turn SDK retries off so the count is the gateway's own attempts."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from tests.servers import free_port, make_key, make_route

MODEL = "e2e-upstream-errors"
# status -> (openai exception, anthropic exception, client status, SDK max_retries)
CASES = {
    400: (openai.BadRequestError, anthropic.BadRequestError, 400, 2),
    404: (openai.NotFoundError, anthropic.NotFoundError, 404, 2),
    413: (openai.APIStatusError, anthropic.RequestTooLargeError, 413, 2),
    422: (openai.UnprocessableEntityError, anthropic.UnprocessableEntityError, 422, 2),
    429: (openai.RateLimitError, anthropic.RateLimitError, 429, 0),
    401: (openai.InternalServerError, anthropic.InternalServerError, 502, 0),
    403: (openai.InternalServerError, anthropic.InternalServerError, 502, 0),
    500: (openai.InternalServerError, anthropic.InternalServerError, 502, 0),
}
ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    404: "not_found_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    401: "api_error",
    403: "api_error",
    500: "api_error",
}


def _route(mock_upstream, upstream: str, fault: str) -> str:
    make_route(upstream, MODEL, mock_upstream.base_url(upstream, fault))
    _, secret = make_key()
    return secret


def _calls(mock_upstream) -> int:
    return len(mock_upstream.requests())


@pytest.mark.parametrize("upstream", ["chat_completion", "messages"])
@pytest.mark.parametrize("status", list(CASES))
def test_upstream_status_reaches_the_openai_sdk(gateway, mock_upstream, status, upstream):
    oa_exc, _, client_status, retries = CASES[status]
    secret = _route(mock_upstream, upstream, f"status={status},retry-after=7")
    gateway.wait_config()
    mock_upstream.clear()
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=secret, max_retries=retries)
    with pytest.raises(oa_exc) as info:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == client_status
    assert _calls(mock_upstream) == 1, "one upstream call: neither the gateway nor the SDK retried"
    body = info.value.response.json()["error"]
    assert body["upstream_status"] == status
    if status == 429:
        assert info.value.response.headers["retry-after"] == "7"
    else:
        assert "retry-after" not in info.value.response.headers


@pytest.mark.parametrize("upstream", ["chat_completion", "responses"])
@pytest.mark.parametrize("status", list(CASES))
def test_upstream_status_reaches_the_anthropic_sdk(gateway, mock_upstream, status, upstream):
    _, an_exc, client_status, retries = CASES[status]
    secret = _route(mock_upstream, upstream, f"status={status},retry-after=3")
    gateway.wait_config()
    mock_upstream.clear()
    client = anthropic.Anthropic(base_url=gateway.url, api_key=secret, max_retries=retries)
    with pytest.raises(an_exc) as info:
        client.messages.create(model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == client_status
    assert _calls(mock_upstream) == 1
    payload = info.value.response.json()
    assert payload["type"] == "error" and payload["error"]["type"] == ANTHROPIC_TYPES[status]
    assert payload["error"]["code"]  # our code, beside Anthropic's type
    if status == 429:
        assert info.value.response.headers["retry-after"] == "3"


@pytest.mark.parametrize("status", [400, 429, 500])
def test_streaming_requests_get_the_status_too(gateway, mock_upstream, status):
    """Nothing was committed before the attempts ran out, so a stream gets the real status."""
    oa_exc, an_exc, client_status, _ = CASES[status]
    secret = _route(mock_upstream, "chat_completion", f"status={status}")
    gateway.wait_config()
    mock_upstream.clear()
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=secret, max_retries=0)
    with pytest.raises(oa_exc) as info:
        for _ in client.chat.completions.create(
            model=MODEL, stream=True, messages=[{"role": "user", "content": "hi"}]
        ):
            pass
    assert info.value.status_code == client_status
    claude = anthropic.Anthropic(base_url=gateway.url, api_key=secret, max_retries=0)
    with pytest.raises(an_exc):
        with claude.messages.stream(
            model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        ) as s:
            for _ in s:
                pass
    assert _calls(mock_upstream) == 2


def test_connect_failure_is_502_for_both_sdks(gateway):
    make_route("chat_completion", MODEL, f"http://127.0.0.1:{free_port()}/v1")  # nothing listens there
    _, secret = make_key()
    gateway.wait_config()
    with pytest.raises(openai.InternalServerError) as info:
        openai.OpenAI(base_url=gateway.url + "/v1", api_key=secret, max_retries=0).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.status_code == 502 and info.value.code == "upstream_error"
    with pytest.raises(anthropic.InternalServerError) as ainfo:
        anthropic.Anthropic(base_url=gateway.url, api_key=secret, max_retries=0).messages.create(
            model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
    assert ainfo.value.status_code == 502 and ainfo.value.response.json()["error"]["type"] == "api_error"


def test_failover_to_a_4xx_channel_answers_with_the_last_status(gateway, mock_upstream):
    """A 500 then a 400 on the next provider: the last answer (400) decides."""
    make_route("chat_completion", MODEL, mock_upstream.base_url("chat_completion", "status=500"), priority=0)
    make_route("chat_completion", MODEL, mock_upstream.base_url("chat_completion", "status=400"), priority=1)
    _, secret = make_key()
    gateway.wait_config()
    mock_upstream.clear()
    response = httpx.post(
        gateway.url + "/v1/chat/completions",
        headers={"authorization": f"Bearer {secret}"},
        json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
        timeout=30,
    )
    assert response.status_code == 400
    assert _calls(mock_upstream) == 2


def test_custom_tools_to_a_messages_upstream_without_the_rule_is_a_400(gateway, mock_upstream):
    secret = _route(mock_upstream, "messages", "")
    gateway.wait_config()
    mock_upstream.clear()
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=secret, max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(
            model=MODEL,
            input="patch it",
            tools=[{"type": "custom", "name": "apply_patch", "description": "patch"}],
        )
    assert "field_custom_tools_to_function" in info.value.message
    assert _calls(mock_upstream) == 0
