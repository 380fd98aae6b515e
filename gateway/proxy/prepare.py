"""Per-attempt clean-up of a decoded request before it is encoded for one upstream protocol.

The proxy runs ``prepare_before_chains`` on each attempt's own copy before the request chains and
``prepare_after_chains`` after them (reference §1 steps 5b, 5c, 5f). Encoders can then stay simple: they only skip what their
protocol cannot express. Everything here works in place on the copy and allocates little.

``remove_orphan_tool_exchanges`` lives with the typed representation
(``gateway.urp.conversation``) so a transform (the orphaned-tool-call one) can reuse it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gateway.errors import ProtocolError
from gateway.urp import (
    INTERNAL_PREFIX,
    EnvelopeExtraNode,
    Node,
    ProviderItemNode,
    Request,
    ToolDef,
    ToolResultNode,
)
from gateway.urp.conversation import remove_orphan_tool_exchanges

# Top-level passthrough keys each upstream protocol accepts by default (reference §2.7, XF6a).
# Chat ``models`` and Messages ``fallbacks`` are deliberately absent.
DEFAULT_EXTRA_WHITELIST: dict[str, frozenset[str]] = {
    "chat_completion": frozenset(
        {
            "audio",
            "frequency_penalty",
            "function_call",
            "functions",
            "logit_bias",
            "logprobs",
            "top_logprobs",
            "max_completion_tokens",
            "max_tokens",
            "metadata",
            "moderation",
            "n",
            "presence_penalty",
            "prompt_cache_options",
            "safety_identifier",
            "seed",
            "service_tier",
            "stop",
            "stream_options",
            "store",
            "web_search_options",
            "parallel_tool_calls",
            "debug",
            "image_config",
            "modalities",
            "cache_control",
            "top_k",
            "top_a",
            "min_p",
            "repetition_penalty",
            "prediction",
            "prompt_cache_key",
            "prompt_cache_retention",
            "route",
            "structured_outputs",
            "verbosity",
            "provider",
            "plugins",
            "session_id",
            "stop_server_tools_when",
            "trace",
            "thinking",
            "include_reasoning",
            "user_id",
        }
    ),
    "responses": frozenset(
        {
            "background",
            "context_management",
            "conversation",
            "include",
            "instructions",
            "metadata",
            "max_tool_calls",
            "moderation",
            "parallel_tool_calls",
            "previous_response_id",
            "prompt",
            "prompt_cache_key",
            "prompt_cache_options",
            "prompt_cache_retention",
            "safety_identifier",
            "service_tier",
            "store",
            "stream_options",
            "text",
            "top_logprobs",
            "truncation",
        }
    ),
    "messages": frozenset(
        {
            "cache_control",
            "container",
            "max_tokens",
            "metadata",
            "output_config",
            "service_tier",
            "stop_sequences",
            "top_k",
            "inference_geo",
            "context_management",
            "mcp_servers",
        }
    ),
    "gemini": frozenset({"generationConfig", "safetySettings", "cachedContent", "labels"}),
    "openai_image": frozenset(
        {
            "n",
            "size",
            "quality",
            "background",
            "output_format",
            "output_compression",
            "moderation",
            "style",
            "response_format",
            "user",
            "input_fidelity",
            "partial_images",
        }
    ),
}

RESPONSES_STATE_KEYS = ("store", "conversation", "previous_response_id")
RULE_ADDED_TOOL = (
    "_gw_rule_added"  # ToolDef.extra marker: a native tool a transform added for its origin_protocol
)


def _internal_only(extra: dict[str, Any]) -> dict[str, Any]:
    if not extra:
        return extra
    return {k: v for k, v in extra.items() if k.startswith(INTERNAL_PREFIX)}


def is_stateful_responses(req: Request, upstream_protocol: str, source_protocol: str) -> bool:
    """A same-Responses request continuing server-side state: its tool history lives upstream."""
    return upstream_protocol == source_protocol == "responses" and bool(
        req.extra.get("previous_response_id") or req.extra.get("conversation")
    )


# -- nodes --------------------------------------------------------------------------------


def _filter_nodes(nodes: list[Node], upstream_protocol: str, strip: bool) -> list[Node]:
    """Drop other protocols' provider items (also inside tool results); when ``strip``, keep only
    internal keys in node extras and drop envelope control nodes. One pass over a long history:
    no call for an empty ``extra`` (nearly every node), a tool result's content list rebuilt only
    when it holds an item to drop."""
    out: list[Node] = []
    append = out.append
    for node in nodes:
        if isinstance(node, ProviderItemNode):
            if node.origin_protocol != upstream_protocol:
                continue
        elif isinstance(node, ToolResultNode):
            content = node.content
            for c in content:
                if isinstance(c, ProviderItemNode) and c.origin_protocol != upstream_protocol:
                    node.content = content = [
                        k
                        for k in content
                        if not (isinstance(k, ProviderItemNode) and k.origin_protocol != upstream_protocol)
                    ]
                    break
            if strip:
                for c in content:
                    if c.extra:
                        c.extra = _internal_only(c.extra)
        elif strip and isinstance(node, EnvelopeExtraNode):
            continue
        if strip and node.extra:
            node.extra = _internal_only(node.extra)
        append(node)
    return out


# -- tools --------------------------------------------------------------------------------


def _tool_passes(tool: ToolDef, upstream_protocol: str, same_family: bool) -> bool:
    """Reference §2.4 / T1g: functions always; custom to Chat and Responses; namespaces and
    native tools only where they came from."""
    if tool.kind == "function":
        return True
    if tool.kind == "custom":
        return upstream_protocol in ("chat_completion", "responses")
    if tool.kind == "namespace":
        return same_family and upstream_protocol == "responses"
    # A native tool a rule added on purpose (image_enable_openai_generation_tool) names its
    # protocol and goes there whatever the client spoke.
    return (same_family or bool(tool.extra.get(RULE_ADDED_TOOL))) and tool.origin_protocol in (
        None,
        upstream_protocol,
    )


def refuse_unconverted_custom_tools(tools: list[ToolDef], upstream_protocol: str) -> None:
    """Custom (free-form input) tools exist only in Chat and Responses. Dropping them silently
    for another upstream leaves a model that cannot call a tool the client relies on, so the
    request is refused (400) and the message names the rule that converts them. Runs after the
    request chains: when ``field_custom_tools_to_function`` applies, no custom tool is left."""
    if upstream_protocol in ("chat_completion", "responses"):
        return
    names = [t.name or "?" for t in tools if t.kind == "custom"]
    if names:
        raise ProtocolError(
            f"custom tools ({', '.join(sorted(names)[:5])}) cannot be sent to a {upstream_protocol} upstream, "
            "which has no custom tools; add the transform field_custom_tools_to_function to this model's "
            "provider or API key to convert them to function tools",
            param="tools",
        )


def _names(tools: Iterable[ToolDef]) -> tuple[set[str], set[str], set[str]]:
    """(function/custom names incl. namespace members, native kinds, mcp server labels)."""
    names: set[str] = set()
    kinds: set[str] = set()
    labels: set[str] = set()
    for t in tools:
        if t.kind in ("function", "custom") and t.name:
            names.add(t.name)
        elif t.kind == "namespace":
            if t.name:
                names.add(t.name)
            for member in t.tools or ():
                if member.name:
                    names.add(member.name)
        else:
            kinds.add(t.kind)
            label = t.extra.get("server_label")
            if isinstance(label, str):
                labels.add(label)
    return names, kinds, labels


def _selector_ok(sel: Any, names: set[str], kinds: set[str], labels: set[str]) -> bool:
    """Whether a tool-choice selector still refers to an available tool. A selector whose type,
    name or label is not a string (the client sent an object there) refers to nothing."""
    if not isinstance(sel, dict):
        return True
    stype = sel.get("type")
    if not isinstance(stype, str):
        return False
    if stype in ("function", "custom"):
        inner = sel.get(stype)
        name = inner.get("name") if isinstance(inner, dict) else sel.get("name")
        return isinstance(name, str) and name in names
    if stype == "mcp":
        label = sel.get("server_label")
        return isinstance(label, str) and label in labels
    if stype in ("auto", "none", "required", "any", "tool"):
        name = sel.get("name")
        return stype != "tool" or (isinstance(name, str) and name in names)
    return stype in kinds


def _filter_tool_choice(choice: Any, names: set[str], kinds: set[str], labels: set[str]) -> Any:
    """The tool choice with references to unavailable tools removed; None when nothing is left."""
    if not isinstance(choice, dict):
        return choice
    if choice.get("type") == "allowed_tools":
        nested = isinstance(choice.get("allowed_tools"), dict)
        body = choice["allowed_tools"] if nested else choice
        tools = body.get("tools")
        if not isinstance(tools, list):
            return choice
        kept = [t for t in tools if _selector_ok(t, names, kinds, labels)]
        if not kept:
            return None
        if len(kept) == len(tools):
            return choice
        if nested:
            return {**choice, "allowed_tools": {**body, "tools": kept}}
        return {**choice, "tools": kept}
    return choice if _selector_ok(choice, names, kinds, labels) else None


def filter_tools(req: Request, upstream_protocol: str, same_family: bool) -> None:
    if req.tools is None:
        return
    refuse_unconverted_custom_tools(req.tools, upstream_protocol)
    kept = [t for t in req.tools if _tool_passes(t, upstream_protocol, same_family)]
    if len(kept) == len(req.tools):
        return
    if not kept:
        req.tools = None
        req.tool_choice = None
        return
    req.tools = kept
    if req.tool_choice is not None:
        req.tool_choice = _filter_tool_choice(req.tool_choice, *_names(kept))


def _strip_tool_extras(tools: list[ToolDef]) -> None:
    for t in tools:
        if t.kind in ("function", "custom"):
            t.extra = _internal_only(t.extra)
            t.inner_extra = _internal_only(t.inner_extra)
        if t.tools:
            _strip_tool_extras(t.tools)


# -- entry point --------------------------------------------------------------------------


def filter_extra(req: Request, upstream_protocol: str, extra_whitelist: list[str] | None) -> None:
    """Top-level passthrough whitelist: built-in list for the protocol plus the provider's own
    names; ``["*"]`` disables filtering; ``_gw_`` keys always survive."""
    if not req.extra:
        return
    if extra_whitelist and "*" in extra_whitelist:
        return
    allowed = DEFAULT_EXTRA_WHITELIST.get(upstream_protocol, frozenset())
    if extra_whitelist:
        allowed = allowed | frozenset(extra_whitelist)
    if all(k in allowed or k.startswith(INTERNAL_PREFIX) for k in req.extra):
        return
    req.extra = {k: v for k, v in req.extra.items() if k in allowed or k.startswith(INTERNAL_PREFIX)}


def prepare_before_chains(
    req: Request,
    *,
    upstream_protocol: str,
    source_protocol: str,
    strip_nested: bool,
    extra_whitelist: list[str] | None,
) -> None:
    """The clean-up of what the client sent, before the request chains run (steps 1, 2, 4, 5
    of ``prepare_for_upstream``). Filtering the client's top-level fields here, not after the
    chains, means a raw field an operator's rule sets reaches the upstream even
    when it is not on the built-in whitelist."""
    same_family = upstream_protocol == source_protocol and upstream_protocol != "gemini"
    strip = strip_nested and not same_family
    req.input = _filter_nodes(req.input, upstream_protocol, strip)
    if strip and req.tools:
        _strip_tool_extras(req.tools)
    filter_extra(req, upstream_protocol, extra_whitelist)
    if not same_family and any(k in req.extra for k in RESPONSES_STATE_KEYS):
        for key in RESPONSES_STATE_KEYS:
            req.extra.pop(key, None)


def prepare_after_chains(req: Request, *, upstream_protocol: str, source_protocol: str) -> None:
    """Tool filtering and orphan removal, after the request chains (steps 3 and 6): a rule such
    that turns custom tools into functions must see the custom and namespaced tools before the
    upstream family's filter would drop them."""
    same_family = upstream_protocol == source_protocol and upstream_protocol != "gemini"
    filter_tools(req, upstream_protocol, same_family)
    if not is_stateful_responses(req, upstream_protocol, source_protocol):
        req.input = remove_orphan_tool_exchanges(req.input)


def prepare_for_upstream(
    req: Request,
    *,
    upstream_protocol: str,
    source_protocol: str,
    strip_nested: bool,
    extra_whitelist: list[str] | None,
) -> None:
    """Make ``req`` (this attempt's own copy) fit for ``upstream_protocol``, in place, when no
    chain runs in between (the proxy calls the two halves around the request chains).

    1. Drop provider items of other protocols (reference XTRA-9).
    2. Cross-family with ``strip_nested``: node, tool-result content and tool descriptor extras
       keep only internal keys; envelope control nodes go (XTRA-5). Stripping tool descriptor
       extras goes a little further than the reference: another family's tool fields
       (``cache_control``, ``defer_loading``) only make strict upstreams reject the request.
    3. Tool filtering (§2.4), dropping a tool_choice that names a filtered tool, both when none
       remain.
    4. Top-level ``extra`` whitelist (§2.7).
    5. Cross-family: remove Responses-only state (``store``, ``conversation``,
       ``previous_response_id``).
    6. Remove orphan tool calls/results unless this is a stateful same-Responses request.
    """
    prepare_before_chains(
        req,
        upstream_protocol=upstream_protocol,
        source_protocol=source_protocol,
        strip_nested=strip_nested,
        extra_whitelist=extra_whitelist,
    )
    prepare_after_chains(req, upstream_protocol=upstream_protocol, source_protocol=source_protocol)
