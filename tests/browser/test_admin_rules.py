"""The transform chain editor in a real browser (Playwright driving Debian's Chromium).

Runs against pytest-django's ``live_server`` rather than the uvicorn harness in
``tests/servers.py``: the production ASGI app does not serve static files, and this test is
about the admin's JavaScript (the schema-generated config form and the reordering buttons).
"""

from __future__ import annotations

import pytest

from tests.browser.chromium import ARTIFACTS, needs_chromium

pytestmark = [
    needs_chromium,
    pytest.mark.timeout(180),
]


def login(page, base: str) -> None:
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "password")
    page.click("input[type=submit]")
    page.wait_for_selector("#user-tools")


def rule_rows(page):
    return page.locator("#transform_rules-group .inline-related:not(.empty-form)")


def test_provider_chain_editor(page, live_server, admin_user):
    from providers.models import Provider
    from transforms.models import TransformRule

    provider = Provider.objects.create(name="acme")
    first = TransformRule.objects.create(
        scope="provider",
        provider=provider,
        position=0,
        transform="role_merge_consecutive",
        phase="request",
        config={},
    )
    second = TransformRule.objects.create(
        scope="provider",
        provider=provider,
        position=1,
        transform="role_developer_to_system",
        phase="request",
        config={},
        models=["o*"],
    )
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/providers/provider/{provider.pk}/change/")
    assert rule_rows(page).count() == 2

    # The picker lists only transforms allowed for providers, grouped by category.
    picker_groups = page.locator(
        "#transform_rules-group .inline-related:not(.empty-form) select.transform-picker"
    ).first
    labels = picker_groups.locator("optgroup").evaluate_all("els => els.map(e => e.label)")
    assert "Prompt (message list)" in labels and "Role" in labels and "Stream" in labels
    assert picker_groups.locator("option[value=stream_force]").count() == 1

    # Add a prompt_inject_system rule through the generated form.
    page.click("#transform_rules-group .add-row a")
    new = rule_rows(page).nth(2)
    new.locator("select.transform-picker").select_option("prompt_inject_system")
    assert "system prompt" in new.locator(".transform-description").inner_text()
    content = new.locator(".sc-field[data-path=content] textarea")
    position = new.locator(".sc-field[data-path=position] select")
    assert position.input_value() == '"append"'  # required field starts from its default
    content.fill("Answer in French.")
    position.select_option(label="prepend")
    new.locator("textarea[name$='-models']").fill("gpt-4*, claude-*")
    page.screenshot(path=str(ARTIFACTS / "admin-rules-new.png"), full_page=True)
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist .success")

    injected = TransformRule.objects.get(provider=provider, transform="prompt_inject_system")
    assert injected.scope == "provider"
    assert injected.config == {"content": "Answer in French.", "position": "prepend"}
    assert injected.models == ["gpt-4*", "claude-*"]
    assert injected.position == 2

    # Reorder: move the first rule down, save, and the stored positions follow the screen.
    assert rule_rows(page).count() == 3
    rule_rows(page).nth(0).locator("button.rule-down").click()
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist .success")
    order = list(
        TransformRule.objects.filter(provider=provider).order_by("position").values_list("pk", flat=True)
    )
    assert order == [second.pk, first.pk, injected.pk]
    second.refresh_from_db()
    assert second.models == ["o*"]  # untouched fields survive the round trip

    # An invalid value (plus a move): the server's error appears next to the generated field
    # that caused it, and the re-shown chain keeps the order that was on screen.
    row = page.locator("#" + rule_rows(page).nth(2).get_attribute("id"))  # stays on this rule when moved
    assert row.locator("select.transform-picker").input_value() == "prompt_inject_system"
    row.locator("button.rule-up").click()
    row.locator(".sc-field[data-path=content] textarea").fill("")
    assert row.locator(".sc-field[data-path=content] .sc-errors li.client").count() == 1  # live hint
    page.click("input[name=_continue]")
    page.wait_for_selector(".errornote")
    row = rule_rows(page).nth(1)
    assert row.locator("select.transform-picker").input_value() == "prompt_inject_system"
    server_error = row.locator(".sc-field[data-path=content] .sc-errors li.server")
    assert server_error.count() == 1
    assert "empty" in server_error.inner_text() or "short" in server_error.inner_text()
    row.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "admin-rules-error.png"), full_page=True)
    injected.refresh_from_db()
    assert injected.config["content"] == "Answer in French." and injected.position == 2  # nothing saved

    # Fix it and save: the move is kept.
    row.locator(".sc-field[data-path=content] textarea").fill("Réponds en français.")
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist .success")
    order = list(
        TransformRule.objects.filter(provider=provider).order_by("position").values_list("pk", flat=True)
    )
    assert order == [second.pk, injected.pk, first.pk]
    injected.refresh_from_db()
    assert injected.config == {"content": "Réponds en français.", "position": "prepend"}
    assert page.js_errors == []


def test_api_key_picker_hides_transforms_not_for_keys(page, live_server, admin_user):
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/keys/apikey/add/")
    page.click("#transform_rules-group .add-row a")
    picker = page.locator(
        "#transform_rules-group .inline-related:not(.empty-form) select.transform-picker"
    ).first
    values = picker.locator("option").evaluate_all("els => els.map(e => e.value)")
    assert "stream_force" not in values
    assert "prompt_inject_system" in values
    picker.select_option("role_developer_to_system")
    assert (
        "no options"
        in page.locator(
            "#transform_rules-group .inline-related:not(.empty-form) .schema-config-form"
        ).first.inner_text()
    )
    assert page.js_errors == []


def test_global_chain_generated_forms_and_move_buttons(page, live_server, admin_user):
    from transforms.models import TransformRule

    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/transforms/globaltransformrule/add/")
    picker = page.locator("select.transform-picker")
    assert picker.locator("option[value=stream_force]").count() == 1  # provider and global, not keys

    # Key/value rows: an optional map starts unset; "set a value" starts from the default.
    picker.select_option("field_alias_reserved_tool_names")
    aliases = page.locator(".sc-field[data-path=aliases]")
    aliases.locator("button.sc-set").click()
    assert aliases.locator(".sc-key").first.input_value() == "view_image"
    aliases.locator("button.sc-add").click()
    aliases.locator(".sc-key").nth(1).fill("web_search")
    aliases.locator(".sc-row").nth(1).locator("input.sc-input").fill("client_web_search")
    page.screenshot(path=str(ARTIFACTS / "admin-global-map.png"), full_page=True)

    # Switching the transform swaps the form; an array of enums becomes repeatable rows.
    picker.select_option("field_strip_sampling")
    assert page.locator(".sc-field[data-path=aliases]").count() == 0
    fields = page.locator(".sc-field[data-path=fields]")
    assert fields.locator(".sc-row select").count() == 2  # required array starts from its default
    fields.locator("button.sc-add").click()
    fields.locator(".sc-row select").nth(2).select_option(label="stop")
    page.screenshot(path=str(ARTIFACTS / "admin-global-rule.png"), full_page=True)

    # Back to the map, save, and the hidden JSON carries exactly what the form shows.
    picker.select_option("field_alias_reserved_tool_names")
    page.locator(".sc-field[data-path=aliases] button.sc-set").click()
    page.locator(".sc-field[data-path=aliases] button.sc-add").click()
    page.locator(".sc-field[data-path=aliases] .sc-key").nth(1).fill("web_search")
    page.locator(".sc-field[data-path=aliases] .sc-row").nth(1).locator("input.sc-input").fill(
        "client_web_search"
    )
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist .success")
    rule = TransformRule.objects.get(transform="field_alias_reserved_tool_names")
    assert rule.scope == "global" and rule.models is None
    assert rule.config == {"aliases": {"view_image": "client_view_image", "web_search": "client_web_search"}}

    # Two more rules, then reorder from the list with the up/down buttons.
    other = TransformRule.objects.create(
        scope="global", position=5, transform="role_merge_consecutive", phase="request", config={}
    )
    page.goto(f"{base}/admin/transforms/globaltransformrule/")
    page.locator(f"button.rule-up[formaction$='/{other.pk}/move/up/']").click()
    page.wait_for_selector(".messagelist .success")
    page.screenshot(path=str(ARTIFACTS / "admin-global-chain.png"), full_page=True)
    order = list(
        TransformRule.objects.filter(scope="global").order_by("position").values_list("pk", flat=True)
    )
    assert order == [other.pk, rule.pk]
    assert page.js_errors == []


def test_generated_forms_round_trip_stored_configs(page, live_server, admin_user):
    """Loading a chain must not change any stored config: unset optional fields stay unset, keys
    the schema does not describe are kept, explicit false/empty values survive."""
    import json

    from providers.models import Provider
    from transforms.models import TransformRule

    provider = Provider.objects.create(name="roundtrip")
    stored = [
        ("prompt_inject_system", {"content": "Be brief.\nReally.", "position": "prepend", "note": "kept"}),
        ("prompt_append_empty_user", {}),
        ("stream_force", {"enabled": False}),
        ("field_set", {"path": "service_tier", "value": {"tier": ["flex", 1, None]}}),
        ("field_custom_tools_to_function", {"names": []}),
        ("field_alias_reserved_tool_names", {"aliases": {}}),
    ]
    for i, (type_id, config) in enumerate(stored):
        TransformRule.objects.create(
            scope="provider", provider=provider, position=i, transform=type_id, phase="request", config=config
        )
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/providers/provider/{provider.pk}/change/")
    hidden = page.locator(
        "#transform_rules-group .inline-related:not(.empty-form) .schema-config input[type=hidden]"
    )
    assert [json.loads(v) for v in hidden.evaluate_all("els => els.map(e => e.value)")] == [
        c for _, c in stored
    ]

    # Editing one field changes only that key; clearing an optional field omits it.
    row = rule_rows(page).nth(1)
    row.locator(".sc-field[data-path=content] textarea").fill("continue")
    assert json.loads(row.locator(".schema-config input[type=hidden]").input_value()) == {
        "content": "continue"
    }
    row.locator(".sc-field[data-path=content] textarea").fill("")
    assert json.loads(row.locator(".schema-config input[type=hidden]").input_value()) == {}
    row = rule_rows(page).nth(4)
    row.locator("button.sc-reset").click()
    assert json.loads(row.locator(".schema-config input[type=hidden]").input_value()) == {}
    assert page.js_errors == []


SYNTHETIC_REGISTRY = {
    "t": {
        "name": {"en": "T", "zh": "T"},
        "description": {"en": "Test transform.", "zh": "测试。"},
        "category": "field",
        "phases": ["request", "response"],
        "schema": {
            "type": "object",
            "properties": {
                "rules": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["pattern"],
                        "properties": {
                            "pattern": {"type": "string", "minLength": 1},
                            "effort": {"enum": ["low", "high"]},
                        },
                    },
                },
                "limit": {"type": "integer", "minimum": 1, "maximum": 10},
                "flag": {"type": "boolean", "default": True},
                "nested": {"type": "object", "properties": {"a": {"type": "string"}}},
                "anything": {"title": "Anything"},
            },
            "required": ["rules"],
        },
    },
    "u": {
        "name": {"en": "U", "zh": "U"},
        "description": {"en": "Response only.", "zh": "仅响应。"},
        "category": "stream",
        "phases": ["response"],
        "schema": {
            "type": "object",
            "properties": {"mode": {"enum": ["a", "b"], "default": "b"}},
            "required": ["mode"],
        },
    },
}


def test_schema_form_generator_on_synthetic_schema(page, live_server):
    """Array of objects, bounded integer, optional boolean, nested group, typed JSON value, server
    error placement by dotted path, and swapping forms, on a page holding only the widget."""
    import html
    import json

    stored = {"rules": [{"pattern": "gpt-*", "x": 1}], "limit": 5, "keep": "me"}
    server_errors = ["rules.0.pattern: bad pattern", "limit: 5 is not allowed", "general problem"]
    base = live_server.url
    page.goto(f"{base}/admin/login/")  # same origin for the script
    page.set_content(f"""<!DOCTYPE html><html lang="en"><head>
      <script src="{base}/static/transforms/rule_form.js"></script></head><body>
      <form><div class="inline-related">
        <select class="transform-picker" name="r-transform"><option value="t" selected>t</option><option value="u">u</option></select>
        <select name="r-phase"><option value="request" selected>request</option><option value="response">response</option></select>
        <div class="schema-config" data-scope="provider" data-registry-id="reg"
             data-errors="{html.escape(json.dumps(server_errors))}">
          <input type="hidden" name="r-config" value="{html.escape(json.dumps(stored))}">
          <div class="schema-config-form"></div></div>
      </div></form>
      <script id="reg" type="application/json">{json.dumps(SYNTHETIC_REGISTRY)}</script></body></html>""")

    def value():
        return json.loads(page.locator("input[name=r-config]").input_value())

    assert value() == stored  # loading changes nothing; unknown keys (also nested) are kept
    assert page.locator("[data-path='rules.0.pattern'] li.server").inner_text() == "bad pattern"
    assert page.locator("[data-path=limit] li.server").inner_text() == "5 is not allowed"
    assert page.locator("[data-path=''] > .sc-errors li.server").inner_text() == "general problem"

    rules = page.locator("[data-path=rules]")
    rules.locator("> .sc-array-body > button.sc-add").click()
    page.locator("[data-path='rules.1.pattern'] input").fill("o*")
    page.locator("[data-path='rules.1.effort'] select").select_option(label="high")
    assert value()["rules"] == [{"pattern": "gpt-*", "x": 1}, {"pattern": "o*", "effort": "high"}]

    page.locator("[data-path=limit] input").fill("11")
    assert value()["limit"] == 11
    assert "at most 10" in page.locator("[data-path=limit] li.client").inner_text()

    flag = page.locator("[data-path=flag]")
    assert "flag" not in value() and flag.locator("input[type=checkbox]").is_checked()  # shows the default
    flag.locator("input[type=checkbox]").click()
    assert value()["flag"] is False
    flag.locator("button.sc-link").click()
    assert "flag" not in value()

    page.locator("[data-path='nested.a'] input").fill("v")
    assert value()["nested"] == {"a": "v"}
    page.locator("[data-path='nested.a'] input").fill("")
    assert "nested" not in value()

    anything = page.locator("[data-path=anything]")
    anything.locator("select.sc-json-kind").select_option("json")
    anything.locator("textarea").fill('{"k": [1, null]}')
    assert value()["anything"] == {"k": [1, None]}
    anything.locator("select.sc-json-kind").select_option("null")
    assert value()["anything"] is None
    assert value()["keep"] == "me"

    page.locator("select.transform-picker").select_option("u")
    assert value() == {"mode": "b"}  # the other transform's options never carry over
    assert page.locator("select[name=r-phase]").input_value() == "response"
    assert page.locator(".transform-description").inner_text() == "Response only."
    assert page.js_errors == []
