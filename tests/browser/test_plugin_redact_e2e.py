"""The example plug-in (examples/monogate-redact, installed by ``make setup``) end to end: an
operator adds a ``redact_patterns`` rule through the real admin form in Chromium (picker, form
generated from the plug-in's schema, worked examples shown), then a request through the production
gateway (uvicorn subprocess, which discovered the plug-in from its entry point at start-up)
reaches the mock upstream redacted, and the capture shows the rule in the chain, the original in
the client request and the redacted text in the upstream request."""

from __future__ import annotations

import os
import time
from importlib import metadata

import openai
import orjson
import pytest

from tests.browser.chromium import ARTIFACTS, needs_chromium
from tests.browser.test_admin_rules import login

pytestmark = [needs_chromium, pytest.mark.timeout(180)]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CARD = "4111-1111-1111-1111"


def test_plugin_is_installed():
    """CI installs the example plug-in (``make setup``); without it the e2e test below is void."""
    assert metadata.distribution("monogate-redact").entry_points.select(group="monogate.transforms"), (
        "pip install -e examples/monogate-redact (make setup does it)"
    )


def test_redact_rule_added_in_the_admin_redacts_upstream_request_and_capture(
    page, live_server, admin_user, gateway, mock_upstream
):
    from captures.models import Capture
    from tests.servers import make_key, make_route
    from transforms.models import TransformRule

    make_route(
        "chat_completion", "gpt-4o-redact", mock_upstream.base_url("chat_completion"), upstream_model="up-4o"
    )
    _, secret = make_key("redacted", capture_mode="all")

    login(page, live_server.url)
    page.goto(f"{live_server.url}/admin/transforms/globaltransformrule/add/")
    page.select_option("select.transform-picker", "redact_patterns")
    assert "before the request leaves" in page.locator(".transform-description").inner_text()
    assert (
        "A card number in the user's message is redacted" in page.locator(".transform-examples").inner_text()
    )
    patterns = page.locator(".sc-field[data-path=patterns]")
    patterns.locator("button.sc-add").click()
    patterns.locator(".sc-rows input").first.fill(r"\d{4}-\d{4}-\d{4}-\d{4}")
    page.locator(".sc-field[data-path=replacement] input").fill("[card]")
    page.screenshot(path=str(ARTIFACTS / "plugin-redact-rule.png"), full_page=True)
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist .success")
    assert page.js_errors == []
    rule = TransformRule.objects.get(transform="redact_patterns")
    assert rule.scope == "global" and rule.phase == "request"
    assert rule.config["patterns"] == [r"\d{4}-\d{4}-\d{4}-\d{4}"] and rule.config["replacement"] == "[card]"

    gateway.wait_config()
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=secret, max_retries=0, timeout=30)
    reply = client.chat.completions.create(
        model="gpt-4o-redact", messages=[{"role": "user", "content": f"Is {CARD} a test card?"}]
    )
    assert reply.choices[0].message.content

    upstream = mock_upstream.requests()[-1]["body"]
    assert upstream["messages"] == [{"role": "user", "content": "Is [card] a test card?"}]
    assert CARD not in orjson.dumps(upstream).decode()

    deadline = time.monotonic() + 30
    while not Capture.objects.filter(logical_model="gpt-4o-redact").exists():
        assert time.monotonic() < deadline, "the gateway did not store the capture"
        time.sleep(0.1)
    dump = orjson.loads(Capture.objects.get(logical_model="gpt-4o-redact").dump_bytes())
    attempt = dump["attempts"][0]
    assert dump["client_request"]["messages"][0]["content"] == f"Is {CARD} a test card?"
    assert attempt["upstream_request"]["messages"][0]["content"] == "Is [card] a test card?"
    assert {
        "scope": "global",
        "transform": "redact_patterns",
        "phase": "request",
        "rule_id": rule.pk,
    } in attempt["executed_chain"]
