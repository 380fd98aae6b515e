"""The capture viewer in a real browser (Playwright driving Debian's Chromium).

A request goes through the production gateway (session server, no Redis: the in-process writer
stores the capture), then an auditor signs in to the viewer served by ``live_server`` (the
viewer inlines its CSS and JS), opens the
capture, sees the executed chain and the diff that highlights the injected system prompt.
"""

from __future__ import annotations

import os
import time

import openai
import pytest

from tests.browser.chromium import ARTIFACTS, needs_chromium

pytestmark = [
    needs_chromium,
    pytest.mark.timeout(180),
]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def captured_request(gateway, mock_upstream):
    """One chat request matching a provider rule's glob, captured for its key; returns the
    request id once the gateway's writer stored it."""
    from captures.models import Capture
    from gateway import config_version
    from tests.servers import make_key, make_route
    from transforms.models import TransformRule

    route = make_route(
        "chat_completion",
        "gpt-4o-audit",
        mock_upstream.base_url("chat_completion"),
        upstream_model="gpt-4o-2024-08-06",
    )
    TransformRule.objects.create(
        scope="provider",
        provider=route.provider,
        position=0,
        transform="prompt_inject_system",
        phase="request",
        models=["gpt-4*"],
        config={"content": "Answer in French.", "position": "prepend"},
    )
    TransformRule.objects.create(
        scope="global", position=0, transform="role_merge_consecutive", phase="request", config={}
    )
    config_version.bump()
    _, secret = make_key("audited", capture_mode="all")
    gateway.wait_config()
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=secret, max_retries=0)
    client.chat.completions.with_raw_response.create(
        model="gpt-4o-audit", messages=[{"role": "user", "content": "What is the capital of France?"}]
    )
    deadline = time.monotonic() + 30
    while not Capture.objects.exists():
        assert time.monotonic() < deadline, "the gateway did not store the capture"
        time.sleep(0.1)
    return Capture.objects.get().request_id


def test_auditor_sees_chain_and_injected_prompt_diff(page, live_server, gateway, mock_upstream):
    from django.contrib.auth.models import Permission, User

    request_id = captured_request(gateway, mock_upstream)
    auditor = User.objects.create_user("auditor", password="audit-pass", is_staff=True)
    auditor.user_permissions.add(Permission.objects.get(codename="view_capture"))
    base = live_server.url

    page.goto(f"{base}/captures/")
    page.fill("#id_username", "auditor")
    page.fill("#id_password", "audit-pass")
    page.click("button[type=submit]")
    page.wait_for_selector("table.list")
    row = page.locator("table.list tbody tr").first
    assert "gpt-4o-audit" in row.inner_text()
    page.screenshot(path=str(ARTIFACTS / "capture-list.png"), full_page=True)
    row.locator("a").first.click()

    page.wait_for_selector("#chain")
    assert page.locator("#request-id").inner_text() == request_id
    chips = page.locator("#chain .chip")
    names = chips.evaluate_all("els => els.map(e => e.dataset.transform)")
    assert names[:2] == ["prompt_inject_system", "role_merge_consecutive"]  # provider, then global
    assert chips.nth(0).locator(".chip-scope").inner_text() == "provider"
    assert chips.nth(1).locator(".chip-scope").inner_text() == "global"
    assert chips.nth(0).locator(".chip-phase").inner_text() == "request"

    # First tab open by default; the upstream request tab shows the encoded body.
    page.click("#tab-upstream-request")
    assert "Answer in French." in page.locator("#panel-upstream-request pre").inner_text()
    assert page.locator("#panel-client-request").is_hidden()

    page.click("#tab-diff-0")
    panel = page.locator("#panel-diff-0")
    added = panel.locator(".right .ln.add")
    assert "Answer in French." in " ".join(added.all_inner_texts())
    assert panel.locator(".left .ln.add").count() == 0
    changed = " ".join(panel.locator(".right .ln.chg").all_inner_texts())
    assert "gpt-4o-2024-08-06" in changed  # the redirected upstream model
    page.screenshot(path=str(ARTIFACTS / "capture-detail-diff.png"), full_page=True)

    # The response side: upstream body vs what the client got (the model name is rewritten back).
    page.click("#tab-diff-1")
    response_panel = page.locator("#panel-diff-1")
    assert response_panel.is_visible() and panel.is_hidden()
    assert "gpt-4o-audit" in " ".join(response_panel.locator(".right .ln.chg").all_inner_texts())
    page.screenshot(path=str(ARTIFACTS / "capture-detail-response-diff.png"), full_page=True)
    assert page.js_errors == []
