"""Hypothesis strategies: random JSON values, random objects over a protocol's own field names,
structured mutations of the valid seeds (``tests/fuzz/corpus.py``) and SSE frame sequences.

Numbers stay inside what ``orjson.loads`` can produce (integers in [-2**63, 2**64-1], finite
floats) and text has no lone surrogates: the proxy parses with orjson, so nothing else can reach
a codec.
"""

from __future__ import annotations

import json
from copy import deepcopy
from typing import Any

import orjson
from hypothesis import strategies as st

from .corpus import (
    HUGE_NUMBERS,
    UNKNOWN_KINDS,
    VOCABULARY,
    WEIRD_STRINGS,
    all_paths,
    deep,
    delete_at,
    get_at,
    set_at,
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.sampled_from(HUGE_NUMBERS),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(WEIRD_STRINGS + VOCABULARY + UNKNOWN_KINDS),
)
keys = st.one_of(
    st.text(max_size=8),
    st.sampled_from(
        [
            "type",
            "role",
            "content",
            "text",
            "id",
            "name",
            "index",
            "arguments",
            "input",
            "_gw_x",
            "_gw_legacy_function",
        ]
    ),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)),
    max_leaves=12,
)
kinds = st.sampled_from(VOCABULARY + UNKNOWN_KINDS)

# A replacement value for one spot of a valid body: wrong types, nulls, huge numbers, odd
# unicode, deep nesting, a swapped or unknown kind, a part-like object, non-string arguments.
junk = st.one_of(
    json_values,
    kinds,
    st.builds(lambda k, v: {"type": k, "text": v}, kinds, json_values),
    st.builds(lambda k, v: {"role": k, "content": v}, kinds, json_values),
    st.builds(deep, st.sampled_from([40, 127, 130, 260])),
    st.just('{"a":' + "[" * 300 + "]" * 300 + "}"),
    st.just({"_gw_spoof": True, "type": "text", "text": "x"}),
)


@st.composite
def mutated(draw: st.DrawFn, seed: dict[str, Any], max_ops: int = 3) -> Any:
    """``seed`` after 1..max_ops mutations, each at a drawn path: replace the value, delete the
    key, add a key (unknown, ``_gw_`` or a known name with a junk value), swap a ``type``/``role``
    for another kind, or shuffle/empty/duplicate a list."""
    body: Any = deepcopy(seed)
    for _ in range(draw(st.integers(1, max_ops))):
        path = draw(st.sampled_from(all_paths(body)))
        target = get_at(body, path)
        op = draw(st.sampled_from(["replace", "delete", "add_key", "kind", "list"]))
        if op == "delete" and path:
            body = delete_at(body, path)
        elif op == "add_key" and isinstance(target, dict):
            target[draw(keys)] = deepcopy(draw(junk))  # never share a strategy's value between cases
        elif op == "kind" and path and path[-1] in ("type", "role"):
            body = set_at(body, path, draw(kinds))
        elif op == "list" and isinstance(target, list) and target:
            how = draw(st.sampled_from(["clear", "dup", "reverse"]))
            if how == "clear":
                target.clear()
            elif how == "dup":
                target.append(deepcopy(target[draw(st.integers(0, len(target) - 1))]))
            else:
                target.reverse()
        else:
            body = set_at(body, path, deepcopy(draw(junk)))
    return body


def random_object(field_names: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """A random JSON object over a protocol's own top-level names (so it gets past the first
    checks) mixed with arbitrary keys."""
    return st.one_of(
        st.dictionaries(st.sampled_from(field_names), json_values, max_size=8),
        st.dictionaries(st.sampled_from(field_names), json_values, max_size=6).map(
            lambda d: {"model": "fuzz-model", **d}
        ),
        st.dictionaries(keys, json_values, max_size=5),
    )


EVENT_NAMES = [
    None,
    "error",
    "ping",
    "message_start",
    "message_delta",
    "message_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "response.created",
    "response.output_item.added",
    "response.output_text.delta",
    "response.output_item.done",
    "response.completed",
    "response.failed",
    "response.function_call_arguments.delta",
    "response.reasoning_summary_text.delta",
    "banana",
    "",
]


def frame_data() -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(max_size=30),
        st.sampled_from(WEIRD_STRINGS + ["[DONE]", "{}", "[]", "null", "[" * 2000 + "]" * 2000]),
        json_values.map(lambda v: orjson.dumps(v).decode()),
        st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "index",
                    "delta",
                    "choices",
                    "candidates",
                    "item",
                    "response",
                    "error",
                    "output_index",
                    "item_id",
                    "content_block",
                    "message",
                    "usage",
                ]
            ),
            json_values,
            max_size=5,
        ).map(lambda v: orjson.dumps(v).decode()),
    )


random_frames = st.lists(
    st.tuples(st.sampled_from(EVENT_NAMES) | st.text(max_size=10), frame_data()), max_size=8
)


def dumps(value: Any) -> str:
    """JSON text for any generated value, also one nested deeper than orjson writes."""
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False)


@st.composite
def mutated_stream(draw: st.DrawFn, frames: list[tuple[str | None, str]]) -> list[tuple[str | None, str]]:
    """A valid stream with 1..3 frame-level mutations: a frame's JSON mutated, its event name
    swapped, its data replaced, or the frame dropped or repeated."""
    out = list(frames)
    for _ in range(draw(st.integers(1, 3))):
        if not out:
            break
        i = draw(st.integers(0, len(out) - 1))
        name, data = out[i]
        op = draw(st.sampled_from(["json", "json", "name", "data", "drop", "repeat"]))
        if op == "json":
            try:
                value = orjson.loads(data)
            except orjson.JSONDecodeError:
                continue
            out[i] = (name, dumps(draw(mutated(value, max_ops=2))))
        elif op == "name":
            out[i] = (draw(st.sampled_from(EVENT_NAMES)), data)
        elif op == "data":
            out[i] = (name, draw(frame_data()))
        elif op == "drop":
            del out[i]
        else:
            out.insert(i, out[i])
    return out
