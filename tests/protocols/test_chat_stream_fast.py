"""The Chat stream codec's plain-text fast paths (issue 20) against the generic paths.

``StreamDecoder._plain_text`` and the text-delta branch of ``StreamEncoder.encode`` skip the
generic walk for the common chunk; on any input they must give exactly what the generic code
gives. The reference decoder and encoder have the fast paths switched off."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from gateway.protocols import chat as cc
from gateway.protocols.base import EncodeContext
from gateway.urp import TextNode
from gateway.urp import events as ev


def _chunk(choices: list[Any] | None, **top: Any) -> str:
    body: dict[str, Any] = {
        "id": "chatcmpl-up",
        "object": "chat.completion.chunk",
        "created": 5,
        "model": "up",
    }
    body["choices"] = choices if choices is not None else []
    body.update(top)
    return orjson.dumps(body).decode()


def _one(delta: Any, finish: Any = None, **choice: Any) -> str:
    return _chunk([{"index": 0, "delta": delta, "finish_reason": finish, **choice}])


POOL = [
    _one({"role": "assistant", "content": ""}),
    _one({"content": "Hello"}),
    _one({"content": " wörld — ünïcode ✓"}),
    _one({"content": 'quote " and \\ backslash\n'}),
    _one({"content": ""}),
    _one({"content": None}),
    _one({"role": "assistant", "content": "with role"}),
    _one({"role": "assistant"}),
    _one({}),
    _one(None),
    _one({"content": "x", "refusal": None}),
    _one({"refusal": "no"}),
    _one({"content": "done"}, "stop"),
    _one({}, "length"),
    _one({"content": "lp"}, logprobs={"content": [{"token": "lp", "logprob": -0.1}]}),
    _one({"content": "lp-null"}, logprobs=None),
    _one({"content": [{"type": "text", "text": "list content"}]}),
    _one({"reasoning_content": "think"}),
    _one({"content": "and reason", "reasoning": "both"}),
    _one({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a"'}}]}),
    _one({"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]}),
    _one({"content": "x"}, message={"role": "assistant", "content": "snapshot"}),
    _chunk([{"index": 1, "delta": {"content": "second choice"}, "finish_reason": None}]),
    _chunk(
        [
            {"index": 0, "delta": {"content": "two"}, "finish_reason": None},
            {"index": 1, "delta": {"content": "choices"}, "finish_reason": None},
        ]
    ),
    _chunk([], usage={"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}),
    _chunk(
        [{"index": 0, "delta": {"content": "with usage"}, "finish_reason": None}],
        usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    ),
    _chunk([{"delta": {"content": "no index"}, "finish_reason": None}]),
    orjson.dumps({"id": "chatcmpl-up", "choices": None}).decode(),
    _one({"content": 12}),
]


@pytest.fixture(autouse=True)
def _pinned_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Generated call ids are the same in both decoders."""
    from gateway.protocols.chat import stream_decode

    monkeypatch.setattr(stream_decode, "new_id", lambda prefix="": prefix + "pinned")


def _decode(frames: list[str], fast: bool) -> list[ev.Event]:
    dec = cc.StreamDecoder()
    if not fast:
        dec._plain_text = lambda chunk, out: False  # type: ignore[method-assign]
    out: list[ev.Event] = []
    for data in frames:
        out.extend(dec.feed(None, data))
    out.extend(dec.feed(None, "[DONE]"))
    out.extend(dec.close())
    return out


def _sequences(seed: int, n: int) -> list[list[str]]:
    rng = random.Random(seed)
    seqs = []
    for _ in range(n):
        seq = [POOL[0]] if rng.random() < 0.7 else []
        seq += [rng.choice(POOL) for _ in range(rng.randint(1, 14))]
        if rng.random() < 0.7:
            seq.append(_one({}, "stop"))
        seqs.append(seq)
    return seqs


@pytest.mark.parametrize("seed", range(4))
def test_decoder_fast_path_matches_the_generic_walk(seed: int) -> None:
    for seq in _sequences(seed, 150):
        assert _decode(seq, fast=True) == _decode(seq, fast=False), seq


def test_decoder_fast_path_is_taken_for_plain_deltas() -> None:
    dec = cc.StreamDecoder()
    dec.feed(None, POOL[1])  # opens the text node
    out: list[ev.Event] = []
    assert dec._plain_text(orjson.loads(POOL[2]), out)
    assert out == [ev.NodeDelta(index=0, kind=ev.TEXT, delta=" wörld — ünïcode ✓")]
    assert dec._nodes[0].content == "Hello wörld — ünïcode ✓"  # type: ignore[union-attr]


def _encode(events: list[ev.Event], model: str, source: str | None, usage: bool, fast: bool) -> bytes:
    enc = cc.StreamEncoder(EncodeContext(model=model, source_protocol=source, include_usage=usage))
    enc.fast_text = fast
    enc._id, enc._created = "chatcmpl-pinned", 1700000000  # (the defaults are random / the clock)
    return b"".join(enc.encode(e) for e in events) + enc.close()


MODELS = ["gpt", 'we"ird\\model', 'x","content":"', "mödel ✓"]


@pytest.mark.parametrize("seed", range(4))
def test_encoder_fast_path_matches_the_generic_branch(seed: int) -> None:
    rng = random.Random(100 + seed)
    for seq in _sequences(seed, 100):
        events = _decode(seq, fast=True)
        if rng.random() < 0.3:  # a later ResponseStart changes the id and created
            events.insert(len(events) // 2, ev.ResponseStart(id="chatcmpl-later", model="m", created=9))
        model, source, usage = rng.choice(MODELS), rng.choice([None, "messages"]), rng.random() < 0.5
        fast = _encode(events, model, source, usage, fast=True)
        assert fast == _encode(events, model, source, usage, fast=False), (seq, model, source)


def test_encoder_text_frame_is_the_generic_chunk() -> None:
    enc = cc.StreamEncoder(EncodeContext(model='x","content":"'))
    enc.encode(ev.ResponseStart(id="chatcmpl-a", model="m", created=1))
    enc.encode(ev.NodeStart(index=0, node=TextNode(role="assistant")))
    for text in ["a", "ü ✓", '"', "\\", "\n\t", "\u2028", "x" * 1000]:
        assert enc.encode(ev.NodeDelta(index=0, kind=ev.TEXT, delta=text)) == enc._chunk({"content": text})
