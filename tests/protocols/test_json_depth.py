"""The nesting limit every parse boundary applies (``json_depth``): exactly ``MAX_DEPTH`` levels
pass and one more is refused: texts too short to nest deeper, counted texts, and orjson's walk."""

from __future__ import annotations

import orjson

from gateway.protocols.json_depth import MAX_DEPTH, loads_checked, too_deep


def _nested(levels: int, pad: int = 0) -> bytes:
    value: object = "x" * pad
    for _ in range(levels):
        value = [value]
    return orjson.dumps({"v": value})  # the object is one more level


def test_the_limit_is_exact_for_short_counted_and_large_texts():
    for pad in (0, 1000, 40_000):  # counted brackets (short and longer texts), then orjson's walk
        ok, deep = _nested(MAX_DEPTH - 1, pad), _nested(MAX_DEPTH, pad)
        assert not too_deep(orjson.loads(ok), ok) and loads_checked(ok)[0] == "ok"
        assert too_deep(orjson.loads(deep), deep) and loads_checked(deep)[0] == "deep"
        assert too_deep(orjson.loads(deep)) and not too_deep(orjson.loads(ok))  # without the text


def test_a_text_of_at_most_twice_the_limit_cannot_be_too_deep():
    widest = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert len(widest) == 2 * MAX_DEPTH and not too_deep(orjson.loads(widest), widest)
    deeper = b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)
    assert too_deep(orjson.loads(deeper), deeper)
