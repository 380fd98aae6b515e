"""Model redirects (issue 19): one validated rule shape for per-key and global redirects, and
the global rules applied after the key's own, end to end."""

from __future__ import annotations

import openai
import pytest
from django.core.exceptions import ValidationError

from gateway.models import GlobalSettings
from gateway.redirects import compile_redirects, redirect_problems
from keys.models import ApiKey
from tests.servers import make_key, make_route

BAD = [
    ([{"pattern": "a", "replace": "b"}] * 33, "too many model redirect rules (max 32)"),
    ([{"pattern": "", "replace": "b"}], "pattern must not be empty"),
    ([{"pattern": "a", "replace": ""}], "replace must not be empty"),
    ([{"pattern": "é" * 129, "replace": "b"}], "exceeds 256 bytes"),  # 258 bytes in 129 characters
    ([{"pattern": "(", "replace": "b"}], "invalid model redirect pattern"),
    ([{"pattern": "a", "replace": "b", "extra": 1}], "only 'pattern' and 'replace'"),
    ({"pattern": "a"}, "must be a list"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("value", "message"), BAD, ids=[m for _, m in BAD])
def test_one_rule_shape_refused_the_same_for_keys_and_settings(value, message):
    assert any(message in p for p in redirect_problems(value)), redirect_problems(value)
    key = ApiKey(name="k", model_redirects=value)
    key.set_secret()
    with pytest.raises(ValidationError) as key_err:
        key.full_clean()
    settings = GlobalSettings(model_redirects=value)
    with pytest.raises(ValidationError) as settings_err:
        settings.full_clean()
    assert message in str(key_err.value) and message in str(settings_err.value)


def test_valid_rules_pass_and_compile_to_whole_name_matches():
    rules = [{"pattern": "gpt-4o(-mini)?", "replace": "a"}, {"pattern": "é" * 128, "replace": "b"}]
    assert redirect_problems(rules) == [] and redirect_problems(None) == [] and redirect_problems([]) == []
    compiled = compile_redirects(rules + [{"pattern": "(", "replace": "x"}])  # an old invalid row is skipped
    assert (
        len(compiled) == 2
        and compiled[0][0].fullmatch("gpt-4o-mini")
        and not compiled[0][0].fullmatch("gpt-4")
    )


def test_global_redirects_apply_after_the_keys_own(gateway, mock_upstream):
    from gateway import config_version

    make_route(
        "chat_completion",
        "e2e-global-target",
        mock_upstream.base_url("chat_completion"),
        upstream_model="up-global",
    )
    make_route(
        "chat_completion",
        "e2e-key-target",
        mock_upstream.base_url("chat_completion"),
        upstream_model="up-key",
    )
    settings = GlobalSettings.load()
    settings.model_redirects = [{"pattern": "gpt-.*", "replace": "e2e-global-target"}]
    settings.full_clean()
    settings.save()
    config_version.bump()
    _, secret = make_key(model_redirects=[{"pattern": "gpt-4o", "replace": "e2e-key-target"}])
    gateway.wait_config()
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=secret, max_retries=0)
    try:
        answer = client.chat.completions.create(model="gpt-5", messages=[{"role": "user", "content": "hi"}])
        assert answer.model == "e2e-global-target"
        assert mock_upstream.requests()[-1]["body"]["model"] == "up-global"
        answer = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        assert answer.model == "e2e-key-target"  # the key's rule wins
        assert client.embeddings.create(model="gpt-x", input="v").model == "e2e-global-target"
    finally:
        settings.model_redirects = []
        settings.save()
        config_version.bump()
