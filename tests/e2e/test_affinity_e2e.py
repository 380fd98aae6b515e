"""Sticky routing end to end: two gateway workers sharing Redis, two channels of equal weight.

The channels sit in one provider: this gateway's waterfall always tries providers of equal
priority in a fixed order (priority, then id), so two providers would stick without affinity
too and the test could not fail; channels of one provider are tried in weighted random order.

- Two conversations, 50 turns each, alternating between the workers: every turn of a conversation
  lands on the channel that served its first turn. Without affinity the weighted random order
  would move a conversation with probability 1/2 per turn.
- Disabling the bound channel moves the next turn, which binds again (seen by both workers).
- With the mock's per-channel prompt cache, affinity raises the cached share of input tokens.
"""

from __future__ import annotations

import openai

from tests.e2e.test_harness import redis_or_skip
from tests.servers import make_key, make_route

TURNS = 50
SYSTEM = "You are the house assistant. Answer briefly and follow the style guide. " * 12


def _flush_bindings(url: str) -> None:
    import redis

    r = redis.Redis.from_url(url)
    for key in r.scan_iter("gateway:affinity:*"):
        r.delete(key)


def _routes(mock_upstream, model: str, mode: str, cache: bool = False):
    """One provider (affinity ``mode``) with channels a and b of equal weight; the mock sees the
    channel as the upstream model ``up-a`` / ``up-b`` (and, with ``cache``, a separate prompt cache
    per channel, like two upstream accounts)."""
    routes = []
    provider = None
    for name in ("a", "b"):
        headers = {"x-mock-prompt-cache": f"{model}-{name}"} if cache else None
        route = make_route(
            "chat_completion",
            model,
            mock_upstream.base_url("chat_completion"),
            upstream_model=f"up-{name}",
            extra_headers=headers,
            provider=provider,
            **({} if provider else {"affinity_mode": mode}),
        )
        provider = route.provider
        routes.append(route)
    return routes


class Conversation:
    def __init__(self, opening: str) -> None:
        self.messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": opening}]
        self.upstreams: list[str] = []
        self.cached = 0
        self.prompt = 0

    def turn(self, server, secret: str, model: str, mock_upstream, n: int) -> None:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=secret, max_retries=0, timeout=30)
        reply = client.chat.completions.create(model=model, messages=self.messages)
        self.upstreams.append(mock_upstream.requests()[-1]["body"]["model"])
        if n:
            self.cached += reply.usage.prompt_tokens_details.cached_tokens or 0
            self.prompt += reply.usage.prompt_tokens
        self.messages += [
            {"role": "assistant", "content": reply.choices[0].message.content},
            {"role": "user", "content": f"follow-up {n}"},
        ]


def test_conversations_stick_across_workers_and_rebind_when_the_channel_goes(
    gateway, gateway_factory, mock_upstream
):
    url = redis_or_skip()
    _flush_bindings(url)
    routes = _routes(mock_upstream, "aff-sticky", "sticky")
    _, secret = make_key("aff")
    workers = [gateway_factory({"REDIS_URL": url}), gateway_factory({"REDIS_URL": url})]
    for w in workers:
        w.wait_config()
    convs = [Conversation("Plan the database migration."), Conversation("Review the API design.")]
    for n in range(TURNS):
        for i, conv in enumerate(convs):
            conv.turn(workers[(n + i) % 2], secret, "aff-sticky", mock_upstream, n)
    for conv in convs:
        assert len(conv.upstreams) == TURNS and len(set(conv.upstreams)) == 1, conv.upstreams

    from gateway import config_version

    bound = convs[0].upstreams[0]
    route = routes[0] if bound == "up-a" else routes[1]
    route.channel.enabled = False
    route.channel.save()
    config_version.bump()
    for w in workers:
        w.wait_config()
    for n in range(4):
        convs[0].turn(workers[n % 2], secret, "aff-sticky", mock_upstream, TURNS + n)
    moved = convs[0].upstreams[TURNS:]
    assert moved == [moved[0]] * 4 and moved[0] != bound


def test_affinity_raises_the_prompt_cache_share(gateway, gateway_factory, mock_upstream):
    url = redis_or_skip()
    _flush_bindings(url)
    _routes(mock_upstream, "aff-on", "sticky", cache=True)
    _routes(mock_upstream, "aff-off", "off", cache=True)
    _, secret = make_key("aff-cache")
    worker = gateway_factory({"REDIS_URL": url})
    worker.wait_config()
    on, off = Conversation("Summarise the incident."), Conversation("Summarise the incident.")
    for n in range(20):
        on.turn(worker, secret, "aff-on", mock_upstream, n)
        off.turn(worker, secret, "aff-off", mock_upstream, n)
    rate_on, rate_off = on.cached / on.prompt, off.cached / off.prompt
    print(f"cached share of input tokens: affinity on {rate_on:.0%}, off {rate_off:.0%}")
    assert len(set(on.upstreams)) == 1
    assert len(set(off.upstreams)) == 2, "without affinity the conversation wanders"
    assert rate_on > rate_off
