"""Helpers for the per-transform end-to-end tests: a route on the mock upstream, an API key, and
rules saved the way an operator saves them (validated first, so a test can never pass on a rule
the admin would have refused), then the SDK clients pointed at our production server.

Every test calls ``gateway.wait_config()`` after ``setup()`` so the server's snapshot holds the
rules before the first request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx
import openai

from tests.servers import Route, make_key, make_route


@dataclass
class RuleSpec:
    """One rule to create. ``scope``: provider (on the test's route), global, or api_key (on the
    test's key); ``models``: globs matched against the client's logical model (None = every model)."""

    transform: str
    phase: str = "request"
    config: dict[str, Any] = field(default_factory=dict)
    scope: str = "provider"
    models: list[str] | None = None
    enabled: bool = True


@dataclass
class Setup:
    route: Route
    key: Any
    secret: str
    model: str


def save_rules(specs: list[RuleSpec], *, route: Route | None, key: Any) -> None:
    """Create validated rules in list order (positions follow the list within each scope)."""
    from gateway import config_version
    from transforms.models import TransformRule

    for position, spec in enumerate(specs):
        rule = TransformRule(
            scope=spec.scope,
            transform=spec.transform,
            phase=spec.phase,
            models=spec.models,
            config=spec.config,
            position=position,
            enabled=spec.enabled,
            provider=route.provider if spec.scope == "provider" and route else None,
            api_key=key if spec.scope == "api_key" else None,
        )
        rule.full_clean()  # the same validation the admin and REST API run on save
        rule.save()
    config_version.bump()


def setup(
    mock_upstream,
    upstream: str,
    model: str,
    rules: Sequence[RuleSpec] = (),
    *,
    upstream_model: str = "",
    fault: str = "",
    **key_fields: Any,
) -> Setup:
    """A route ``model`` → ``upstream_model`` (default ``up-<model>``) on the mock speaking
    ``upstream`` (``fault``: a mock option prefix such as ``prompt-cache=1``), a fresh key (with
    ``key_fields``, e.g. ``owner``), and ``rules``."""
    route = make_route(
        upstream,
        model,
        mock_upstream.base_url(upstream, fault),
        upstream_model=upstream_model or f"up-{model}",
    )
    key, secret = make_key("transform-e2e", **key_fields)
    save_rules(list(rules), route=route, key=key)
    return Setup(route, key, secret, model)


def openai_client(gateway, secret: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=secret, max_retries=0, timeout=30)


def anthropic_client(gateway, secret: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway.url, api_key=secret, max_retries=0, timeout=30)


def post_raw(gateway, secret: str, path: str, body: dict[str, Any]) -> httpx.Response:
    """A raw POST (for bodies or response fields an SDK would hide)."""
    return httpx.post(
        f"{gateway.url}{path}",
        json=body,
        timeout=30,
        headers={"authorization": f"Bearer {secret}", "anthropic-version": "2023-06-01"},
    )


def last_upstream_body(mock_upstream) -> dict[str, Any]:
    records = mock_upstream.requests()
    assert records, "the upstream received no request"
    return records[-1]["body"]


def upstream_bodies(mock_upstream) -> list[dict[str, Any]]:
    return [record["body"] for record in mock_upstream.requests()]


def chat_text_parts(content: Any) -> list[str]:
    """The text parts of a Chat message ``content`` (a bare string is one part)."""
    if isinstance(content, str):
        return [content]
    return [part["text"] for part in content or [] if part.get("type") == "text"]


def chat_system_texts(body: dict[str, Any], role: str = "system") -> list[str]:
    """Every text part of every ``role`` message of a Chat Completions body, in order."""
    return [
        text
        for message in body["messages"]
        if message["role"] == role
        for text in chat_text_parts(message.get("content"))
    ]
