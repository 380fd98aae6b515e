"""field_custom_tools_to_function through the chain engine: request rule, response rule, stream."""

from __future__ import annotations

import itertools

import orjson
import pytest

from gateway.errors import TransformRejected
from gateway.urp import Request, Response, TextNode, ToolCallNode, ToolDef, ToolResultNode
from gateway.urp import events as ev
from gateway.urp.events import NodeDelta, NodeDone, NodeStart, ResponseDone, ResponseStart, StreamError
from transforms.base import TransformContext
from transforms.builtin.field_custom_tools_to_function import (
    APPLY_PATCH_USAGE,
    FieldCustomToolsToFunction,
)
from transforms.engine import CompiledRule, StreamChain, run_request, run_response, select
from transforms.lib.field_custom_tools_patch import normalize_patch

MODEL = "target-model"


def chains(config: dict | None = None, *, request: bool = True, response: bool = True):
    cfg = {"names": ["apply_patch"]} if config is None else config
    rules = []
    if request:
        rules.append(CompiledRule(1, "provider", "request", (MODEL,), FieldCustomToolsToFunction(cfg)))
    if response:
        rules.append(CompiledRule(2, "provider", "response", (MODEL,), FieldCustomToolsToFunction(cfg)))
    return [tuple(rules), (), ()]


def ctx() -> TransformContext:
    return TransformContext(
        logical_model=MODEL, client_protocol="responses", upstream_protocol="chat_completion"
    )


def custom_tool(name: str = "apply_patch", description: str | None = "Edit files") -> ToolDef:
    return ToolDef(
        kind="custom",
        name=name,
        description=description,
        format={"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
    )


def responses_request(**kw) -> Request:
    tools = kw.pop("tools", None) or [
        custom_tool(),
        ToolDef(kind="function", name="exec_command", parameters={"type": "object", "properties": {}}),
        ToolDef(kind="namespace", name="fs", tools=[custom_tool("write_note", "Write a note")]),
        ToolDef(kind="web_search", origin_protocol="responses", extra={"type": "web_search"}),
    ]
    return Request(model=MODEL, tools=tools, **kw)


def run_req(req: Request, config: dict | None = None) -> TransformContext:
    c = ctx()
    run_request(select(chains(config), "request", MODEL), req, c)
    return c


# -- request rule ------------------------------------------------------------------------------


def test_custom_apply_patch_becomes_function_with_required_string_input():
    req = responses_request()
    run_req(req)
    tool = req.tools[0]
    assert tool.kind == "function" and tool.name == "apply_patch"
    assert tool.parameters["required"] == ["input"]
    assert tool.parameters["properties"]["input"]["type"] == "string"
    assert "Begin Patch" in tool.parameters["properties"]["input"]["description"]
    assert tool.strict is False and tool.format is None
    assert tool.description.startswith("Edit files\n\n") and tool.description.endswith(APPLY_PATCH_USAGE)
    # not selected: the namespaced custom tool, plain functions and native tools stay as they are
    assert req.tools[1].kind == "function" and req.tools[1].parameters == {"type": "object", "properties": {}}
    assert req.tools[2].tools[0].kind == "custom"
    assert req.tools[3].kind == "web_search"


def test_description_is_not_duplicated_and_used_alone_without_one():
    req = responses_request(tools=[custom_tool(description=None)])
    run_req(req)
    assert req.tools[0].description == APPLY_PATCH_USAGE
    req = responses_request(tools=[custom_tool(description="X\n\n" + APPLY_PATCH_USAGE)])
    run_req(req)
    assert req.tools[0].description.count(APPLY_PATCH_USAGE) == 1


def test_star_converts_every_custom_tool_including_namespace_members_but_no_function():
    req = responses_request()
    run_req(req, {"names": ["*"]})
    member = req.tools[2].tools[0]
    assert member.kind == "function" and member.name == "write_note"
    assert "Begin Patch" not in member.parameters["properties"]["input"]["description"]
    assert member.description == "Write a note"
    assert req.tools[1].parameters == {"type": "object", "properties": {}}  # never converted


def test_empty_names_turn_the_rule_off():
    req = responses_request()
    c = run_req(req, {"names": []})
    assert req.tools[0].kind == "custom"
    assert "field_custom_tools_to_function" not in c.shared


def test_history_calls_results_and_tool_choice_are_rewritten():
    patch = '*** Begin Patch\n*** Add File: a.json\n+{"a": 1}\n*** End Patch\n'
    req = responses_request(
        input=[
            TextNode(role="user", content="go"),
            ToolCallNode(
                id="ctc_1", call_id="call_1", name="apply_patch", arguments=patch, tool_type="custom"
            ),
            ToolResultNode(
                id="ctco_1",
                call_id="call_1",
                tool_type="custom",
                content=[TextNode(role="user", content="Done")],
            ),
            ToolCallNode(id="fc_2", call_id="call_2", name="exec_command", arguments='{"cmd":"ls"}'),
            ToolResultNode(id="fco_2", call_id="call_2", content=[]),
        ],
        tool_choice={
            "type": "allowed_tools",
            "allowed_tools": {
                "mode": "required",
                "tools": [
                    {"type": "custom", "custom": {"name": "apply_patch"}},
                    {"type": "custom", "name": "apply_patch"},
                    {"type": "function", "function": {"name": "exec_command"}},
                ],
            },
        },
    )
    run_req(req)
    call, result, fcall, fresult = req.input[1], req.input[2], req.input[3], req.input[4]
    assert call.tool_type == "function" and call.id is None and call.call_id == "call_1"
    assert orjson.loads(call.arguments) == {"input": patch}  # kept whole although it contains JSON
    assert result.tool_type == "function" and result.id is None and result.call_id == "call_1"
    assert fcall.id == "fc_2" and fcall.arguments == '{"cmd":"ls"}' and fresult.id == "fco_2"
    assert req.tool_choice == {
        "type": "allowed_tools",
        "allowed_tools": {
            "mode": "required",
            "tools": [
                {"type": "function", "function": {"name": "apply_patch"}},
                {"type": "function", "name": "apply_patch"},
                {"type": "function", "function": {"name": "exec_command"}},
            ],
        },
    }


def test_specific_tool_choice_is_rewritten():
    req = responses_request(tool_choice={"type": "custom", "custom": {"name": "apply_patch"}})
    run_req(req)
    assert req.tool_choice == {"type": "function", "function": {"name": "apply_patch"}}
    req = responses_request(tool_choice={"type": "custom", "custom": {"name": "other"}})
    run_req(req)
    assert req.tool_choice == {"type": "custom", "custom": {"name": "other"}}


def test_same_named_function_rejects_the_request():
    req = responses_request(
        tools=[custom_tool(), ToolDef(kind="function", name="apply_patch", parameters={})]
    )
    with pytest.raises(TransformRejected) as info:
        run_req(req)
    assert "apply_patch" in info.value.message and info.value.param == "tools"


def test_same_name_in_another_namespace_is_not_a_clash():
    req = responses_request(
        tools=[
            custom_tool(),
            ToolDef(
                kind="namespace",
                name="ns",
                tools=[ToolDef(kind="function", name="apply_patch", parameters={})],
            ),
        ]
    )
    run_req(req)
    assert req.tools[0].kind == "function"
    req = responses_request(
        tools=[
            ToolDef(
                kind="namespace",
                name="ns",
                tools=[
                    custom_tool("apply_patch"),
                    ToolDef(kind="function", name="apply_patch", parameters={}),
                ],
            ),
        ]
    )
    with pytest.raises(TransformRejected):
        run_req(req)


# -- response rule -----------------------------------------------------------------------------


def response_with(*nodes) -> Response:
    return Response(id="r1", model="up", output=list(nodes), finish_reason="tool_calls")


def fcall(arguments: str, name: str = "apply_patch", call_id: str = "call_9", namespace: str | None = None):
    return ToolCallNode(id="fc_9", call_id=call_id, name=name, arguments=arguments, namespace=namespace)


def test_response_restores_and_normalises_apply_patch():
    c = run_req(responses_request())
    args = orjson.dumps(
        {"input": "*** Begin Patch ***\n*** Add File: a.txt\nhello\n*** End Patch ***"}
    ).decode()
    resp = response_with(
        TextNode(role="assistant", content="ok"), fcall(args), fcall('{"cmd":"ls"}', "exec_command")
    )
    run_response(select(chains(), "response", MODEL), resp, c)
    call = resp.output[1]
    assert call.tool_type == "custom" and call.name == "apply_patch" and call.call_id == "call_9"
    assert call.arguments == "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch\n"
    assert resp.output[2].tool_type == "function" and resp.output[2].arguments == '{"cmd":"ls"}'


def test_response_rule_alone_converts_nothing():
    c = ctx()
    args = orjson.dumps({"input": "x"}).decode()
    resp = response_with(fcall(args))
    run_response(select(chains(request=False), "response", MODEL), resp, c)
    assert resp.output[0].tool_type == "function" and resp.output[0].arguments == args


def test_response_unwraps_a_whole_json_string_and_keeps_other_text():
    c = run_req(responses_request(), {"names": ["*"]})
    resp = response_with(
        fcall(orjson.dumps("just text").decode(), "write_note", "c1", "fs"),
        fcall("not json at all", "write_note", "c2", "fs"),
        fcall('{"input": "{\\"k\\": [1]}"}', "write_note", "c3", "fs"),
    )
    run_response(select(chains({"names": ["*"]}), "response", MODEL), resp, c)
    assert [n.arguments for n in resp.output] == ["just text", "not json at all", '{"k": [1]}']
    assert all(n.tool_type == "custom" and n.namespace == "fs" for n in resp.output)


def test_omitted_namespace_is_restored_only_when_the_name_is_unique():
    config = {"names": ["*"]}
    c = run_req(responses_request(), config)
    resp = response_with(fcall('{"input":"hi"}', "write_note"))
    run_response(select(chains(config), "response", MODEL), resp, c)
    assert resp.output[0].tool_type == "custom" and resp.output[0].namespace == "fs"

    tools = [
        ToolDef(kind="namespace", name="a", tools=[custom_tool("note")]),
        ToolDef(kind="namespace", name="b", tools=[custom_tool("note")]),
    ]
    c = run_req(responses_request(tools=tools), config)
    resp = response_with(fcall('{"input":"hi"}', "note"), fcall('{"input":"yo"}', "note", "c2", "b"))
    run_response(select(chains(config), "response", MODEL), resp, c)
    assert resp.output[0].tool_type == "function"  # ambiguous without a namespace
    assert resp.output[1].tool_type == "custom" and resp.output[1].arguments == "yo"


def test_update_hunk_without_effect_is_removed():
    c = run_req(responses_request())
    patch = (
        "*** Begin Patch\n*** Update File: f\n@@\n-x\n+x\n*** Update File: g\n@@ ctx\n-a\n+b\n*** End Patch"
    )
    resp = response_with(fcall(orjson.dumps({"input": patch}).decode()))
    run_response(select(chains(), "response", MODEL), resp, c)
    assert resp.output[0].arguments == "*** Begin Patch\n*** Update File: g\n@@ ctx\n-a\n+b\n*** End Patch\n"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            '<invoke name="apply_patch">\n*** Begin Patch\n*** Add File: a\nx\n*** End of File\n*** End Patch\n</invoke>',
            "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\n",
        ),
        (
            "*** Begin Patch\n*** Add File: a.yml\nlist:\n  - item\n+kept\n-kept\n\\ No newline\n*** End Patch",
            "*** Begin Patch\n*** Add File: a.yml\n+list:\n+  - item\n+kept\n-kept\n\\ No newline\n*** End Patch\n",
        ),
        (
            "*** Begin Patch\n*** Add File: a\nline\n@@ stop\nctx\n*** End Patch",
            "*** Begin Patch\n*** Add File: a\n+line\n@@ stop\nctx\n*** End Patch\n",
        ),
        (
            "*** Begin Patch\n*** Update File: f\n@@\n ctx\n-old\n+new\n*** END OF FILE ***\n*** End Patch",
            "*** Begin Patch\n*** Update File: f\n@@\n ctx\n-old\n+new\n*** End Patch\n",
        ),
        (
            "*** Begin Patch\n*** Update File: f\n*** Move to: g\n@@\n-same\n+same\n*** End Patch",
            "*** Begin Patch\n*** Update File: f\n*** Move to: g\n*** End Patch\n",
        ),
        (
            "*** Begin Patch\n*** Update File: f\n@@\n-gone\n*** End Patch",
            "*** Begin Patch\n*** Update File: f\n@@\n-gone\n*** End Patch\n",
        ),
    ],
)
def test_patch_normalisation(raw, expected):
    assert normalize_patch(raw) == expected


# -- stream ------------------------------------------------------------------------------------

PATCH = '*** Begin Patch\n*** Add File: "é".txt\nsay "hi"\n*** End Patch'
NORMALISED = '*** Begin Patch\n*** Add File: "é".txt\n+say "hi"\n*** End Patch\n'


def wire_arguments(patch: str = PATCH) -> str:
    """The upstream's JSON arguments, with escapes (\\n, \\", \\u00e9) to split inside."""
    return '{"input": ' + orjson.dumps(patch).decode().replace("é", "\\u00e9") + "}"


def stream_events(
    fragments: list[str], *, name: str = "apply_patch", start_name: str | None = None, call_id: str = "call_1"
) -> list:
    args = "".join(fragments)
    header = ToolCallNode(call_id=call_id, name=name if start_name is None else start_name)
    done = ToolCallNode(call_id=call_id, name=name, arguments=args)
    text = TextNode(role="assistant", content="Patching.")
    return [
        ResponseStart(id="r1", model="up"),
        NodeStart(index=0, node=TextNode(role="assistant")),
        NodeDelta(index=0, kind=ev.TEXT, delta="Patching."),
        NodeStart(index=1, node=header),
        *[NodeDelta(index=1, kind=ev.ARGUMENTS, delta=f) for f in fragments],
        NodeDone(index=0, node=text),
        NodeDone(index=1, node=done),
        ResponseDone(output=[text, done], finish_reason="tool_calls"),
    ]


def run_stream(events, config: dict | None = None) -> list:
    c = run_req(responses_request(), config)
    chain = StreamChain(select(chains(config), "response", MODEL), c)
    out = []
    for event in events:
        out.extend(chain.process(event))
    return out


def check_restored(out: list, expected: str = NORMALISED) -> None:
    starts = [e for e in out if isinstance(e, NodeStart) and e.index == 1]
    dones = [e for e in out if isinstance(e, NodeDone) and e.index == 1]
    deltas = [e.delta for e in out if isinstance(e, NodeDelta) and e.index == 1]
    assert len(starts) == 1 and len(dones) == 1
    assert starts[0].node.tool_type == "custom" and starts[0].node.name == "apply_patch"
    assert deltas == [expected]  # one whole custom input: no escape or wrapper fragment leaks
    assert dones[0].node.tool_type == "custom" and dones[0].node.arguments == expected
    final = out[-1]
    assert isinstance(final, ResponseDone)
    assert final.output[1].tool_type == "custom" and final.output[1].arguments == expected
    assert out.index(starts[0]) < out.index(dones[0])


def test_stream_every_two_way_split_of_the_arguments():
    args = wire_arguments()
    assert "\\n" in args and '\\"' in args and "\\u00e9" in args
    for cut in range(len(args) + 1):
        check_restored(run_stream(stream_events([args[:cut], args[cut:]])))


def test_stream_three_way_splits_inside_escapes():
    args = wire_arguments()
    escapes = [i for i, ch in enumerate(args) if ch == "\\"]
    cuts = sorted({p for i in escapes for p in (i + 1, i + 2, i + 3)} | {1, 5, 10})
    for a, b in itertools.combinations(cuts, 2):
        check_restored(run_stream(stream_events([args[:a], args[a:b], args[b:]])))


def test_stream_one_character_fragments_and_text_keeps_streaming():
    args = wire_arguments()
    out = run_stream(stream_events(list(args)))
    check_restored(out)
    # the text delta went out before the tool call finished
    text_pos = next(i for i, e in enumerate(out) if isinstance(e, NodeDelta) and e.index == 0)
    done_pos = next(i for i, e in enumerate(out) if isinstance(e, NodeDone) and e.index == 1)
    assert text_pos < done_pos


def test_stream_plain_function_streams_unchanged():
    events = stream_events(['{"cmd":', '"ls"}'], name="exec_command")
    out = run_stream(events)
    assert [e.delta for e in out if isinstance(e, NodeDelta) and e.index == 1] == ['{"cmd":', '"ls"}']
    assert out[-1].output[1].tool_type == "function"


def test_stream_late_name_is_held_then_restored():
    out = run_stream(stream_events(['{"input": "*** Begin', ' Patch\\n*** End Patch"}'], start_name=""))
    check_restored(out, "*** Begin Patch\n*** End Patch\n")
    # nothing of the tool went out before its completion
    first_tool = next(i for i, e in enumerate(out) if getattr(e, "index", None) == 1)
    assert isinstance(out[first_tool], NodeStart) and isinstance(out[first_tool + 2], NodeDone)


def test_stream_late_name_of_a_plain_function_is_replayed_unchanged():
    events = stream_events(['{"cmd":', '"ls"}'], name="exec_command", start_name="")
    out = run_stream(events)
    tool = [e for e in out if getattr(e, "index", None) == 1]
    assert [type(e) for e in tool] == [NodeStart, NodeDelta, NodeDelta, NodeDone]
    assert [e.delta for e in tool[1:3]] == ['{"cmd":', '"ls"}']
    assert tool[0].node.name == "" and tool[3].node.tool_type == "function"


def test_stream_usage_on_a_swallowed_delta_is_kept():
    events = stream_events([wire_arguments()])
    events[4].extra["usage"] = {"x": 1}
    out = run_stream(events)
    kept = [e for e in out if isinstance(e, NodeDelta) and e.index == 1 and e.extra]
    assert len(kept) == 1 and kept[0].delta == "" and kept[0].extra == {"usage": {"x": 1}}


def test_stream_call_without_node_done_is_completed_before_response_done():
    events = stream_events(list(wire_arguments()))
    events = [e for e in events if not (isinstance(e, NodeDone) and e.index == 1)]
    check_restored(run_stream(events))


def test_stream_error_discards_buffers_and_ends_the_stream():
    events = stream_events(list(wire_arguments()))
    cut = next(i for i, e in enumerate(events) if isinstance(e, NodeDone))
    events = [*events[:cut], StreamError(message="boom", code="upstream_error"), *events[cut:]]
    out = run_stream(events)
    assert isinstance(out[-1], StreamError)
    assert not [e for e in out if isinstance(e, NodeDelta) and e.index == 1]


def test_stream_without_conversion_record_passes_everything_through():
    events = stream_events(['{"input":', '"x"}'])
    chain = StreamChain(select(chains(request=False), "response", MODEL), ctx())
    out = [o for e in events for o in chain.process(e)]
    assert out == events


# -- config ------------------------------------------------------------------------------------


def test_config_validation_and_defaults():
    from transforms.registry import registry
    from transforms.validation import validate_rule

    cls = registry["field_custom_tools_to_function"]
    assert cls.phases == ("request", "response") and cls.scopes == ("provider", "global", "api_key")
    assert cls.config_schema["properties"]["names"]["default"] == ["apply_patch"]
    assert FieldCustomToolsToFunction({}).config == {"names": ["apply_patch"]}

    def errors(config, phase="request"):
        return validate_rule(
            transform="field_custom_tools_to_function",
            scope="api_key",
            phase=phase,
            models=None,
            config=config,
        )

    for ok in ({}, {"names": []}, {"names": ["*"]}, {"names": ["apply_patch", "*", "other"]}):
        assert errors(ok) == {} and errors(ok, "response") == {}, ok
    for bad in ({"names": [""]}, {"names": "apply_patch"}, {"names": [1]}):
        assert "config" in errors(bad), bad


def test_default_config_converts_only_apply_patch():
    req = responses_request()
    run_req(req, {})
    assert req.tools[0].kind == "function"
    assert req.tools[2].tools[0].kind == "custom"


# -- issue 19 fidelity fixes -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # a Markdown rule and bold text in a new file are content, not the end of the section
        (
            "*** Begin Patch\n*** Add File: notes.md\n# Notes\n***\n*** bold ***\nend\n*** End Patch",
            "*** Begin Patch\n*** Add File: notes.md\n+# Notes\n+***\n+*** bold ***\n+end\n*** End Patch\n",
        ),
        # the grammar's own markers still end it
        (
            "*** Begin Patch\n*** Add File: a\nx\n*** Delete File: b\n*** Update File: c\n@@\n-o\n+n\n*** End Patch",
            "*** Begin Patch\n*** Add File: a\n+x\n*** Delete File: b\n*** Update File: c\n@@\n-o\n+n\n*** End Patch\n",
        ),
    ],
)
def test_only_patch_markers_end_an_add_file_section(raw, expected):
    assert normalize_patch(raw) == expected


def test_restored_call_gets_a_custom_call_item_id():
    c = run_req(responses_request())
    resp = response_with(fcall(orjson.dumps({"input": "*** Begin Patch\n*** End Patch"}).decode()))
    run_response(select(chains(), "response", MODEL), resp, c)
    assert resp.output[0].tool_type == "custom" and resp.output[0].id == "ctc_9"


def test_stream_restored_call_header_and_node_share_the_custom_call_id():
    events = stream_events([wire_arguments()])
    events[3].node.id = "fc_abc"
    events[6].node.id = "fc_abc"
    events[7].output[1].id = "fc_abc"
    out = run_stream(events)
    start = next(e for e in out if isinstance(e, NodeStart) and e.index == 1)
    done = next(e for e in out if isinstance(e, NodeDone) and e.index == 1)
    assert start.node.id == done.node.id == out[-1].output[1].id == "ctc_abc"


def test_tool_choice_follows_the_converted_identity_not_the_configured_name():
    # "*" selects every custom tool by name, but a choice naming an undeclared tool converts nothing
    req = responses_request(tool_choice={"type": "custom", "name": "not_declared"})
    run_req(req, {"names": ["*"]})
    assert req.tool_choice == {"type": "custom", "name": "not_declared"}
    # a namespaced tool chosen with its namespace is converted ...
    req = responses_request(tool_choice={"type": "custom", "name": "write_note", "namespace": "fs"})
    run_req(req, {"names": ["*"]})
    assert req.tool_choice == {"type": "function", "name": "write_note", "namespace": "fs"}
    # ... and with another namespace it is not
    req = responses_request(tool_choice={"type": "custom", "name": "write_note", "namespace": "other"})
    run_req(req, {"names": ["*"]})
    assert req.tool_choice["type"] == "custom"


def test_bare_name_shared_by_a_top_level_and_a_namespaced_tool_is_ambiguous():
    config = {"names": ["*"]}
    tools = [custom_tool("note"), ToolDef(kind="namespace", name="b", tools=[custom_tool("note")])]
    c = run_req(responses_request(tools=tools), config)
    resp = response_with(fcall('{"input":"hi"}', "note"), fcall('{"input":"yo"}', "note", "c2", "b"))
    run_response(select(chains(config), "response", MODEL), resp, c)
    assert resp.output[0].tool_type == "function"  # the seed: ambiguous, not the top-level tool
    assert resp.output[1].tool_type == "custom" and resp.output[1].namespace == "b"


def test_stream_calls_without_call_id_are_matched_by_their_rank_among_calls():
    """Stream indices count every node; output positions differ (here the text comes last in the
    authoritative output). Looking a call up by its output position used to hand the second call
    the first call's restored node."""
    first = wire_arguments("*** Begin Patch\n*** Add File: a\none\n*** End Patch")
    second = wire_arguments("*** Begin Patch\n*** Add File: b\ntwo\n*** End Patch")
    call_a = ToolCallNode(call_id="", name="apply_patch", arguments=first)
    call_b = ToolCallNode(call_id="", name="apply_patch", arguments=second)
    text = TextNode(role="assistant", content="Patching.")
    events = [
        ResponseStart(id="r1", model="up"),
        NodeStart(index=0, node=TextNode(role="assistant")),
        NodeDelta(index=0, kind=ev.TEXT, delta="Patching."),
        NodeDone(index=0, node=text),
        NodeStart(index=1, node=ToolCallNode(call_id="", name="apply_patch")),
        NodeDelta(index=1, kind=ev.ARGUMENTS, delta=first),
        NodeDone(index=1, node=call_a),
        NodeStart(index=2, node=ToolCallNode(call_id="", name="apply_patch")),
        NodeDelta(index=2, kind=ev.ARGUMENTS, delta=second),
        NodeDone(index=2, node=call_b),
        ResponseDone(output=[call_a, call_b, text], finish_reason="tool_calls"),
    ]
    final = run_stream(events)[-1]
    assert [n.arguments for n in final.output[:2]] == [
        "*** Begin Patch\n*** Add File: a\n+one\n*** End Patch\n",
        "*** Begin Patch\n*** Add File: b\n+two\n*** End Patch\n",
    ]
    assert all(n.tool_type == "custom" for n in final.output[:2]) and final.output[2] is text
