"""The proxy end to end in-process: the ASGI app driven directly, a real aiohttp upstream on a
local port, the real Chat Completions codec on both sides."""

from __future__ import annotations

import asyncio

import pytest

from gateway.proxy.app import ProxyApp
from gateway.proxy.snapshot import SettingsSnap

from .helpers import call, channel, key, provider, snapshot, sse_events

pytestmark = pytest.mark.asyncio

CHAT = "/v1/chat/completions"


def chat_body(model: str = "m", text: str = "hi", **kw) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": text}], **kw}


def install(app: ProxyApp, snap) -> None:
    app.holder.set(snap)


async def test_non_stream_round_trip_with_headers(app, upstream):
    install(
        app, snapshot([provider(1, [channel(1, base_url=f"{upstream.base}/ok/v1", models={"m": "up-m"})])])
    )
    reply = await call(app, "POST", CHAT, chat_body(text="hello"), headers={"x-request-id": "rid-1"})
    assert reply.status == 200, reply.body
    data = reply.json()
    assert data["choices"][0]["message"]["content"] == "echo: hello"
    assert data["model"] == "m"  # the client's logical model, not the upstream one
    assert upstream.bodies[0]["model"] == "up-m"
    assert reply.headers["x-request-id"] == "rid-1"
    assert float(reply.headers["x-gateway-overhead-ms"]) >= 0
    sent = upstream.headers[0]
    assert sent["Authorization"] == "Bearer upstream-key-123"  # the channel key, never the client's


async def test_upstream_gets_exactly_our_headers(app, upstream):
    """The upstream request carries the gateway's headers and aiohttp's transport ones, with
    compression offered and no User-Agent (nothing of the client's, no client identification)."""
    install(
        app, snapshot([provider(1, [channel(1, base_url=f"{upstream.base}/ok/v1", models={"m": "up-m"})])])
    )
    for _ in range(2):  # the second request reuses the pooled connection
        reply = await call(app, "POST", CHAT, chat_body(text="hello"), headers={"user-agent": "client/1"})
        assert reply.status == 200, reply.body
    for sent in upstream.headers:
        got = {name.lower(): value for name, value in sent.items()}
        assert got.pop("x-monogate-hop").startswith("mg-")  # the loop guard (its own tests)
        assert got == {
            "host": f"127.0.0.1:{upstream.port}",
            "content-type": "application/json",
            "accept": "application/json",
            "authorization": "Bearer upstream-key-123",
            "accept-encoding": "gzip, deflate",
            "content-length": sent["Content-Length"],
        }


async def test_keyless_channel_sends_no_credentials(app, upstream):
    install(
        app,
        snapshot(
            [provider(1, [channel(1, base_url=f"{upstream.base}/ok/v1", models={"m": "up-m"}, api_key="")])]
        ),
    )
    reply = await call(app, "POST", CHAT, chat_body(text="hello"))
    assert reply.status == 200, reply.body
    sent = {name.lower() for name in upstream.headers[0]}
    assert not sent & {"authorization", "x-api-key", "x-goog-api-key"}


async def test_stream_round_trip(app, upstream):
    install(app, snapshot([provider(1, [channel(1, base_url=f"{upstream.base}/ok", models={"m": "m"})])]))
    reply = await call(app, "POST", CHAT, chat_body(text="yo", stream=True))
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("text/event-stream")
    assert reply.headers["cache-control"] == "no-cache"
    assert reply.headers["x-accel-buffering"] == "no"
    events = sse_events(reply.body)
    assert events[-1] == "[DONE]"
    text = "".join(
        __import__("orjson").loads(e)["choices"][0]["delta"].get("content") or ""
        for e in events[:-1]
        if '"choices":[{' in e
    )
    assert text == "echo: yo"


async def test_failover_to_next_provider_after_server_error(app, upstream):
    install(
        app,
        snapshot(
            [
                provider(1, [channel(1, base_url=f"{upstream.base}/s500", models={"m": "m"})], priority=0),
                provider(2, [channel(2, base_url=f"{upstream.base}/ok", models={"m": "m"})], priority=1),
            ]
        ),
    )
    reply = await call(app, "POST", CHAT, chat_body())
    assert reply.status == 200
    assert upstream.hits == {"s500": 1, "ok": 1}


async def test_retry_same_channel_on_429_then_success(app, upstream):
    install(
        app,
        snapshot(
            [
                provider(
                    1,
                    [channel(1, base_url=f"{upstream.base}/flaky429", models={"m": "m"})],
                    channel_max_retries=1,
                )
            ]
        ),
    )
    reply = await call(app, "POST", CHAT, chat_body())
    assert reply.status == 200
    assert upstream.hits["flaky429"] == 2


async def test_non_retryable_status_moves_on_without_same_channel_retry(app, upstream):
    install(
        app,
        snapshot(
            [
                provider(
                    1,
                    [
                        channel(1, base_url=f"{upstream.base}/s400", models={"m": "m"}),
                        channel(2, base_url=f"{upstream.base}/ok", models={"m": "m"}, weight=1),
                    ],
                    channel_max_retries=3,
                )
            ]
        ),
    )
    # Whatever the weighted order, the 400 channel is tried at most once.
    for _ in range(4):
        reply = await call(app, "POST", CHAT, chat_body())
        assert reply.status == 200
    assert upstream.hits["s400"] <= 4 and upstream.hits["ok"] == 4


async def test_everything_failed_is_sanitised_502(app, upstream):
    install(
        app,
        snapshot(
            [
                provider(
                    1,
                    [
                        channel(
                            1,
                            base_url=f"{upstream.base}/s503",
                            models={"m": "m"},
                            api_key="sk-abcdefghijklmnop",
                        )
                    ],
                    channel_max_retries=1,
                )
            ]
        ),
    )
    reply = await call(app, "POST", CHAT, chat_body())
    assert reply.status == 502
    err = reply.json()["error"]
    assert err["upstream_status"] == 503
    assert "All upstream attempts failed for model: m" in err["message"]
    assert "internal.example.com" not in reply.body.decode()
    assert "sk-abcdefghijklmnop" not in reply.body.decode()
    assert upstream.base not in reply.body.decode()
    assert upstream.hits["s503"] == 2


async def test_connect_error_fails_over(app, upstream):
    install(
        app,
        snapshot(
            [
                provider(1, [channel(1, base_url="http://127.0.0.1:1/ok", models={"m": "m"})], priority=0),
                provider(2, [channel(2, base_url=f"{upstream.base}/ok", models={"m": "m"})], priority=1),
            ]
        ),
    )
    reply = await call(app, "POST", CHAT, chat_body())
    assert reply.status == 200


async def test_breaker_opens_and_skips_channel(app, upstream):
    install(
        app,
        snapshot(
            [
                provider(1, [channel(1, base_url=f"{upstream.base}/s500", models={"m": "m"})], priority=0),
                provider(2, [channel(2, base_url=f"{upstream.base}/ok", models={"m": "m"})], priority=1),
            ]
        ),
    )
    for _ in range(5):
        assert (await call(app, "POST", CHAT, chat_body())).status == 200
    assert upstream.hits["s500"] == 3  # opened after the third failure, then skipped
    assert app.breaker.state(1) == "open"


async def test_all_open_channels_are_still_tried(app, upstream):
    install(app, snapshot([provider(1, [channel(1, base_url=f"{upstream.base}/ok", models={"m": "m"})])]))
    for _ in range(3):
        app.breaker.record_failure(1)
    assert app.breaker.state(1) == "open"
    reply = await call(app, "POST", CHAT, chat_body())
    assert reply.status == 200
    assert app.breaker.state(1) == "closed"  # the success closed it


async def test_no_switch_after_first_byte_and_disconnect_frees_upstream(app, upstream):
    install(
        app,
        snapshot(
            [
                provider(1, [channel(1, base_url=f"{upstream.base}/hang", models={"m": "m"})]),
                provider(2, [channel(2, base_url=f"{upstream.base}/ok", models={"m": "m"})], priority=1),
            ]
        ),
    )
    reply = await asyncio.wait_for(call(app, "POST", CHAT, chat_body(stream=True), disconnect_after=1), 10)
    assert reply.status == 200
    assert b"first" in reply.body
    await asyncio.wait_for(upstream.hang_closed.wait(), 10)
    assert upstream.hits["ok"] == 0


async def test_idle_timeout_after_first_byte_is_an_error_frame(app, upstream):
    install(
        app,
        snapshot(
            [
                provider(1, [channel(1, base_url=f"{upstream.base}/silent", models={"m": "m"})]),
                provider(2, [channel(2, base_url=f"{upstream.base}/ok", models={"m": "m"})], priority=1),
            ],
            settings=SettingsSnap(idle_timeout=0.3),
        ),
    )
    reply = await asyncio.wait_for(call(app, "POST", CHAT, chat_body(stream=True)), 10)
    assert reply.status == 200
    events = sse_events(reply.body)
    assert "first" in reply.body.decode()
    assert any("upstream_idle_timeout" in e for e in events)
    assert events[-1] == "[DONE]"
    assert upstream.hits["ok"] == 0  # never switched after the first byte


async def test_keepalive_before_first_byte_then_failover(app, upstream):
    install(
        app,
        snapshot(
            [
                provider(1, [channel(1, base_url=f"{upstream.base}/slow500", models={"m": "m"})]),
                provider(2, [channel(2, base_url=f"{upstream.base}/ok", models={"m": "m"})], priority=1),
            ]
        ),
    )
    app.runtime.keepalive_seconds = 0.05
    reply = await asyncio.wait_for(call(app, "POST", CHAT, chat_body(stream=True, text="later")), 10)
    assert reply.status == 200
    assert reply.chunks[0] == b":heartbeat\n\n"  # keep-alives flowed while the first upstream thought
    assert "later" in reply.body.decode()  # and failover still happened after them
    assert upstream.hits == {"slow500": 1, "ok": 1}


async def test_keepalive_then_exhausted_is_pre_stream_error_frame(app, upstream):
    install(
        app, snapshot([provider(1, [channel(1, base_url=f"{upstream.base}/slow500", models={"m": "m"})])])
    )
    app.runtime.keepalive_seconds = 0.05
    reply = await asyncio.wait_for(call(app, "POST", CHAT, chat_body(stream=True)), 10)
    assert reply.status == 200
    events = sse_events(reply.body)
    assert events[-1] == "[DONE]"
    error = __import__("orjson").loads(events[-2])["error"]
    assert "All upstream attempts failed" in error["message"]


async def test_stream_failure_before_first_byte_is_plain_http_error(app, upstream):
    install(app, snapshot([provider(1, [channel(1, base_url=f"{upstream.base}/s500", models={"m": "m"})])]))
    reply = await call(app, "POST", CHAT, chat_body(stream=True))
    assert reply.status == 502
    assert reply.json()["error"]["upstream_status"] == 500


@pytest.mark.parametrize(
    ("path", "expect_shape"),
    [("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic"), ("/v1/responses", "openai")],
)
async def test_bad_key_is_401_in_client_shape(app, path, expect_shape):
    install(app, snapshot([]))
    reply = await call(app, "POST", path, {"model": "m"}, secret="nope")
    assert reply.status == 401
    body = reply.json()
    if expect_shape == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "authentication_error"
        assert reply.headers["request-id"] == reply.headers["x-request-id"]
    else:
        assert body["error"]["code"] == "unauthorized"


async def test_malformed_json_and_missing_model_are_400(app):
    install(app, snapshot([]))
    reply = await call(app, "POST", CHAT, b"{not json")
    assert reply.status == 400 and reply.json()["error"]["type"] == "invalid_request_error"
    reply = await call(app, "POST", CHAT, {"messages": [{"role": "user", "content": "x"}]})
    assert reply.status == 400
    assert "model" in (reply.json()["error"]["param"] or reply.json()["error"]["message"])


async def test_body_too_large_is_413(app):
    install(app, snapshot([]))
    app.max_body = 100
    reply = await call(app, "POST", CHAT, chat_body(text="x" * 200))
    assert reply.status == 413


async def test_unknown_model_404_and_disallowed_model_403(app, upstream):
    keys = {
        __import__("gateway.crypto", fromlist=["x"]).hash_api_key("sk-test-secret-0001"): key(
            allowed=("gpt-*",)
        )
    }
    install(
        app,
        snapshot(
            [provider(1, [channel(1, base_url=f"{upstream.base}/ok", models={"gpt-4": "g"})])], keys=keys
        ),
    )
    assert (await call(app, "POST", CHAT, chat_body(model="gpt-5"))).status == 404
    reply = await call(app, "POST", CHAT, chat_body(model="claude"))
    assert reply.status == 403 and reply.json()["error"]["code"] == "model_not_allowed"


async def test_models_list_and_healthz(app, upstream):
    keys = {
        __import__("gateway.crypto", fromlist=["x"]).hash_api_key("sk-test-secret-0001"): key(allowed=("a*",))
    }
    install(
        app,
        snapshot(
            [
                provider(
                    1, [channel(1, base_url=f"{upstream.base}/ok", models={"b": "b", "a1": "x", "a0": "y"})]
                )
            ],
            keys=keys,
        ),
    )
    reply = await call(app, "GET", "/v1/models")
    assert reply.json() == {
        "object": "list",
        "data": [
            {"id": "a0", "object": "model", "created": 0, "owned_by": "gateway"},
            {"id": "a1", "object": "model", "created": 0, "owned_by": "gateway"},
        ],
        "models": [],
    }
    health = await call(app, "GET", "/healthz", secret=None)
    assert health.json()["status"] == "ok" and health.json()["config_version"] == 7


async def test_query_string_is_accepted(app, upstream):
    install(app, snapshot([provider(1, [channel(1, base_url=f"{upstream.base}/ok", models={"m": "m"})])]))
    reply = await call(app, "POST", CHAT, chat_body(), query=b"beta=true")
    assert reply.status == 200


async def test_provider_attempt_budget_then_next_provider(app, upstream):
    install(
        app,
        snapshot(
            [
                provider(
                    1,
                    [
                        channel(1, base_url=f"{upstream.base}/s500", models={"m": "m"}),
                        channel(2, base_url=f"{upstream.base}/s502", models={"m": "m"}),
                    ],
                    max_retries=1,
                    channel_max_retries=5,
                    breaker=False,
                ),
                provider(2, [channel(3, base_url=f"{upstream.base}/ok", models={"m": "m"})], priority=1),
            ]
        ),
    )
    reply = await call(app, "POST", CHAT, chat_body())
    assert reply.status == 200
    assert upstream.hits["s500"] + upstream.hits["s502"] == 2  # max_retries + 1 attempts in provider 1
    assert upstream.hits["ok"] == 1
    assert app.breaker.state(1) == "closed" and app.breaker.state(2) == "closed"  # breaker off for provider 1


async def test_messages_client_gets_anthropic_shapes(app, upstream):
    install(app, snapshot([provider(1, [channel(1, base_url=f"{upstream.base}/ok", models={"m": "m"})])]))
    body = {"model": "m", "max_tokens": 20, "messages": [{"role": "user", "content": "hey"}]}
    reply = await call(app, "POST", "/v1/messages", body, query=b"beta=true")
    assert reply.status == 200, reply.body
    assert reply.json()["content"][0]["text"] == "echo: hey"
    assert reply.headers["request-id"] == reply.headers["x-request-id"]
    reply = await call(app, "POST", "/v1/messages", {**body, "stream": True})
    assert reply.status == 200
    assert b"event: message_start" in reply.body and b"event: message_stop" in reply.body
    reply = await call(app, "POST", "/v1/messages", {**body, "model": "unknown"})
    assert reply.status == 404 and reply.json()["type"] == "error"


# -- fuzz regressions (tests/fuzz) ----------------------------------------------------------------


async def test_body_nested_deeper_than_encoders_can_write_is_400(app, upstream):
    """orjson reads 1024 levels but writes only 254: such a body decoded, then crashed the
    upstream encoder (500). It is the client's mistake: a 400 before anything is sent."""
    install(
        app, snapshot([provider(1, [channel(1, base_url=f"{upstream.base}/ok/v1", models={"m": "up-m"})])])
    )
    deep: object = "x"
    for _ in range(300):
        deep = [deep]
    import json  # orjson itself refuses to write such a body

    reply = await call(app, "POST", CHAT, json.dumps(chat_body(metadata={"k": deep})).encode())
    assert reply.status == 400, reply.body
    assert "nested" in reply.json()["error"]["message"]
    assert upstream.bodies == []
    reply = await call(app, "POST", CHAT, chat_body(metadata={"k": [[["fine"]]]}))
    assert reply.status == 200, reply.body
