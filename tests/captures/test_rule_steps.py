"""What the capture recorder keeps for the viewer: per-rule URP states (only when capturing),
the failed attempt's target and error class, the model of a rejected request; and how the
viewer turns them into chips with their own diffs."""

from __future__ import annotations

import pytest

from captures import recorder as capture_recorder_module
from captures.materialize import materialize
from captures.recorder import capture_recorder
from captures.steps import chips
from gateway.crypto import hash_api_key
from gateway.live_config import DatabaseConfigSource
from gateway.proxy.app import ProxyApp
from gateway.proxy.chain import CompiledRule
from gateway.proxy.recorder import NULL_RECORDER, RecorderSet
from gateway.proxy.snapshot import SettingsSnap
from gateway.wiring import authenticate, proxy_config
from tests.proxy.helpers import SECRET, FakeUpstream, call, channel, key, provider, snapshot
from transforms.builtin.prompt_inject_system import PromptInjectSystem
from transforms.builtin.role_merge_consecutive import RoleMergeConsecutive

pytestmark = pytest.mark.asyncio
CHAT = "/v1/chat/completions"


@pytest.fixture
async def upstream():
    up = FakeUpstream()
    await up.start()
    yield up
    await up.stop()


@pytest.fixture
def submitted(monkeypatch):
    """What the writer gets, made JSON-able as the writer does before building the dump."""
    out = []
    monkeypatch.setattr(capture_recorder_module.sink, "submit", lambda rec: out.append(materialize(rec)))
    return out


RULES = (
    CompiledRule(11, "global", "request", None, PromptInjectSystem({"content": "Be brief."})),
    CompiledRule(12, "global", "request", None, RoleMergeConsecutive({})),
)


def make_app(upstream, *, base=None, allowed=None, capture=True, rules=RULES):
    app = ProxyApp(proxy_config(), DatabaseConfigSource(), authenticate, RecorderSet([capture_recorder]))
    app.holder.set(
        snapshot(
            [provider(1, [channel(1, base_url=base or f"{upstream.base}/ok", models={"m": "m"})])],
            keys={hash_api_key(SECRET): key(capture_mode="all", allowed=allowed)},
            global_chain=rules,
            settings=SettingsSnap(capture_enabled=capture, request_timeout=10.0),
        )
    )
    return app


async def _status(app) -> int:
    """POST one Chat request to ``app`` and close its upstream client: the answer's status."""
    try:
        return (await call(app, "POST", CHAT, body())).status
    finally:
        await app.client.close()


def body(**kw):
    return {"model": "m", "messages": [{"role": "user", "content": "q"}], **kw}


async def test_request_rules_leave_one_state_per_changing_rule(upstream, submitted):
    app = make_app(upstream)
    assert await _status(app) == 200
    (rec,) = submitted
    att = rec.attempts[0]
    run = att.rule_steps["request"]
    assert run["before"]["input"][0]["role"] == "user"
    inject, merge = run["steps"]
    assert (inject["transform"], inject["changed"]) == ("prompt_inject_system", True)
    assert inject["after"]["input"][0]["role"] == "system"
    assert (merge["transform"], merge["changed"], merge["after"]) == ("role_merge_consecutive", False, None)
    # The viewer: one chip per executed rule, the first with its own diff.
    chain = chips(att.executed_chain, att.rule_steps)
    assert [c["ordinal"] for c in chain] == [1, 2]
    assert chain[0]["changed"] is True and chain[1]["changed"] is False
    added = [c for c in chain[0]["diff"].changes if c.op == "added"]
    assert added and "Be brief." in str(added[0].new)
    assert chain[1]["diff"] is None


async def test_an_empty_chain_leaves_no_states(upstream, submitted):
    """No rule ran, so there is no state to keep: the URP is not written out before an empty
    request or response chain (that snapshot was most of what recording cost the request path)."""
    app = make_app(upstream, rules=())
    assert await _status(app) == 200
    (rec,) = submitted
    att = rec.attempts[0]
    assert att.rule_steps is None and att.executed_chain == []
    assert chips(att.executed_chain, att.rule_steps) == []

    app = make_app(upstream)  # request rules only: no state for the empty response chain
    assert await _status(app) == 200
    assert set(submitted[1].attempts[0].rule_steps) == {"request"}


async def test_nothing_is_traced_when_capture_is_off(upstream, submitted):
    app = make_app(upstream, capture=False)
    snap = app.holder.current
    assert (
        app.runtime.recorders.start(None, snap, next(iter(snap.keys_by_hash.values())), b"") is NULL_RECORDER
    )
    assert NULL_RECORDER.rule_trace() is None


async def test_failed_attempts_name_target_and_error_class(upstream, submitted):
    app = make_app(upstream, base="http://127.0.0.1:1/v1")
    assert await _status(app) == 502
    assert submitted[0].attempts[0].error_detail == "connect refused 127.0.0.1:1"

    app = make_app(upstream, base=f"{upstream.base}/s500")
    assert await _status(app) == 502
    detail = submitted[1].attempts[0].error_detail
    port = upstream.base.rsplit(":", 1)[1]
    assert detail.startswith(f"upstream status 500 from 127.0.0.1:{port}")


async def test_rejected_request_keeps_its_model(upstream, submitted):
    app = make_app(upstream, allowed=("other-*",))
    assert await _status(app) == 403
    assert submitted[0].logical_model == "m"
    assert submitted[0].attempts == []
