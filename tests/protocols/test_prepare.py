"""prepare_for_upstream: provider items, nested stripping, tool filtering, extra whitelist,
Responses-only state, orphan tool exchanges."""

from __future__ import annotations

import pytest

from gateway.errors import ProtocolError
from gateway.proxy.prepare import prepare_for_upstream
from gateway.urp import (
    EnvelopeExtraNode,
    ProviderItemNode,
    ReasoningNode,
    Request,
    TextNode,
    ToolCallNode,
    ToolDef,
    ToolResultNode,
)
from gateway.urp.conversation import remove_orphan_tool_exchanges


def prep(req, upstream, source, *, strip=True, whitelist=None):
    prepare_for_upstream(
        req, upstream_protocol=upstream, source_protocol=source, strip_nested=strip, extra_whitelist=whitelist
    )
    return req


def nested_request() -> Request:
    return Request(
        model="m",
        input=[
            EnvelopeExtraNode(extra={"x_msg": 1}),
            TextNode(content="hi", extra={"cache_control": {"type": "ephemeral"}, "_gw_keep": 1}),
            ProviderItemNode(origin_protocol="messages", item_type="server_tool_use", body={"id": "s"}),
            ProviderItemNode(origin_protocol="responses", item_type="item_reference", body={"id": "i"}),
            ToolCallNode(call_id="c1", name="f", extra={"caller": "x"}),
            ToolResultNode(
                call_id="c1",
                content=[
                    TextNode(content="r", extra={"citations": []}),
                    ProviderItemNode(origin_protocol="messages", item_type="search_result", body={}),
                ],
            ),
        ],
    )


def test_cross_family_drops_other_provider_items_and_strips_nested():
    req = prep(nested_request(), "chat_completion", "messages")
    assert [type(n).__name__ for n in req.input] == ["TextNode", "ToolCallNode", "ToolResultNode"]
    assert req.input[0].extra == {"_gw_keep": 1}
    assert req.input[1].extra == {}
    assert len(req.input[2].content) == 1 and req.input[2].content[0].extra == {}


def test_same_family_keeps_nested_and_own_provider_items():
    req = prep(nested_request(), "messages", "messages")
    kinds = [type(n).__name__ for n in req.input]
    assert kinds == ["EnvelopeExtraNode", "TextNode", "ProviderItemNode", "ToolCallNode", "ToolResultNode"]
    assert req.input[1].extra["cache_control"] == {"type": "ephemeral"}
    assert len(req.input[4].content) == 2


def test_strip_disabled_keeps_nested_cross_family_but_still_drops_provider_items():
    req = prep(nested_request(), "responses", "messages", strip=False)
    kinds = [type(n).__name__ for n in req.input]
    assert kinds == ["EnvelopeExtraNode", "TextNode", "ProviderItemNode", "ToolCallNode", "ToolResultNode"]
    assert req.input[2].origin_protocol == "responses"
    assert req.input[1].extra["cache_control"] == {"type": "ephemeral"}


def tools_request() -> Request:
    return Request(
        model="m",
        input=[TextNode(content="x")],
        tools=[
            ToolDef(kind="function", name="f", extra={"cache_control": {"type": "ephemeral"}}),
            ToolDef(kind="custom", name="apply_patch"),
            ToolDef(kind="namespace", name="ns", tools=[ToolDef(kind="function", name="inner")]),
            ToolDef(kind="web_search", origin_protocol="responses", extra={"type": "web_search"}),
        ],
    )


def without_custom(req: Request) -> Request:
    req.tools = [t for t in req.tools if t.kind != "custom"]
    return req


def test_tool_filtering_per_upstream_family():
    assert [t.kind for t in prep(tools_request(), "chat_completion", "responses").tools] == [
        "function",
        "custom",
    ]
    assert [t.kind for t in prep(without_custom(tools_request()), "messages", "responses").tools] == [
        "function"
    ]
    assert [t.kind for t in prep(without_custom(tools_request()), "gemini", "responses").tools] == [
        "function"
    ]
    same = prep(tools_request(), "responses", "responses").tools
    assert [t.kind for t in same] == ["function", "custom", "namespace", "web_search"]
    assert same[0].extra == {"cache_control": {"type": "ephemeral"}}
    cross = prep(tools_request(), "chat_completion", "responses").tools
    assert cross[0].extra == {}


@pytest.mark.parametrize("upstream", ["messages", "gemini"])
def test_custom_tools_without_a_conversion_rule_are_refused_naming_the_transform(upstream):
    """Issue 19: custom tools used to vanish silently for upstreams without custom tools."""
    with pytest.raises(ProtocolError) as info:
        prep(tools_request(), upstream, "responses")
    assert "field_custom_tools_to_function" in info.value.message and "apply_patch" in info.value.message
    assert info.value.param == "tools"


def test_tool_choice_naming_a_filtered_tool_is_dropped():
    req = without_custom(tools_request())
    req.tool_choice = {"type": "namespace", "name": "ns"}
    assert prep(req, "messages", "responses").tool_choice is None
    req = without_custom(tools_request())
    req.tool_choice = {"type": "function", "function": {"name": "f"}}
    assert prep(req, "messages", "responses").tool_choice == {"type": "function", "function": {"name": "f"}}
    req = tools_request()
    req.tool_choice = {"type": "web_search"}
    assert prep(req, "chat_completion", "responses").tool_choice is None
    req = tools_request()
    req.tool_choice = {
        "type": "allowed_tools",
        "allowed_tools": {
            "mode": "auto",
            "tools": [{"type": "function", "function": {"name": "f"}}, {"type": "web_search"}],
        },
    }
    assert prep(req, "chat_completion", "responses").tool_choice == {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": "f"}}]},
    }


def test_no_tools_left_drops_tools_and_choice():
    req = Request(
        model="m",
        input=[TextNode(content="x")],
        tool_choice="required",
        tools=[ToolDef(kind="bash_20250124", origin_protocol="messages", extra={"name": "bash"})],
    )
    req = prep(req, "chat_completion", "messages")
    assert req.tools is None and req.tool_choice is None


def test_extra_whitelist():
    extra = {"seed": 1, "x_vendor": 2, "top_k": 3, "_gw_marker": 4, "models": ["a"]}
    req = prep(
        Request(model="m", input=[TextNode(content="x")], extra=dict(extra)), "chat_completion", "messages"
    )
    assert req.extra == {"seed": 1, "top_k": 3, "_gw_marker": 4}
    req = prep(Request(model="m", input=[TextNode(content="x")], extra=dict(extra)), "messages", "messages")
    assert req.extra == {"top_k": 3, "_gw_marker": 4}
    req = prep(
        Request(model="m", input=[TextNode(content="x")], extra=dict(extra)),
        "messages",
        "messages",
        whitelist=["x_vendor"],
    )
    assert req.extra == {"top_k": 3, "_gw_marker": 4, "x_vendor": 2}
    req = prep(
        Request(model="m", input=[TextNode(content="x")], extra=dict(extra)),
        "gemini",
        "chat_completion",
        whitelist=["*"],
    )
    assert req.extra == extra


def test_responses_state_removed_cross_family_only():
    state = {"store": False, "previous_response_id": "resp_1", "conversation": "c", "include": ["x"]}
    req = prep(Request(model="m", input=[TextNode(content="x")], extra=dict(state)), "responses", "responses")
    assert req.extra == state
    req = prep(
        Request(model="m", input=[TextNode(content="x")], extra=dict(state)),
        "chat_completion",
        "responses",
        whitelist=["*"],
    )
    assert req.extra == {"include": ["x"]}


CONVERSATION = [
    TextNode(content="q"),
    ToolCallNode(call_id="answered", name="f"),
    ToolCallNode(call_id="orphan", name="f"),
    ToolResultNode(call_id="answered", content=[TextNode(content="ok")]),
    ToolResultNode(call_id="stray", content=[TextNode(content="?")]),
    TextNode(content="next"),
    ReasoningNode(content="t"),
    ToolCallNode(call_id="pending", name="f"),
]


def test_orphans_removed_but_a_pending_tail_call_stays():
    out = remove_orphan_tool_exchanges(list(CONVERSATION))
    assert [getattr(n, "call_id", getattr(n, "content", None)) for n in out] == [
        "q",
        "answered",
        "answered",
        "next",
        "t",
        "pending",
    ]
    strict = remove_orphan_tool_exchanges(list(CONVERSATION), keep_pending_calls=False, results=False)
    assert [getattr(n, "call_id", None) for n in strict] == [
        None,
        "answered",
        "answered",
        "stray",
        None,
        None,
    ]


def test_orphans_kept_for_stateful_same_responses():
    req = Request(model="m", input=list(CONVERSATION), extra={"previous_response_id": "resp_1"})
    assert len(prep(req, "responses", "responses").input) == len(CONVERSATION)
    req = Request(model="m", input=list(CONVERSATION), extra={"previous_response_id": "resp_1"})
    assert len(prep(req, "chat_completion", "responses").input) == 6
    req = Request(model="m", input=list(CONVERSATION))
    assert len(prep(req, "responses", "responses").input) == 6


# -- fuzz regressions (tests/fuzz) ----------------------------------------------------------------


def test_tool_choice_selectors_with_non_string_type_or_name_are_dropped_not_crashed():
    """Selectors come from the client verbatim; an object where a string belongs names nothing."""
    for choice in (
        {"type": {"x": 1}},
        {"type": "function", "function": {"name": ["f"]}},
        {"type": "custom", "name": {"n": 1}},
        {"type": "tool", "name": [1]},
        {"type": "mcp", "server_label": {"a": 1}},
        {"type": "allowed_tools", "tools": [{"type": ["function"]}, {"type": "function", "name": "f"}]},
    ):
        req = Request(
            model="m",
            input=[TextNode(role="user", content="hi")],
            tools=[
                ToolDef(kind="function", name="f", parameters={}),
                ToolDef(kind="web_search", origin_protocol="responses"),
            ],  # dropped for Chat
            tool_choice=choice,
        )
        prep(req, "chat_completion", "responses")
        if choice.get("type") == "allowed_tools":
            assert req.tool_choice == {"type": "allowed_tools", "tools": [{"type": "function", "name": "f"}]}
        else:
            assert req.tool_choice is None
