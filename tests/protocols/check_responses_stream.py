"""Lifecycle checker for OpenAI Responses SSE streams (reference protocols.md §4.6, §4.9).

``check_responses_stream(raw)`` parses the bytes a client would receive and asserts the grammar
official clients rely on; it returns the parsed event payloads so tests can look further.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.protocols.sse import SSEParser

TERMINALS = frozenset({"response.completed", "response.incomplete", "response.failed"})
_PART_EVENTS = {
    "response.output_text.delta",
    "response.output_text.done",
    "response.refusal.delta",
    "response.refusal.done",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
}
_SUMMARY_EVENTS = {"response.reasoning_summary_text.delta", "response.reasoning_summary_text.done"}


class _ItemState:
    def __init__(self, item: dict[str, Any]) -> None:
        self.id = item.get("id")
        self.type = item.get("type")
        self.parts: dict[int, bool] = {}  # content_index -> open
        self.text: dict[int, str] = {}
        self.summaries: dict[int, bool] = {}
        self.args = ""
        self.args_done = False
        self.done = False


def parse_frames(raw: bytes) -> list[tuple[str | None, str]]:
    parser = SSEParser()
    frames = list(parser.feed(raw))
    frames.extend(parser.close())
    return frames


def check_responses_stream(raw: bytes) -> list[dict[str, Any]]:
    frames = parse_frames(raw)
    assert frames, "empty stream"
    # Like OpenAI's Responses API, no ``data: [DONE]``: the terminal event ends the stream.
    assert all(d != "[DONE]" for _, d in frames), "a Responses stream has no [DONE]"
    events: list[dict[str, Any]] = []
    for i, (name, data) in enumerate(frames):
        payload = orjson.loads(data)
        assert isinstance(payload, dict), f"frame {i} is not an object"
        assert name == payload.get("type"), f"frame {i}: event {name!r} != type {payload.get('type')!r}"
        assert payload.get("sequence_number") == i + 1, (
            f"frame {i}: sequence_number {payload.get('sequence_number')}"
        )
        events.append(payload)

    terminals = [e for e in events if e["type"] in TERMINALS]
    assert len(terminals) == 1, f"exactly one terminal event, got {[e['type'] for e in terminals]}"
    assert events[-1]["type"] in TERMINALS, "the terminal event must be the last event"
    terminal = events[-1]
    assert terminal["response"]["status"] != "in_progress"

    if events[0]["type"] == "error":
        # Pre-stream error form: error, response.failed.
        assert [e["type"] for e in events] == ["error", "response.failed"], [e["type"] for e in events]
        assert events[0].get("message") and "code" in events[0]
        assert terminal["response"]["error"]["code"] == events[0]["code"]
        return events

    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"], (
        f"stream must start with created, in_progress; got {[e['type'] for e in events[:2]]}"
    )
    rid = events[0]["response"]["id"]
    assert rid and events[1]["response"]["id"] == rid == terminal["response"]["id"]

    items: list[_ItemState] = []

    def item_of(e: dict[str, Any]) -> _ItemState:
        oi = e.get("output_index")
        assert isinstance(oi, int) and 0 <= oi < len(items), f"{e['type']}: unknown output_index {oi}"
        st = items[oi]
        assert not st.done, f"{e['type']} after output_item.done of item {oi}"
        if "item_id" in e:
            assert e["item_id"] == st.id, f"{e['type']}: item_id {e['item_id']} != {st.id}"
        return st

    for e in events[2:-1]:
        t = e["type"]
        assert t not in ("response.created", "response.in_progress", "error"), f"unexpected {t} mid-stream"
        assert t not in ("response.reasoning_signature.delta", "response.reasoning.delta"), (
            f"legacy event {t}"
        )
        if t == "response.output_item.added":
            assert e["output_index"] == len(items), f"output_index {e['output_index']} not contiguous"
            st = _ItemState(e["item"])
            assert st.id, "added item needs an id"
            assert all(st.id != other.id for other in items), f"duplicate item id {st.id}"
            items.append(st)
        elif t == "response.output_item.done":
            st = item_of(e)
            assert e["item"].get("id") == st.id, "item id changed between added and done"
            assert e["item"].get("type") == st.type, "item type changed between added and done"
            assert not any(st.parts.values()), f"item {st.id} done with an open content part"
            assert not any(st.summaries.values()), f"item {st.id} done with an open summary part"
            if st.type == "function_call":
                assert st.args_done, "function_call done without function_call_arguments.done"
                assert e["item"]["arguments"] == st.args
            if st.type == "custom_tool_call":
                assert st.args_done, "custom_tool_call done without custom_tool_call_input.done"
                assert e["item"]["input"] == st.args
            if st.type == "message":
                texts = [p.get("text", p.get("refusal")) for p in e["item"]["content"]]
                assert texts == [st.text[i] for i in sorted(st.text)], "message content != streamed parts"
            st.done = True
        elif t == "response.content_part.added":
            st = item_of(e)
            ci = e["content_index"]
            assert ci not in st.parts and ci == len(st.parts), f"content_index {ci} not contiguous"
            st.parts[ci] = True
            st.text[ci] = ""
        elif t == "response.content_part.done":
            st = item_of(e)
            assert st.parts.get(e["content_index"]) is True, "content_part.done without an open part"
            st.parts[e["content_index"]] = False
        elif t in _PART_EVENTS:
            st = item_of(e)
            ci = e["content_index"]
            assert st.parts.get(ci) is True, f"{t} outside an open content part"
            if t.endswith(".delta"):
                st.text[ci] += e["delta"]
            else:
                full = e.get("text", e.get("refusal"))
                assert full == st.text[ci], f"{t} text differs from the streamed deltas"
        elif t == "response.reasoning_summary_part.added":
            st = item_of(e)
            assert e["summary_index"] not in st.summaries
            st.summaries[e["summary_index"]] = True
        elif t == "response.reasoning_summary_part.done":
            st = item_of(e)
            assert st.summaries.get(e["summary_index"]) is True
            st.summaries[e["summary_index"]] = False
        elif t in _SUMMARY_EVENTS:
            st = item_of(e)
            assert st.summaries.get(e["summary_index"]) is True, f"{t} outside an open summary part"
        elif t in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            st = item_of(e)
            assert st.type == ("custom_tool_call" if "custom" in t else "function_call"), f"{t} on {st.type}"
            assert not st.args_done
            st.args += e["delta"]
        elif t in ("response.function_call_arguments.done", "response.custom_tool_call_input.done"):
            st = item_of(e)
            assert st.type == ("custom_tool_call" if "custom" in t else "function_call"), f"{t} on {st.type}"
            assert e.get("input" if "custom" in t else "arguments") == st.args, f"{t} differs from deltas"
            st.args_done = True
        elif "output_index" in e:
            item_of(e)

    assert all(st.done for st in items), "every added item must be done before the terminal event"
    out_ids = [it.get("id") for it in terminal["response"]["output"]]
    assert out_ids == [st.id for st in items], f"terminal output {out_ids} != streamed items"
    return events
