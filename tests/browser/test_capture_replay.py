"""The capture viewer's chips and replay in a real browser: a request captured through the
production gateway, each chip opening its own rule's diff, the JSON tree's search, and a replay
after the rule's config changed showing the upstream-request diff."""

from __future__ import annotations

import os

import pytest

from tests.browser.chromium import ARTIFACTS, needs_chromium
from tests.browser.test_capture_viewer import captured_request

pytestmark = [needs_chromium, pytest.mark.timeout(180)]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_chip_diffs_tree_search_and_replay(page, live_server, gateway, mock_upstream):
    from django.contrib.auth.models import Permission, User

    from transforms.models import TransformRule

    request_id = captured_request(gateway, mock_upstream)
    staff = User.objects.create_user("operator", password="op-pass", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_capture"))
    base = live_server.url
    page.goto(f"{base}/captures/login/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "op-pass")
    page.click("button[type=submit]")
    page.wait_for_selector("table.list")
    page.goto(f"{base}/captures/{request_id}/")
    page.wait_for_selector("#chain")

    chips = page.locator("#chain .chip")
    assert chips.nth(0).locator(".chip-ord").inner_text() == "1"
    assert chips.nth(1).locator(".chip-ord").inner_text() == "2"
    assert "changed" in chips.nth(0).get_attribute("class")
    assert chips.nth(1).locator(".chip-state").inner_text() == "no change"
    assert "/admin/" in chips.nth(0).locator("a.chip-rule").get_attribute("href")
    assert page.locator("#chip-diff-1").is_hidden()
    chips.nth(0).locator(".chip-open").click()
    box = page.locator("#chip-diff-1")
    assert box.is_visible()
    assert "Answer in French." in " ".join(box.locator(".right .ln.add").all_inner_texts())
    assert box.locator(".left .ln.add").count() == 0
    page.screenshot(path=str(ARTIFACTS / "capture-chip-diff.png"), full_page=True)

    # The client request as a tree: search opens and marks the match.
    page.click("#tab-client-request")
    panel = page.locator("#panel-client-request")
    panel.locator("input.tree-search").fill("capital")
    page.wait_for_function("document.querySelectorAll('#panel-client-request .tree .hit').length === 1")
    assert "capital of France" in panel.locator(".tree .hit").inner_text()
    page.screenshot(path=str(ARTIFACTS / "capture-json-tree.png"), full_page=True)

    # Change the rule, then replay: the upstream request diff shows the new prompt.
    rule = TransformRule.objects.get(transform="prompt_inject_system")
    rule.config = {"content": "Answer in Italian.", "position": "prepend"}
    rule.save()
    page.click("#replay-link")
    page.wait_for_selector("#replay-diff")
    assert "dry run" in page.locator("#replay-mode").inner_text()
    diff = page.locator("#replay-diff")
    assert "Answer in French." in " ".join(diff.locator(".left .ln.chg").all_inner_texts())
    assert "Answer in Italian." in " ".join(diff.locator(".right .ln.chg").all_inner_texts())
    page.screenshot(path=str(ARTIFACTS / "capture-replay-dry.png"), full_page=True)
    page.click("#replay-send")
    page.wait_for_selector("#replay-sent")
    assert "200" in page.locator("#replay-sent").inner_text()
    page.screenshot(path=str(ARTIFACTS / "capture-replay-sent.png"), full_page=True)
    assert page.js_errors == []
