"""The "Test channel" admin action in a real browser: select channels, pick a model, run, read
status, latency and the error."""

from __future__ import annotations

import pytest

from tests.browser.chromium import ARTIFACTS, needs_chromium
from tests.browser.test_admin_rules import login

pytestmark = [needs_chromium, pytest.mark.timeout(180)]


def test_channel_check_action(page, live_server, admin_user, mock_upstream):
    from tests.servers import make_route

    ok = make_route(
        "chat_completion", "gpt-ok", mock_upstream.base_url("chat_completion"), provider_name="acme"
    )
    down = make_route("chat_completion", "gpt-down", "http://127.0.0.1:1/v1", provider_name="gone")
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/providers/channel/")
    page.check("#action-toggle")
    page.select_option("select[name=action]", "test_channel")
    page.click("button[name=index]")
    page.wait_for_selector("#channel-checks")
    page.click("#run-check")
    page.wait_for_selector("#channel-checks td.result")
    good = page.locator(f"#channel-checks tr[data-channel='{ok.channel.pk}']")
    bad = page.locator(f"#channel-checks tr[data-channel='{down.channel.pk}']")
    assert good.locator("td.result").inner_text() == "OK"
    assert good.locator("td.status").inner_text() == "200"
    assert good.locator("td.latency").inner_text().endswith(" ms")
    assert bad.locator("td.result").inner_text() == "failed"
    assert bad.locator("td.detail").inner_text() == "connect refused 127.0.0.1:1"
    page.screenshot(path=str(ARTIFACTS / "channel-check.png"), full_page=True)
    assert page.js_errors == []
