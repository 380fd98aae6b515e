"""field_override_max_tokens end to end: an ``anthropic`` SDK Messages client asks for
``max_tokens=100000``; the provider's upstream speaks Chat Completions, Responses or Gemini. The
provider rule caps the upstream's own field (Chat ``max_completion_tokens``, Responses
``max_output_tokens``, Gemini ``generationConfig.maxOutputTokens``) at its configured value.

This file also holds the model-glob cases for the whole set: a rule's ``models`` globs are matched
against the client's logical model, never the provider's redirected upstream model. So a glob
that matches the logical model runs the rule even though the upstream sees another model name,
and a glob that matches only the upstream model name does not run it.
"""

from __future__ import annotations

import pytest

from tests.e2e.transforms.rules import RuleSpec, anthropic_client, last_upstream_body, setup


def _ask(gateway, secret: str, model: str) -> None:
    reply = anthropic_client(gateway, secret).messages.create(
        model=model, max_tokens=100000, messages=[{"role": "user", "content": "hello"}]
    )
    assert reply.content[0].text == "Echo: hello"
    assert reply.model == model


def _upstream_cap(upstream: str, body: dict) -> int | None:
    """The output-token cap in an upstream body, in that protocol's own field."""
    if upstream == "chat_completion":
        assert "max_tokens" not in body  # one cap, not two
        return body.get("max_completion_tokens")
    if upstream == "responses":
        return body.get("max_output_tokens")
    return (body.get("generationConfig") or {}).get("maxOutputTokens")


@pytest.mark.parametrize("upstream", ["chat_completion", "responses", "gemini"])
def test_client_max_tokens_is_overridden(gateway, mock_upstream, upstream):
    s = setup(
        mock_upstream,
        upstream,
        f"fomt-{upstream}",
        [RuleSpec("field_override_max_tokens", config={"value": 4096})],
    )
    gateway.wait_config()
    _ask(gateway, s.secret, s.model)
    assert _upstream_cap(upstream, last_upstream_body(mock_upstream)) == 4096


def test_glob_on_the_logical_model_runs_despite_a_redirect(gateway, mock_upstream):
    rule = RuleSpec("field_override_max_tokens", config={"value": 2048}, models=["fomt-log*"])
    s = setup(
        mock_upstream, "chat_completion", "fomt-logical", [rule], upstream_model="redirected-upstream-model"
    )
    gateway.wait_config()
    _ask(gateway, s.secret, s.model)
    body = last_upstream_body(mock_upstream)
    assert body["model"] == "redirected-upstream-model"
    assert body["max_completion_tokens"] == 2048


@pytest.mark.parametrize(
    "models", [["redirected-*"], ["fomt-other*", "FOMT-MISS"]], ids=["upstream-name", "other"]
)
def test_glob_that_misses_the_logical_model_does_not_run(gateway, mock_upstream, models):
    """``redirected-*`` matches the upstream model name only; globs are case-sensitive."""
    rule = RuleSpec("field_override_max_tokens", config={"value": 2048}, models=models)
    s = setup(
        mock_upstream, "chat_completion", "fomt-miss", [rule], upstream_model="redirected-upstream-model"
    )
    gateway.wait_config()
    _ask(gateway, s.secret, s.model)
    body = last_upstream_body(mock_upstream)
    assert body["model"] == "redirected-upstream-model"
    assert body["max_completion_tokens"] == 100000


def test_disabled_rule_does_not_run(gateway, mock_upstream):
    rule = RuleSpec("field_override_max_tokens", config={"value": 2048}, enabled=False)
    s = setup(mock_upstream, "chat_completion", "fomt-disabled", [rule])
    gateway.wait_config()
    _ask(gateway, s.secret, s.model)
    assert last_upstream_body(mock_upstream)["max_completion_tokens"] == 100000
