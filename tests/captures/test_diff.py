"""The server-side JSON diff: added, removed and changed paths, and the marked rendering."""

from __future__ import annotations

from captures.diff import diff, parse_sse_frames, side_by_side


def ops(changes):
    return [(c.op, c.path) for c in changes]


def test_object_keys_added_removed_changed():
    left = {"model": "a", "temperature": 1, "keep": {"x": 1}}
    right = {"model": "b", "keep": {"x": 1}, "max_tokens": 5}
    assert ops(diff(left, right)) == [
        ("changed", "$.model"),
        ("removed", "$.temperature"),
        ("added", "$.max_tokens"),
    ]


def test_inserted_array_element_is_one_addition():
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    left = {"messages": msgs}
    right = {"messages": [{"role": "system", "content": "Answer in French."}, *msgs]}
    changes = diff(left, right)
    assert ops(changes) == [("added", "$.messages[0]")]
    assert changes[0].new == {"role": "system", "content": "Answer in French."}


def test_nested_change_and_type_change_and_odd_keys():
    left = {"a": [{"b": 1}], "n": 1, "we ird": True}
    right = {"a": [{"b": 2}], "n": 1.0, "we ird": True}
    assert ops(diff(left, right)) == [("changed", "$.a[0].b"), ("changed", "$.n")]
    assert ops(diff({"we ird": 1}, {})) == [("removed", '$["we ird"]')]


def test_removed_array_tail():
    assert ops(diff([1, 2, 3], [1, 2])) == [("removed", "$[2]")]


def test_rendered_lines_are_marked_by_path():
    view = side_by_side(
        "t",
        "L",
        {"messages": [{"role": "user"}], "x": 1},
        "R",
        {"messages": [{"role": "system"}, {"role": "user"}], "x": 2},
    )
    right = {line.text.strip(): line.cls for line in view.right}
    assert right['"role": "system"'] == "add" and right['"role": "user"'] == ""
    assert right['"x": 2'] == "chg"
    left = {line.text.strip(): line.cls for line in view.left}
    assert left['"x": 1'] == "chg"
    assert view.counts == {"added": 1, "removed": 0, "changed": 1}


def test_sse_frames_parse_from_both_recorders():
    upstream = ['{"a":1}', 'event: message_stop\ndata: {"type":"message_stop"}', "[DONE]"]
    client = ['data: {"a":1}\n\ndata: {"b":2}\n\n', ": keep-alive\n\n", "data: [DONE]\n\n"]
    assert parse_sse_frames(upstream) == [
        {"a": 1},
        {"event": "message_stop", "data": {"type": "message_stop"}},
        "[DONE]",
    ]
    assert parse_sse_frames(client) == [{"a": 1}, {"b": 2}, "[DONE]"]


def test_huge_documents_are_not_diffed(monkeypatch):
    from captures import diff as jdiff

    monkeypatch.setattr(jdiff, "MAX_DIFF_BYTES", 100)
    view = side_by_side("t", "L", {"x": "a" * 200}, "R", {"x": "b"})
    assert view.skipped and view.changes == [] and view.left == []
