"""Worked examples in the admin: picking a transform shows its declared examples (input → output)
under the description, before anything is saved; a stored rule for a transform that is not
installed says it is broken."""

from __future__ import annotations

import pytest

from tests.browser.chromium import ARTIFACTS, needs_chromium
from tests.browser.test_admin_rules import login

pytestmark = [needs_chromium, pytest.mark.timeout(180)]


def test_examples_under_the_description(page, live_server, admin_user):
    login(page, live_server.url)
    page.goto(f"{live_server.url}/admin/transforms/globaltransformrule/add/")
    page.select_option("select.transform-picker", "role_merge_consecutive")
    block = page.locator(".transform-examples details.tx-examples")
    assert block.get_attribute("open") is not None  # open while choosing
    assert "Worked examples (3)" in block.locator("summary").inner_text()
    first = block.locator(".tx-example").first
    assert "Adjacent user messages become one" in first.inner_text()
    assert '"content": "a"' in first.locator("pre.tx-in").inner_text()
    assert '"content": "ab"' in first.locator("pre.tx-out").inner_text()
    # Another transform replaces the examples, including a removed field and a note.
    page.select_option("select.transform-picker", "field_strip_sampling")
    out = page.locator(".tx-example pre.tx-out").first.inner_text()
    assert '"top_p": 0.9' in out and "temperature: (removed)" in out
    page.screenshot(path=str(ARTIFACTS / "admin-transform-examples.png"), full_page=True)
    assert page.js_errors == []


def test_stored_rule_for_a_missing_transform_is_shown_broken(page, live_server, admin_user):
    from transforms.models import TransformRule

    rule = TransformRule.objects.create(scope="global", transform="not_installed_plugin", config={"a": 1})
    login(page, live_server.url)
    page.goto(f"{live_server.url}/admin/transforms/globaltransformrule/{rule.pk}/change/")
    note = page.locator(".schema-config-form .sc-broken")
    assert "Broken rule" in note.inner_text() and "transform_init_failed" in note.inner_text()
    assert '"a": 1' in page.locator(".schema-config-form pre.sc-readonly").inner_text()
    assert page.js_errors == []
