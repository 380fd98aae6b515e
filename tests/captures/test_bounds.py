"""Bounds and truncation: what the proxy appends is bounded where it is collected, and the dump
stays within the per-capture byte budget with counters and markers."""

from __future__ import annotations

import orjson

from captures.bounds import BoundedFrames, Budget, Limits, cut_utf8
from captures.dump import build
from captures.record import CaptureRecord
from tests.captures.helpers import attempt, record


def small(**kw) -> Limits:
    base = {
        "max_attempts": 16,
        "max_frames": 4096,
        "max_frame_bytes": 256 * 1024,
        "max_bytes": 16 * 1024 * 1024,
    }
    base.update(kw)
    return Limits(**base)


def test_frames_past_the_count_limit_are_counted_not_kept():
    budget = Budget(small(max_frames=3))
    frames = BoundedFrames(budget)
    for n in range(5):
        frames.append(f"data: {n}")
    assert list(frames) == ["data: 0", "data: 1", "data: 2"]
    assert budget.omitted_frames == 2 and budget.omitted_bytes == 14


def test_oversized_frame_is_cut_at_a_utf8_boundary():
    budget = Budget(small(max_frame_bytes=64))
    frames = BoundedFrames(budget)
    frames.append("é" * 40)  # 80 bytes
    kept = frames[0]
    assert kept == "é" * 32 and len(kept.encode()) == 64
    assert budget.cut_frames == 1 and budget.omitted_bytes == 16
    assert cut_utf8("aé", 2) == "a"  # never half a character


def test_frame_bytes_share_the_capture_budget():
    budget = Budget(small(max_bytes=8 * 1024, max_frame_bytes=1024))
    a, b = BoundedFrames(budget), BoundedFrames(budget)
    for _ in range(6):
        a.append("x" * 1000)
        b.append("y" * 1000)
    assert budget.frame_bytes <= 9 * 1024
    assert len(a) + len(b) < 12 and budget.omitted_frames == 12 - len(a) - len(b)


def test_record_lists_are_bounded_without_changes_to_the_proxy():
    rec = CaptureRecord(
        request_id="r",
        created_at=0.0,
        api_key_id=None,
        api_key_name="k",
        client_protocol="messages",
        stream=True,
        logical_model="m",
        budget=Budget(small(max_attempts=2, max_frames=2)),
    )
    for _ in range(4):
        att = attempt()
        rec.attempts.append(att)  # the proxy appends, then writes frames into the attempt
        att.upstream_frames.append("u1")
        att.upstream_frames.append("u2")
        att.upstream_frames.append("u3")
    for n in range(5):
        rec.client_frames.append(f"c{n}")
    assert len(rec.attempts) == 2 and rec.attempts.seen == 4
    assert [list(a.upstream_frames) for a in rec.attempts] == [["u1", "u2"], ["u1", "u2"]]
    assert list(rec.client_frames) == ["c0", "c1"]
    data, meta = build(rec)
    trunc = orjson.loads(data)["capture_truncation"]
    assert trunc["truncated"] is True and trunc["omitted_attempts"] == 2
    assert trunc["omitted_frames"] == 2 + 3  # one per kept attempt + three client frames
    assert meta.attempt_count == 4 and meta.truncated


def test_untruncated_dump_has_zero_counters_and_exact_size():
    rec = record()
    data, meta = build(rec)
    doc = orjson.loads(data)
    assert doc["capture_truncation"] == {
        "truncated": False,
        "omitted_attempts": 0,
        "omitted_frames": 0,
        "omitted_bytes": 0,
        "cut_frames": 0,
        "retained_bytes": doc["capture_truncation"]["retained_bytes"],
    }
    assert meta.raw_bytes == len(data) and not meta.truncated
    assert doc["attempts"][0]["executed_chain"] == [
        {"scope": "provider", "transform": "prompt_inject_system", "phase": "request", "rule_id": 7}
    ]
    assert b"secret judge key" not in data  # a rule's config is never recorded


def test_attempt_too_big_becomes_a_placeholder_and_capture_fits():
    limit = 8 * 1024
    rec = record(attempts=2, budget=Budget(small(max_bytes=limit)))
    rec.attempts[0].upstream_response = {"blob": "z" * 20000}
    data, _ = build(rec)
    assert len(data) <= limit
    doc = orjson.loads(data)
    first, second = doc["attempts"]
    assert first["truncated"]["reason"] == "attempt_bytes" and first["truncated"]["original_bytes"] > 20000
    assert first["upstream_response"] is None and first["executed_chain"] is None
    assert first["provider"] == "acme"  # identity kept
    assert second["upstream_response"]["choices"][0]["message"]["content"] == "Bonjour"
    assert doc["capture_truncation"]["truncated"] and doc["capture_truncation"]["omitted_bytes"] > 20000


def test_huge_client_request_is_replaced_by_a_marker():
    limit = 8 * 1024
    rec = record(budget=Budget(small(max_bytes=limit)))
    rec.client_request = {"messages": [{"role": "user", "content": "q" * 50000}]}
    data, _ = build(rec)
    doc = orjson.loads(data)
    assert len(data) <= limit
    assert doc["client_request"] == {
        "truncated": True,
        "reason": "capture_bytes",
        "original_bytes": doc["client_request"]["original_bytes"],
    }
    assert doc["client_request"]["original_bytes"] > 50000
    assert doc["attempts"][0]["upstream_request"]["model"] == "up-4o"


def test_long_identifiers_are_bounded():
    rec = record(request_id="r" * 1000)
    data, meta = build(rec)
    assert len(meta.request_id) == 256 and orjson.loads(data)["request_id"] == "r" * 256


def test_client_write_chunks_are_recorded_one_event_per_frame():
    rec = CaptureRecord(
        request_id="r",
        created_at=0.0,
        api_key_id=None,
        api_key_name="k",
        client_protocol="chat_completion",
        stream=True,
        logical_model="m",
        budget=Budget(small(max_frames=3)),
    )
    rec.client_frames.append('data: {"a":1}\n\ndata: {"b":2}\n\n')
    rec.client_frames.append("data: [DONE]\n\n")
    rec.client_frames.append('data: {"late":1}\n\n')
    assert list(rec.client_frames) == ['data: {"a":1}', 'data: {"b":2}', "data: [DONE]"]
    assert rec.budget.omitted_frames == 1
