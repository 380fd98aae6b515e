"""The server half of the chain editors (no browser): scoped and grouped picker, model globs
input, scope fixed before validation, config errors handed to the widget, global chain moves."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from transforms.forms import ModelGlobsField, rule_form_for, transform_choices, transforms_for_scope
from transforms.models import TransformRule


def test_picker_offers_only_transforms_of_the_scope_grouped_by_category():
    provider = {value for _, opts in transform_choices("provider")[1:] for value, _ in opts}
    api_key = {value for _, opts in transform_choices("api_key")[1:] for value, _ in opts}
    assert "stream_force" in provider and "stream_force" not in api_key
    assert "prompt_inject_system" in api_key
    groups = dict(transform_choices("provider")[1:])
    assert ("role_merge_consecutive", "Role: merge consecutive (role_merge_consecutive)") in groups["Role"]
    assert all(entry["schema"]["type"] == "object" for entry in transforms_for_scope("global").values())


def test_picker_renders_optgroups_with_descriptions():
    html = str(rule_form_for("api_key")()["transform"])
    assert '<optgroup label="Prompt (message list)">' in html
    assert 'data-description="Adds a system prompt segment' in html
    assert 'value="stream_force"' not in html


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("gpt-4*, claude-*", ["gpt-4*", "claude-*"]),
        ("gpt-4*\n claude-?\n\n", ["gpt-4*", "claude-?"]),
        ("", None),
        ("  ,  ", None),
        ('["o*", "gpt-5"]', ["o*", "gpt-5"]),
        ("null", None),
    ],
)
def test_model_globs_input(raw, expected):
    assert ModelGlobsField().clean(raw) == expected


def test_model_globs_shown_comma_separated():
    assert ModelGlobsField().prepare_value(["a*", "b"]) == "a*, b"
    assert ModelGlobsField().prepare_value(None) == ""


@pytest.mark.django_db
def test_global_form_validates_in_global_scope_and_normalises_config():
    form = rule_form_for("global")(
        data={
            "transform": "stream_force",
            "phase": "request",
            "enabled": "on",
            "models": "",
            "config": '{"enabled": true}',
            "position": "0",
        }
    )
    assert form.is_valid(), form.errors
    assert form.instance.scope == "global"
    form = rule_form_for("api_key")(
        data={
            "transform": "stream_force",
            "phase": "request",
            "enabled": "on",
            "models": "",
            "config": '{"enabled": true}',
            "position": "0",
        }
    )
    assert not form.is_valid()
    assert "not allowed in the api_key scope" in form.errors["transform"][0]
    form = rule_form_for("global")(
        data={"transform": "force_stream", "phase": "request", "models": "", "config": "", "position": "0"}
    )
    assert not form.is_valid()  # historical id accepted, canonicalised; missing config -> {}
    assert form.cleaned_data["transform"] == "stream_force" and form.instance.config == {}
    assert any("enabled" in m for m in form.errors["config"])


@pytest.mark.django_db
def test_config_errors_reach_the_widget_with_their_paths(admin_client):
    data = {
        "position": "0",
        "transform": "prompt_inject_system",
        "enabled": "on",
        "phase": "request",
        "models": "",
        "config": json.dumps({"content": "", "position": "middle", "extra": 1}),
    }
    response = admin_client.post(reverse("admin:transforms_globaltransformrule_add"), data)
    assert response.status_code == 200
    html = response.content.decode()
    match = re.search(r'data-errors="([^"]*)"', html)
    errors = json.loads(match.group(1).replace("&quot;", '"').replace("&#x27;", "'"))
    assert any(e.startswith("content: ") for e in errors)
    assert any(e.startswith("position: ") for e in errors)
    assert not TransformRule.objects.exists()


@pytest.mark.django_db
def test_global_add_saves_global_rule_and_keeps_unknown_keys(admin_client):
    data = {
        "position": "3",
        "transform": "prompt_inject_system",
        "enabled": "on",
        "phase": "request",
        "models": "gpt-4*",
        "config": json.dumps({"content": "Hi", "position": "append", "note": "x"}),
    }
    response = admin_client.post(reverse("admin:transforms_globaltransformrule_add"), data)
    assert response.status_code == 302
    rule = TransformRule.objects.get()
    assert (rule.scope, rule.models, rule.config["note"], rule.position) == ("global", ["gpt-4*"], "x", 3)


@pytest.mark.django_db
def test_global_move_swaps_neighbours_and_needs_post(admin_client):
    a = TransformRule.objects.create(
        scope="global", position=0, transform="role_merge_consecutive", config={}
    )
    b = TransformRule.objects.create(
        scope="global", position=0, transform="role_system_to_developer", config={}
    )
    c = TransformRule.objects.create(
        scope="global", position=7, transform="role_developer_to_system", config={}
    )
    url = reverse("admin:transforms_globaltransformrule_move", args=[c.pk, "up"])
    assert admin_client.get(url).status_code == 405
    assert admin_client.post(url).status_code == 302
    assert list(TransformRule.objects.order_by("position").values_list("pk", flat=True)) == [a.pk, c.pk, b.pk]
    admin_client.post(
        reverse("admin:transforms_globaltransformrule_move", args=[a.pk, "up"])
    )  # already first
    assert list(TransformRule.objects.order_by("position").values_list("pk", "position")) == [
        (a.pk, 0),
        (c.pk, 1),
        (b.pk, 2),
    ]


@pytest.mark.django_db
def test_provider_page_embeds_scope_schemas_once_and_renders_unknown_ids(admin_client):
    from providers.models import Provider

    provider = Provider.objects.create(name="p")
    TransformRule.objects.create(scope="provider", provider=provider, transform="js:custom", config={"a": 1})
    TransformRule.objects.create(
        scope="provider", provider=provider, position=1, transform="stream_force", config={"enabled": True}
    )
    html = admin_client.get(reverse("admin:providers_provider_change", args=[provider.pk])).content.decode()
    assert html.count('<script id="transform-registry-provider"') == 1
    assert (
        "js:custom (not installed: requests that reach this rule fail with 500 transform_init_failed)" in html
    )
    TransformRule.objects.create(
        scope="provider", provider=provider, position=2, transform="role_merge_consecutive", config={}
    )
    html = admin_client.get(reverse("admin:providers_provider_change", args=[provider.pk])).content.decode()
    assert "js:custom (not installed" in html  # an installed id is never labelled broken
    assert "role_merge_consecutive (not" not in html
    assert "transforms/rule_form.js" in html


@pytest.mark.django_db
def test_global_list_toggles_enabled(admin_client):
    rule = TransformRule.objects.create(
        scope="global", position=0, transform="stream_force", config={"enabled": True}
    )
    data = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-MIN_NUM_FORMS": "0",
        "form-MAX_NUM_FORMS": "1000",
        "form-0-id": str(rule.pk),
        "_save": "Save",
    }
    response = admin_client.post(reverse("admin:transforms_globaltransformrule_changelist"), data)
    assert response.status_code == 302
    rule.refresh_from_db()
    assert rule.enabled is False and rule.scope == "global"
