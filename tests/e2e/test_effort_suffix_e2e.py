"""Reasoning-effort model suffixes through the real server: ``<model>-high`` (and a configured
``-thinking``) reach the base model's route with the effort set, and the key's allow-list sees the
base name; the capture keeps both names (the base as its logical model, the requested name as
``requested_model`` and in the stored client request)."""

from __future__ import annotations

import time

import openai
import orjson
import pytest

from tests.e2e.transforms.rules import last_upstream_body, openai_client
from tests.servers import make_key, make_route


def wait_capture(timeout: float = 30):
    """The newest capture (the in-process writer persists it off the request path)."""
    from captures.models import Capture

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = Capture.objects.order_by("-id").first()
        if row is not None:
            return row
        time.sleep(0.1)
    return None


def test_suffix_routes_to_base_model_with_effort(gateway, mock_upstream):
    make_route(
        "chat_completion", "sfx-base", mock_upstream.base_url("chat_completion"), upstream_model="up-sfx"
    )
    _, secret = make_key("suffix", allowed_models=["sfx-base"], capture_mode="all")
    gateway.wait_config()
    reply = openai_client(gateway, secret).chat.completions.create(
        model="sfx-base-high", messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.choices[0].message.content == "Echo: hi"
    body = last_upstream_body(mock_upstream)
    assert body["model"] == "up-sfx" and body["reasoning_effort"] == "high"
    cap = wait_capture()
    assert cap is not None and cap.logical_model == "sfx-base"
    dump = orjson.loads(cap.dump_bytes())
    assert dump["requested_model"] == "sfx-base-high" and dump["client_request"]["model"] == "sfx-base-high"


def test_configured_suffix_from_global_settings(gateway, mock_upstream):
    from gateway import config_version
    from gateway.models import GlobalSettings
    from gateway.services import write_settings

    assert not write_settings(
        GlobalSettings.load(), {"reasoning_effort_suffixes": {"-thinking": "high", "-nothinking": "none"}}
    )
    config_version.bump()
    make_route(
        "messages", "sfx-claude", mock_upstream.base_url("messages"), upstream_model="up-claude-3-7-sonnet"
    )
    _, secret = make_key("suffix2")
    gateway.wait_config()
    client = openai_client(gateway, secret)
    client.chat.completions.create(
        model="sfx-claude-thinking", max_completion_tokens=20000, messages=[{"role": "user", "content": "hi"}]
    )
    assert last_upstream_body(mock_upstream)["thinking"]["type"] == "enabled"
    client.chat.completions.create(
        model="sfx-claude-nothinking", messages=[{"role": "user", "content": "hi"}]
    )
    assert "thinking" not in last_upstream_body(mock_upstream)
    with pytest.raises(openai.NotFoundError):  # an unknown base model is still unknown
        client.chat.completions.create(model="sfx-other-high", messages=[{"role": "user", "content": "hi"}])
