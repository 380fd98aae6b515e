"""Issue 20: recording costs the request path close to nothing. What the recorder keeps are
references (bytes, URP objects, tuples); the writer makes the dump from them, with the same
content as before; a full writer sheds before recording; the writer yields only when it competes
with a busy loop; the masking and image walks are skipped only when they could change nothing."""

from __future__ import annotations

import base64
import copy
import threading
from types import SimpleNamespace

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from captures import sink
from captures.images import ImageBounder, may_hold_image
from captures.materialize import materialize
from captures.recorder import capture_recorder
from captures.redact import SECRET_KEYS, mask_secrets, may_hold_secret
from tests.captures.helpers import record


def _request(**kw):
    ex = SimpleNamespace(request_id="rid-1", protocol="chat_completion", t0=0.0, client_request_id=None)
    snap = SimpleNamespace(settings=SimpleNamespace(capture_enabled=True))
    key = SimpleNamespace(id=1, name="k", capture_mode=kw.get("mode", "all"))
    return ex, snap, key


def test_the_recorder_keeps_the_clients_bytes_and_the_writer_parses_them():
    ex, snap, key = _request()
    raw = b'{"model": "m",  "messages": [{"role": "user", "content": "hi"}]}'
    rec = capture_recorder(ex, snap, key, raw)
    rec.on_request_body(raw)
    assert rec.record.client_request is raw  # a reference, not a copy
    cap = materialize(rec.record)
    assert cap.client_request == {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert cap.logical_model == "m"  # rejected before routing: the body's model


def test_a_body_that_is_not_json_is_kept_as_text():
    ex, snap, key = _request()
    rec = capture_recorder(ex, snap, key, b"not json \xff")
    assert materialize(rec.record).client_request == "not json \ufffd"


def test_a_full_writer_sheds_before_recording_and_counts_it(monkeypatch):
    writer = sink.Writer()
    writer.queue.maxsize = writer.queue_max = 1
    writer.queue.put_nowait(object())
    monkeypatch.setattr(sink, "writer", writer)
    dropped = sink.stats().get("dropped", 0)
    ex, snap, key = _request()
    assert capture_recorder(ex, snap, key, b"{}") is None
    assert sink.stats()["dropped"] == dropped + 1
    # A key that captures only abnormal requests is still recorded (known only at the end).
    ex, snap, key = _request(mode="abnormal")
    assert capture_recorder(ex, snap, key, b"{}") is not None


def test_a_rule_that_only_reorders_keys_did_not_change_the_state():
    rec = record("steps")
    before = b'{"a":1,"b":2}'
    rec.attempts[0].rule_steps = {
        "request": (
            before,
            [
                (1, "global", "reorder", "request", b'{"b":2,"a":1}'),
                (2, "global", "edit", "request", b'{"b":3,"a":1}'),
                (3, "global", "noop", "request", b'{"b":3,"a":1}'),
            ],
        )
    }
    steps = materialize(rec).attempts[0].rule_steps["request"]
    assert steps["before"] == {"a": 1, "b": 2}
    assert [(s["transform"], s["changed"], s["after"]) for s in steps["steps"]] == [
        ("reorder", False, None),
        ("edit", True, {"b": 3, "a": 1}),
        ("noop", False, None),
    ]


def test_an_unencodable_state_drops_the_capture_on_the_writer_not_the_request():
    ex, snap, key = _request()
    rec = capture_recorder(ex, snap, key, b"{}")
    rec.step("request", None, {"n": 2**80})  # orjson refuses ints beyond 64 bits
    rec.record.attempts.append(record("x").attempts[0])
    rec.record.attempts[0].rule_steps = rec.steps
    with pytest.raises(Exception):  # noqa: B017 - the writer counts it as "could not build"
        materialize(rec.record)


def _mangle(parts: tuple[str, list[str]]) -> str:
    """A secret key name in mixed case with ``_``/``-`` inserted ("Api_KEY", "x-api-key")."""
    name, how = parts
    out = ""
    for ch, h in zip(name, how, strict=False):
        out += (ch.upper() if h == "U" else ch) + (h if h in "_-" else "")
    return out


_key = st.one_of(
    st.text(alphabet="aApPiIkKeEyYtToOnN_-sSwWrRdDcC\u212a", min_size=1, max_size=14),
    st.tuples(
        st.sampled_from(sorted(SECRET_KEYS)),
        st.lists(st.sampled_from(["", "_", "-", "U"]), min_size=30, max_size=30),
    ).map(_mangle),
)
_json = st.recursive(
    st.none() | st.integers(-5, 5) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_key, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_the_secret_prescan_never_skips_a_body_the_walk_would_mask(value):
    masked = mask_secrets(copy.deepcopy(value))
    if masked != value:
        assert may_hold_secret(orjson.dumps(value))


def test_the_secret_prescan_rules_out_ordinary_bodies():
    tools = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {}}}]
    usage = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7, "max_tokens": 9}
    ordinary = {
        "model": "m",
        "tools": tools,
        "usage": usage,
        "prompt_cache_key": "k",
        "finish_reason": "stop",
    }
    assert not may_hold_secret(orjson.dumps(ordinary))
    for secret in ("api_key", "X-Api-Key", "Authorization", "client_secret", "pass_word", "to-ken"):
        assert may_hold_secret(orjson.dumps({**ordinary, "nested": [{secret: "s"}]}))


def test_the_image_prescan_sees_data_urls_and_long_base64_runs():
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(2000)).decode()
    for value in ({"u": "data:image/png;base64,AAAA"}, {"b": png}, ["x", {"y": [png]}]):
        img = ImageBounder()
        changed = img.bound(value) != value or img.images
        assert changed and may_hold_image(orjson.dumps(value))
    assert not may_hold_image(orjson.dumps({"messages": [{"role": "user", "content": "hello " * 400}]}))


def test_the_writer_yields_only_when_busy_and_behind(monkeypatch):
    slept = []
    monkeypatch.setattr("gateway.handoff.time.sleep", slept.append)
    writer = sink.Writer()
    writer.busy_share = 0.1
    writer._prep_times = (0.010, 0.004)  # the prepare step waited: the loop holds the GIL
    writer._yield(0.005)
    assert slept == []  # nothing queued meanwhile: the writer keeps up
    writer.queue.put_nowait(object())
    writer._yield(0.005)
    assert slept == [pytest.approx(0.045)]  # 10 % of a core: 5 ms of work, 45 ms of sleep
    writer._prep_times = (0.0041, 0.004)  # no waiting: an idle loop
    writer._yield(0.005)
    assert len(slept) == 1
    assert threading.current_thread() is threading.main_thread()
