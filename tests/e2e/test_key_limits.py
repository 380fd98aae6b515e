"""Per-key limits through the production server: a 60-requests-per-minute key is admitted exactly
60 times across two gateway processes sharing Redis, refusals come as 429 with Retry-After in the
client's shape (and the SDKs raise RateLimitError), the IP allow-list answers 403, and token
limits settle with the usage after each response."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import anthropic
import openai
import pytest

from tests.e2e.test_harness import redis_or_skip
from tests.minute_window import wait_for_fresh_minute
from tests.servers import make_key, make_route

CHAT = "/v1/chat/completions"


def _post(server, secret: str, model: str):
    return server.client.post(
        CHAT,
        headers={"authorization": f"Bearer {secret}"},
        json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
        timeout=20,
    )


def test_rpm_holds_across_two_gateway_processes_sharing_redis(gateway_factory, mock_upstream):
    redis_url = redis_or_skip()
    make_route("chat_completion", "lim-rpm", mock_upstream.base_url("chat_completion"))
    _, secret = make_key("rpm", limits={"rpm": 60})
    servers = [gateway_factory({"REDIS_URL": redis_url}), gateway_factory({"REDIS_URL": redis_url})]
    for server in servers:
        server.wait_config()
    wait_for_fresh_minute()
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda i: _post(servers[i % 2], secret, "lim-rpm"), range(80)))
    statuses = [r.status_code for r in replies]
    assert statuses.count(200) == 60 and statuses.count(429) == 20, statuses
    refused = next(r for r in replies if r.status_code == 429)
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert sum(1 for r in mock_upstream.requests() if r["body"].get("model") == "lim-rpm") <= 60


def test_refusals_reach_the_sdks_as_rate_limit_errors_without_retry_storms(gateway, mock_upstream):
    make_route("messages", "lim-sdk", mock_upstream.base_url("messages"))
    _, secret = make_key("sdk", limits={"rpm": 1})
    gateway.wait_config()
    wait_for_fresh_minute()
    oa = openai.OpenAI(base_url=gateway.url + "/v1", api_key=secret, max_retries=0)
    oa.chat.completions.create(model="lim-sdk", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.RateLimitError):
        oa.chat.completions.create(model="lim-sdk", messages=[{"role": "user", "content": "hi"}])
    an = anthropic.Anthropic(base_url=gateway.url, api_key=secret, max_retries=0)
    with pytest.raises(anthropic.RateLimitError) as exc:
        an.messages.create(model="lim-sdk", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    assert exc.value.body["type"] == "error" and exc.value.body["error"]["type"] == "rate_limit_error"


def test_ip_allow_list(gateway, mock_upstream):
    make_route("chat_completion", "lim-ip", mock_upstream.base_url("chat_completion"))
    _, outside = make_key("ip-out", ip_allow=["10.0.0.0/8"])
    _, inside = make_key("ip-in", ip_allow=["127.0.0.1"])
    gateway.wait_config()
    refused = _post(gateway, outside, "lim-ip")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "ip_not_allowed"
    assert _post(gateway, inside, "lim-ip").status_code == 200
    # behind a trusted proxy (loopback by default) the client is the address X-Forwarded-For names;
    # from an untrusted peer the header is ignored (tests/proxy/test_limits.py)
    proxied = gateway.client.post(
        CHAT,
        headers={"authorization": f"Bearer {outside}", "x-forwarded-for": "10.1.2.3"},
        json={"model": "lim-ip", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert proxied.status_code == 200
    assert sum(1 for r in mock_upstream.requests() if r["body"].get("model") == "lim-ip") == 2


def test_with_no_trusted_proxy_a_forwarded_for_header_names_nobody(gateway_factory, mock_upstream):
    """``GATEWAY_TRUSTED_PROXY_CIDRS=none`` trusts nobody, loopback included: a local client
    cannot name an allow-listed address (the server's own X-Forwarded-For rewrite, which trusts
    loopback regardless, is off)."""
    make_route("chat_completion", "lim-ip-none", mock_upstream.base_url("chat_completion"))
    _, outside = make_key("ip-none", ip_allow=["10.0.0.0/8"])
    server = gateway_factory({"GATEWAY_TRUSTED_PROXY_CIDRS": "none"})
    server.wait_config()
    refused = server.client.post(
        CHAT,
        headers={"authorization": f"Bearer {outside}", "x-forwarded-for": "10.1.2.3"},
        json={"model": "lim-ip-none", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "ip_not_allowed"
    assert not [r for r in mock_upstream.requests() if r["body"].get("model") == "lim-ip-none"]


def test_token_limit_settles_with_the_reported_usage(gateway, mock_upstream):
    make_route("chat_completion", "lim-tpm", mock_upstream.base_url("chat_completion"))
    _, secret = make_key("tpm", limits={"tpm": 1})
    gateway.wait_config()
    wait_for_fresh_minute()
    first = _post(gateway, secret, "lim-tpm")
    assert first.status_code == 200 and first.json()["usage"]["total_tokens"] >= 1
    second = _post(gateway, secret, "lim-tpm")
    assert second.status_code == 429 and "tokens per minute" in second.json()["error"]["message"]


def test_daily_spend_cap_refuses_with_402_once_the_priced_usage_reaches_it(gateway, mock_upstream):
    route = make_route("chat_completion", "lim-spend", mock_upstream.base_url("chat_completion"))
    route.channel_model.price = {"input": "1000000", "output": "1000000"}  # $1 per token: any answer costs
    route.channel_model.save()
    _, secret = make_key("spend", limits={"daily_spend": "1.00"})
    gateway.wait_config()
    assert _post(gateway, secret, "lim-spend").status_code == 200
    refused = _post(gateway, secret, "lim-spend")
    assert refused.status_code == 402 and refused.json()["error"]["code"] == "api_key_daily_limit_reached"
    an = anthropic.Anthropic(base_url=gateway.url, api_key=secret, max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as exc:
        an.messages.create(model="lim-spend", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    assert exc.value.status_code == 402


# -- the endpoints that are not generations (embeddings, compaction, token counts) ----------------

_EXTRA = {  # endpoint -> (upstream protocol, path, body); model "lim-x"
    "embeddings": ("chat_completion", "/v1/embeddings", {"model": "lim-x", "input": "hi"}),
    "compact": (
        "responses",
        "/v1/responses/compact",
        {"model": "lim-x", "input": [{"role": "user", "content": "hi"}]},
    ),
    "count_tokens": (
        "messages",
        "/v1/messages/count_tokens",
        {"model": "lim-x", "messages": [{"role": "user", "content": "hi"}]},
    ),
    "gemini_count": (
        "chat_completion",
        "/v1beta/models/lim-x:countTokens",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ),
}


def _extra(server, secret: str, endpoint: str, **headers: str):
    _, path, body = _EXTRA[endpoint]
    auth = {"x-goog-api-key": secret} if endpoint == "gemini_count" else {"authorization": f"Bearer {secret}"}
    return server.client.post(path, headers={**auth, **headers}, json=body, timeout=20)


@pytest.mark.parametrize("endpoint", sorted(_EXTRA))
def test_non_generation_endpoints_count_against_rpm_and_the_ip_allow_list(gateway, mock_upstream, endpoint):
    make_route(_EXTRA[endpoint][0], "lim-x", mock_upstream.base_url(_EXTRA[endpoint][0]))
    _, secret = make_key("x-rpm", limits={"rpm": 1})
    _, outside = make_key("x-ip", ip_allow=["10.0.0.0/8"])
    gateway.wait_config()
    wait_for_fresh_minute()
    first = _extra(gateway, secret, endpoint)
    assert first.status_code == 200, first.text
    second = _extra(gateway, secret, endpoint)
    assert second.status_code == 429 and 1 <= int(second.headers["retry-after"]) <= 60
    error = second.json()["error"]
    if endpoint == "count_tokens":  # each answers in its client's shape
        assert second.json()["type"] == "error" and error["type"] == "rate_limit_error"
    elif endpoint == "gemini_count":
        assert error["code"] == 429 and error["status"] == "RESOURCE_EXHAUSTED"
    else:
        assert error["code"] == "rate_limit_exceeded"
    refused = _extra(gateway, outside, endpoint)
    assert refused.status_code == 403, refused.text


def test_embeddings_hold_a_concurrency_slot(gateway, mock_upstream):
    make_route(
        "chat_completion", "lim-x", mock_upstream.base_url("chat_completion", fault="delay-first-byte=1.5")
    )
    _, secret = make_key("x-conc", limits={"concurrency": 1})
    gateway.wait_config()
    with ThreadPoolExecutor(2) as pool:
        replies = list(pool.map(lambda _: _extra(gateway, secret, "embeddings"), range(2)))
    assert sorted(r.status_code for r in replies) == [200, 429], [r.text for r in replies]
    assert _extra(gateway, secret, "embeddings").status_code == 200  # the slot was freed


def test_embeddings_and_compaction_settle_their_usage_and_cost(gateway, mock_upstream):
    """Embeddings report usage: it counts against tokens per minute, and priced, against the
    spend caps (402 once the cap is reached); compaction's usage too."""
    route = make_route("responses", "lim-x", mock_upstream.base_url("responses"))
    route.channel_model.price = {"input": "1000000", "output": "1000000"}  # $1 per token
    route.channel_model.save()
    _, tpm = make_key("x-tpm", limits={"tpm": 1})
    _, spend = make_key("x-spend", limits={"daily_spend": "1.00"})
    _, total = make_key("x-total", limits={"total_spend": "1.00"})
    gateway.wait_config()
    wait_for_fresh_minute()
    assert _extra(gateway, tpm, "embeddings").status_code == 200
    second = _extra(gateway, tpm, "embeddings")
    assert second.status_code == 429 and "tokens per minute" in second.json()["error"]["message"]
    assert _extra(gateway, spend, "embeddings").status_code == 200
    refused = _extra(gateway, spend, "embeddings")
    assert refused.status_code == 402 and refused.json()["error"]["code"] == "api_key_daily_limit_reached"
    assert _extra(gateway, total, "compact").status_code == 200
    refused = _extra(gateway, total, "compact")
    assert refused.status_code == 402 and refused.json()["error"]["code"] == "api_key_spend_limit_reached"
    with pytest.raises(openai.APIStatusError) as exc:  # and the SDK sees it as such
        openai.OpenAI(base_url=gateway.url + "/v1", api_key=spend, max_retries=0).embeddings.create(
            model="lim-x", input="again"
        )
    assert exc.value.status_code == 402
