"""stream_split_sse_frames: the rule itself is inert; the runtime picks the first matching rule."""

from __future__ import annotations

import orjson

from gateway.urp import TextNode
from gateway.urp.events import NodeDelta, NodeStart
from transforms.base import TransformContext
from transforms.builtin.stream_split_sse_frames import StreamSplitSseFrames
from transforms.engine import CompiledRule, StreamChain, select, wrap_stream_encoder
from transforms.lib.sse_frame_split import DEFAULT_MAX_FRAME_LENGTH, FrameSplitter, SplittingEncoder
from transforms.registry import registry
from transforms.validation import validate_rule

MODEL = "gpt-4o"


def rule(scope: str, limit: int | None, models=None, rule_id: int = 1) -> CompiledRule:
    config = {} if limit is None else {"max_frame_length": limit}
    return CompiledRule(rule_id, scope, "response", models, StreamSplitSseFrames(config))


def test_registered_with_schema_and_scopes():
    cls = registry["stream_split_sse_frames"]
    assert cls.phases == ("response",)
    assert "api_key" in cls.scopes
    assert cls.config_schema["properties"]["max_frame_length"]["default"] == DEFAULT_MAX_FRAME_LENGTH


def test_config_validation():
    ok = validate_rule(
        transform="stream_split_sse_frames",
        scope="api_key",
        phase="response",
        models=None,
        config={"max_frame_length": 120},
    )
    assert ok == {}
    bad = validate_rule(
        transform="stream_split_sse_frames",
        scope="provider",
        phase="response",
        models=None,
        config={"max_frame_length": 0},
    )
    assert "config" in bad
    wrong_phase = validate_rule(
        transform="stream_split_sse_frames", scope="provider", phase="request", models=None, config={}
    )
    assert "phase" in wrong_phase


def test_apply_step_changes_nothing():
    chain = StreamChain(
        [rule("provider", 10)], TransformContext(logical_model=MODEL, client_protocol="chat_completion")
    )
    events = [
        NodeStart(index=0, node=TextNode(role="assistant")),
        NodeDelta(index=0, kind="text", delta="x" * 100),
    ]
    assert [out for e in events for out in chain.process(e)] == events


def _limit(rules: list[CompiledRule], logical_model: str = MODEL) -> int | None:
    """The frame limit the hook installs for these rules, or None when the encoder is untouched."""
    inner = object()
    ctx = TransformContext(logical_model=logical_model, client_protocol="chat_completion")
    enc = wrap_stream_encoder(select([tuple(rules)], "response", logical_model), inner, ctx)
    if enc is inner:
        return None
    assert isinstance(enc, SplittingEncoder) and enc.inner is inner
    return enc.splitter.limit


def test_first_matching_rule_wins_in_scope_order():
    rules = [
        rule("provider", 500, ("claude-*",), 1),  # does not match the logical model
        rule("global", 300, None, 2),
        rule("global", 100, None, 3),
        rule("api_key", 200, None, 4),
    ]
    assert _limit(rules) == 300
    assert _limit(rules, "claude-x") == 500


def test_default_and_absent():
    assert _limit([rule("api_key", None)]) == DEFAULT_MAX_FRAME_LENGTH
    assert _limit([]) is None
    assert _limit([rule("provider", 100, ("claude-*",))]) is None


def test_reference_example_chat_text_split():
    limit = _limit([rule("provider", 240)])
    text = "0123456789" * 100
    chunk = {
        "id": "chatcmpl_1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }
    out = FrameSplitter("chat_completion", limit).process(b"data: " + orjson.dumps(chunk) + b"\n\n")
    lines = [line for line in out.split(b"\n") if line.startswith(b"data: ")]
    assert len(lines) > 1 and all(len(line) <= 240 for line in lines)
    assert "".join(orjson.loads(line[6:])["choices"][0]["delta"]["content"] for line in lines) == text


# -- the stream-encoder hook ---------------------------------------------------------------------


class _Encoder:
    """Stands in for a client StreamEncoder: one oversized Chat chunk per text delta."""

    def encode(self, event) -> bytes:
        chunk = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": event.delta}, "finish_reason": None}],
        }
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def keepalive(self) -> bytes:
        return b": keepalive\n\n"

    def close(self) -> bytes:
        return b"data: [DONE]\n\n"


def _lines(data: bytes) -> list[bytes]:
    return [line for line in data.split(b"\n") if line.startswith(b"data: {")]


def test_hook_wraps_the_encoder_with_the_first_matching_rule_in_scope_order():
    chains = [
        (rule("provider", 500, ("claude-*",), 1),),  # does not match the logical model
        (rule("global", 150, None, 2), rule("global", 100, None, 3)),
        (rule("api_key", 120, None, 4),),
    ]
    ctx = TransformContext(logical_model=MODEL, client_protocol="chat_completion")
    inner = _Encoder()
    enc = wrap_stream_encoder(select(chains, "response", MODEL), inner, ctx)
    text = "0123456789" * 100
    out = enc.encode(NodeDelta(index=0, kind="text", delta=text))
    lines = _lines(out)
    assert len(lines) > 1 and all(len(line) <= 150 for line in lines)
    assert any(len(line) > 120 for line in lines)  # the global 150 won, not the later 100 or the key's 120
    assert "".join(orjson.loads(line[6:])["choices"][0]["delta"]["content"] for line in lines) == text
    assert enc.keepalive() == b": keepalive\n\n" and enc.close() == b"data: [DONE]\n\n"


def test_hook_costs_nothing_without_a_rule():
    inner = _Encoder()
    other = CompiledRule(1, "provider", "response", None, registry["field_remove"]({"path": "x"}))
    ctx = TransformContext(logical_model=MODEL, client_protocol="chat_completion")
    assert wrap_stream_encoder([other], inner, ctx) is inner
    assert wrap_stream_encoder([], inner, ctx) is inner
