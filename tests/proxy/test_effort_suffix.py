"""The normalised logical model: effort suffixes resolve to the base model and set the effort."""

from __future__ import annotations

import pytest

from gateway.proxy.chain import CompiledRule
from gateway.proxy.effort_suffix import compile_suffixes, normalise, validate_suffix_map
from gateway.proxy.snapshot import SettingsSnap
from transforms.registry import registry

from .helpers import call, channel, key, provider, snapshot

CHAT = "/v1/chat/completions"


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-5-high", ("gpt-5", "high")),
        ("gpt-5-xhigh", ("gpt-5", "xhigh")),
        ("gpt-5-none", ("gpt-5", "none")),
        ("gpt-5-minimal", ("gpt-5", "minimal")),
        ("gpt-5-max", ("gpt-5", "max")),
        ("gpt-5", ("gpt-5", None)),
        ("o3-high", ("o3-high", None)),  # served under its own name: left alone
        ("nope-high", ("nope-high", None)),  # base not served either
        ("-high", ("-high", None)),
    ],
)
def test_normalise(model, expected):
    assert normalise(model, {"gpt-5", "o3-high", "o3"}) == expected


def test_custom_suffixes_extend_and_override():
    suffixes = compile_suffixes(
        {"-thinking": "high", "-nothinking": "none", "-low": "minimal", "-bad": "huge"}
    )
    assert normalise("claude-thinking", {"claude"}, suffixes) == ("claude", "high")
    assert normalise("claude-nothinking", {"claude"}, suffixes) == ("claude", "none")
    assert normalise("claude-low", {"claude"}, suffixes) == ("claude", "minimal")
    assert normalise("claude-bad", {"claude"}, suffixes) == ("claude-bad", None)


def test_validate_suffix_map():
    assert validate_suffix_map({"-thinking": "high"}) == []
    assert (
        validate_suffix_map([]) and validate_suffix_map({"-x": "huge"}) and validate_suffix_map({"-": "high"})
    )


@pytest.mark.django_db
def test_global_settings_refuse_a_bad_map():
    from gateway.models import GlobalSettings
    from gateway.services import write_settings

    row = GlobalSettings.load()
    assert write_settings(row, {"reasoning_effort_suffixes": {"-thinking": "loud"}})
    assert not write_settings(row, {"reasoning_effort_suffixes": {"-thinking": "high"}})
    assert GlobalSettings.load().reasoning_effort_suffixes == {"-thinking": "high"}


# -- through the proxy -------------------------------------------------------------------------


def body(model: str, **kw) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], **kw}


@pytest.mark.asyncio
async def test_suffix_routes_to_base_and_sets_effort(app, upstream):
    app.holder.set(
        snapshot(
            [provider(1, [channel(1, base_url=f"{upstream.base}/ok", models={"m": "up-m"})])],
            {**_keys(allowed=("m",))},
        )
    )
    reply = await call(app, "POST", CHAT, body("m-high", reasoning_effort="low"))
    assert reply.status == 200, reply.body
    assert upstream.bodies[-1]["model"] == "up-m"
    assert upstream.bodies[-1]["reasoning_effort"] == "high"  # the suffix wins over the body


@pytest.mark.asyncio
async def test_unknown_suffixed_model_is_still_not_found(app, upstream):
    app.holder.set(
        snapshot([provider(1, [channel(1, base_url=f"{upstream.base}/ok", models={"m": "up-m"})])])
    )
    reply = await call(app, "POST", CHAT, body("other-high"))
    assert reply.status == 404


@pytest.mark.asyncio
async def test_configured_suffix_and_transform_globs_see_the_base_name(app, upstream):
    rule = CompiledRule(
        1,
        "provider",
        "request",
        ("m",),
        registry()["reasoning_effort_to_model_suffix"]({"rules": [{"pattern": "*", "suffix": "-{effort}"}]}),
    )
    settings = SettingsSnap(request_timeout=10.0, effort_suffixes=compile_suffixes({"-thinking": "high"}))
    app.holder.set(
        snapshot(
            [provider(1, [channel(1, base_url=f"{upstream.base}/ok", models={"m": "up-m"})], chain=(rule,))],
            settings=settings,
        )
    )
    reply = await call(app, "POST", CHAT, body("m-thinking"))
    assert reply.status == 200, reply.body
    assert upstream.bodies[-1]["model"] == "up-m-high"


def _keys(**kw):
    from gateway.crypto import hash_api_key

    from .helpers import SECRET

    return {hash_api_key(SECRET): key(**kw)}
