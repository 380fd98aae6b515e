"""cache_openai_tool_use: explicit breakpoints on tool results (reference 3.1)."""

import pytest

from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from gateway.urp import FileNode, ImageNode, MediaSource, Request, TextNode, ToolCallNode, ToolResultNode
from transforms.base import TransformContext
from transforms.builtin.cache_openai_tool_use import explicit_breakpoint_model
from transforms.engine import CompiledRule, run_request, select
from transforms.registry import canonical_id, registry

BP = {"mode": "explicit"}


def apply(req, upstream="responses"):
    c = TransformContext(logical_model="m", client_protocol="responses", upstream_protocol=upstream)
    rule = CompiledRule(1, "provider", "request", None, registry()["cache_openai_tool_use"]({}))
    run_request(select([(rule,), (), ()], "request", "m"), req, c)


def result(cid, *entries):
    return ToolResultNode(
        call_id=cid, content=list(entries) or [TextNode(role="user", content=f"result {cid}")]
    )


def marks(req):
    return [
        [("prompt_cache_breakpoint" in e.extra) for e in n.content]
        for n in req.input
        if isinstance(n, ToolResultNode)
    ]


@pytest.mark.parametrize(
    ("model", "ok"),
    [
        ("gpt-5.6", True),
        ("gpt-5.6-sol", True),
        ("openai/gpt-5.10-pro", True),
        ("ft:gpt-6:org:x", True),
        ("gpt-6", True),
        ("gpt-5.5", False),
        ("gpt-5", False),
        ("o4-mini", False),
        ("gpt-5-mini", False),
        ("xgpt-5.6", False),
    ],
)
def test_explicit_breakpoint_models(model, ok):
    assert explicit_breakpoint_model(model) is ok


def test_one_run_newest_result_only():
    req = Request(
        model="gpt-5.6-sol",
        input=[
            TextNode(role="user", content="go"),
            ToolCallNode(call_id="a", name="f"),
            ToolCallNode(call_id="b", name="f"),
            result("a"),
            result("b"),
        ],
    )
    apply(req)
    assert marks(req) == [[False], [True]]
    assert req.input[-1].content[0].extra["prompt_cache_breakpoint"] == BP
    assert "prompt_cache_breakpoint" not in req.input[-1].extra
    assert "prompt_cache_options" not in req.extra


def test_old_model_or_other_upstream_unchanged():
    nodes = [TextNode(role="user", content="go"), ToolCallNode(call_id="a", name="f"), result("a")]
    req = Request(model="gpt-5.5", input=nodes)
    apply(req)
    assert marks(req) == [[False]]
    req = Request(model="gpt-5.6", input=nodes)
    apply(req, upstream="chat_completion")
    assert marks(req) == [[False]]


def turns(n):
    nodes = [TextNode(role="user", content="go")]
    for i in range(n):
        nodes += [ToolCallNode(call_id=f"c{i}", name="f"), result(f"c{i}")]
    return nodes


def test_three_newest_runs_in_implicit_mode_and_idempotent():
    req = Request(model="gpt-5.6", input=turns(4))
    apply(req)
    assert marks(req) == [[False], [True], [True], [True]]
    apply(req)
    assert marks(req) == [[False], [True], [True], [True]]


def test_explicit_mode_allows_four_and_existing_markers_count():
    req = Request(model="gpt-5.6", input=turns(5), extra={"prompt_cache_options": {"mode": "explicit"}})
    apply(req)
    assert marks(req) == [[False], [True], [True], [True], [True]]
    req = Request(model="gpt-5.6", input=turns(4))
    req.input[0].extra["prompt_cache_breakpoint"] = BP  # a client's marker uses budget
    apply(req)
    assert marks(req) == [[False], [False], [True], [True]]


def test_not_after_a_tool_call_or_not_last():
    req = Request(model="gpt-5.6", input=[TextNode(role="user", content="go"), result("x")])
    apply(req)
    assert marks(req) == [[False]]
    req = Request(model="gpt-5.6", input=[*turns(1), TextNode(role="user", content="more")])
    apply(req)
    assert marks(req) == [[False]]


def test_eligibility_of_entries():
    pdf_text = FileNode(role="user", source=MediaSource(kind="text", text="inline"))
    foreign = ImageNode(
        role="user",
        source=MediaSource(kind="file_id", file_id="f1"),
        extra={"_gw_file_id_origin": "messages"},
    )
    ours = ImageNode(
        role="user", source=MediaSource(kind="file_id", file_id="f2"), extra={"_gw_file_id_origin": "openai"}
    )
    req = Request(
        model="gpt-5.6", input=[ToolCallNode(call_id="a", name="f"), result("a", ours, foreign, pdf_text)]
    )
    apply(req)
    assert marks(req) == [[True, False, False]]


def test_responses_wire_puts_the_key_inside_output_even_cross_protocol():
    req = Request(model="gpt-5.6", input=turns(1))
    apply(req)
    body = codec("responses").encode_request(
        req, EncodeContext(model="gpt-5.6", source_protocol="chat_completion", strip_nested=True)
    )
    out = [i for i in body["input"] if i.get("type") == "function_call_output"][0]
    assert out["output"] == [{"type": "input_text", "text": "result c0", "prompt_cache_breakpoint": BP}]
    assert canonical_id("auto_cache_openai_tool_use") == "cache_openai_tool_use"
