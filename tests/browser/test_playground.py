"""The admin's Playground in a real browser: paste a body, run, read the per-rule diffs, edit a
rule's config and see the upstream request change (nothing saved, nothing sent upstream)."""

from __future__ import annotations

import pytest

from tests.browser.chromium import ARTIFACTS, needs_chromium
from tests.browser.test_admin_rules import login

pytestmark = [needs_chromium, pytest.mark.timeout(180)]


def test_playground_dry_run_and_live_rule_edit(page, live_server, admin_user):
    from tests.servers import make_route
    from transforms.models import TransformRule

    route = make_route(
        "chat_completion", "gpt-play", "http://127.0.0.1:9/v1", upstream_model="gpt-up", provider_name="acme"
    )
    inject = TransformRule.objects.create(
        scope="provider",
        provider=route.provider,
        position=0,
        transform="prompt_inject_system",
        phase="request",
        config={"content": "Be brief.", "position": "prepend"},
    )
    TransformRule.objects.create(
        scope="global", position=1, transform="role_merge_consecutive", phase="request", enabled=False
    )
    base = live_server.url
    login(page, base)
    page.click("#playground-link")
    page.wait_for_selector("#pg-body")
    body = (
        '{"model": "gpt-play", "messages": [{"role": "user", "content": "What is 2+2?"}], "temperature": 0.5}'
    )
    page.fill("#pg-body", body)
    page.click("#pg-run")
    step = page.locator("#pg-chain .step[data-transform=prompt_inject_system]")
    step.wait_for()
    assert "changed" in step.get_attribute("class")
    assert "Be brief." in step.locator(".chg.added").first.inner_text()
    assert "acme" in page.locator("#pg-routing").inner_text()
    assert "gpt-up" in page.locator("#pg-routing").inner_text()
    disabled_row = page.locator("#pg-match tbody tr.st-skipped")
    assert "disabled" in disabled_row.inner_text()
    assert "Be brief." in page.locator("#pg-upstream-body").inner_text()
    assert '"***"' in page.locator("#pg-upstream-headers").inner_text()  # the channel key is masked
    page.screenshot(path=str(ARTIFACTS / "playground-dry-run.png"), full_page=True)

    # Editing the rule's config in its schema form re-runs by itself.
    page.fill(f"#pg-form-{inject.pk} .sc-field[data-path=content] textarea", "Answer in French.")
    page.wait_for_function(
        "document.getElementById('pg-upstream-body').textContent.includes('Answer in French.')"
    )
    assert "Be brief." not in page.locator("#pg-upstream-body").inner_text()
    assert "(edited)" in page.locator(f"#pg-match tbody tr[data-rule='{inject.pk}']").inner_text()
    assert '"Answer in French."' in page.locator(f"#pg-cfg-{inject.pk}").input_value()
    # The JSON underneath is editable too; an invalid config names the problem next to the rule.
    page.locator(f"#pg-rules .rule-ed[data-rule='{inject.pk}'] details.pg-json summary").click()
    page.fill(f"#pg-cfg-{inject.pk}", '{"content": "x", "position": "sideways"}')
    page.wait_for_function(f"document.querySelector('#pg-cfg-{inject.pk}').classList.contains('bad')")
    page.screenshot(path=str(ARTIFACTS / "playground-rule-edit.png"), full_page=True)
    inject.refresh_from_db()
    assert inject.config["content"] == "Be brief."

    # An unsaved new rule joins the chain.
    page.fill(f"#pg-cfg-{inject.pk}", '{"content": "Be brief.", "position": "prepend"}')
    page.select_option("#pg-add-transform", "field_set")
    page.click("#pg-add-rule")
    page.fill("#pg-new-rules .new-config", '{"path": "top_p", "value": 0.25}')
    page.wait_for_function("document.getElementById('pg-upstream-body').textContent.includes('top_p')")
    assert page.locator("#pg-chain .step[data-transform=field_set] .badge").inner_text() == "1 change"
    assert '"top_p": 0.25' in page.locator("#pg-upstream-body").inner_text()
    page.screenshot(path=str(ARTIFACTS / "playground-new-rule.png"), full_page=True)
    from transforms.models import TransformRule as Rule

    assert Rule.objects.count() == 2  # nothing saved
    assert page.js_errors == []
