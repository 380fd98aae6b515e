"""Shared pieces of the Chat Completions codec: internal marker names, usage and finish-reason
mapping, data-URL helpers. Kept apart so the request, response and stream halves agree."""

from __future__ import annotations

from typing import Any

from gateway.urp import Usage

from ..base import new_id, put_extra, token_count

PROTOCOL = "chat_completion"

# Internal markers (never emitted, never accepted from the wire). They carry what a same-Chat
# hop needs to be lossless.
MSG_SHAPE = "_gw_chat_msg"  # on a message's first node: its content shape (string|array|null|absent)
RESULT_SHAPE = "_gw_chat_content"  # on a tool result: its content shape (string|array)
INNER_EXTRA = "_gw_chat_inner"  # unknown keys of a part's inner object (image_url, file, function...)
REASONING_DETAIL = "_gw_chat_reasoning_detail"  # the raw reasoning_details[] entry (or entries, a list)
REASONING_SURFACE = "_gw_chat_reasoning_surface"  # "reasoning" | "reasoning_content" scalar origin
REASONING_EFFORT_RAW = "_gw_chat_reasoning_effort"  # the client's exact reasoning_effort string
REASONING_CONFIG = "_gw_chat_reasoning_config"  # OpenRouter-style `reasoning` object
THINKING_CONFIG = "_gw_chat_thinking_config"  # DeepSeek-style `thinking` object
MAX_TOKENS_FIELD = "_gw_chat_max_tokens_field"  # which max-tokens key the client used
LEGACY_FUNCTION = "_gw_chat_legacy_function"  # deprecated function_call / role:function
MESSAGE_AUDIO = "message_audio"  # ProviderItemNode.item_type for a message-level `audio`
FILE_ID_ORIGIN = "_gw_file_id_origin"  # "openai" for file ids decoded here
NATIVE_FINISH = "_gw_chat_native_finish_reason"
CHOICE_EXTRA = "_gw_chat_choice_extra"  # unknown keys of choices[0]
LEGACY_PREFIX = "legacy_function:"

_FINISH_IN = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


def finish_from_wire(reason: Any) -> str | None:
    """Chat finish_reason -> URP finish reason (unknown values become ``other``)."""
    if reason is None:
        return None
    return _FINISH_IN.get(reason, "other") if isinstance(reason, str) else "other"


def finish_to_wire(reason: str | None, native: Any, *, has_tool_calls: bool, legacy: bool) -> str:
    """URP finish reason -> Chat finish_reason.

    Any emitted tool call forces ``tool_calls`` (``function_call`` for legacy calls), because
    SDK tool loops key on it. ``other`` re-emits the native Chat reason when we have one; else
    ``stop`` (the reference emits ``error``, which official SDK enums do not know and which
    would read as a failure for benign reasons such as Anthropic's ``pause_turn``)."""
    if has_tool_calls:
        return "function_call" if legacy else "tool_calls"
    if (
        isinstance(native, str)
        and native
        and native != "function_call"
        and finish_from_wire(native) == reason
    ):
        return native  # the exact upstream Chat reason (also unknown vendor values)
    if reason in ("stop", "length", "content_filter"):
        return reason
    return "stop"  # tool_calls with every call dropped on the way, other, or unknown


# -- usage ---------------------------------------------------------------------------------

_IN_DETAILS = ("prompt_tokens_details", "input_tokens_details")
_OUT_DETAILS = ("completion_tokens_details", "output_tokens_details")


def decode_usage(raw: Any) -> Usage | None:
    """Chat usage (also Responses-style names) -> Usage. Unknown members stay under their
    details key in ``extra`` so a same-Chat hop re-emits them."""
    if not isinstance(raw, dict):
        return None
    inp = token_count(raw.get("prompt_tokens"))
    if inp is None:
        inp = token_count(raw.get("input_tokens")) or 0
    out = token_count(raw.get("completion_tokens"))
    if out is None:
        out = token_count(raw.get("output_tokens")) or 0
    usage = Usage(input_tokens=inp, output_tokens=out)
    extra: dict[str, Any] = {}
    for key, value in raw.items():
        if key in ("prompt_tokens", "completion_tokens", "total_tokens", "input_tokens", "output_tokens"):
            continue
        if key.startswith("_gw_"):
            continue
        if key in _IN_DETAILS and isinstance(value, dict):
            usage.cache_read_tokens = token_count(value.get("cached_tokens"))
            cw = token_count(value.get("cache_write_tokens"))
            if cw is None:
                cw = token_count(value.get("cache_creation_tokens"))
            usage.cache_creation_tokens = cw
            extra[key] = {k: v for k, v in value.items() if k != "cached_tokens"}
        elif key in _OUT_DETAILS and isinstance(value, dict):
            usage.reasoning_tokens = token_count(value.get("reasoning_tokens"))
            extra[key] = {k: v for k, v in value.items() if k != "reasoning_tokens"}
        else:
            extra[key] = value
    usage.extra = extra
    return usage


def _first_in(keys: tuple[str, ...], extra: dict[str, Any], default: str) -> str:
    """The first of ``keys`` present in ``extra`` (a loop: ``next`` over a generator made and
    closed a generator for every response)."""
    for key in keys:
        if key in extra:
            return key
    return default


def encode_usage(usage: Usage, *, same_protocol: bool) -> dict[str, Any]:
    """Usage -> Chat usage object; typed counters win over preserved members, which are only
    replayed on a same-Chat hop."""
    body: dict[str, Any] = {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
    extra = usage.extra if same_protocol else {}
    in_key = _first_in(_IN_DETAILS, extra, "prompt_tokens_details")
    out_key = _first_in(_OUT_DETAILS, extra, "completion_tokens_details")
    in_details = dict(extra[in_key]) if isinstance(extra.get(in_key), dict) else None
    if usage.cache_read_tokens is not None or usage.cache_creation_tokens is not None:
        in_details = in_details or {}
        if usage.cache_read_tokens is not None:
            in_details["cached_tokens"] = usage.cache_read_tokens
        if usage.cache_creation_tokens is not None:
            cw_key = (
                "cache_creation_tokens" if "cache_creation_tokens" in in_details else "cache_write_tokens"
            )
            in_details[cw_key] = usage.cache_creation_tokens
    out_details = dict(extra[out_key]) if isinstance(extra.get(out_key), dict) else None
    if usage.reasoning_tokens is not None:
        out_details = out_details or {}
        out_details["reasoning_tokens"] = usage.reasoning_tokens
    if in_details is not None:
        body[in_key] = in_details
    if out_details is not None:
        body[out_key] = out_details
    return put_extra(body, extra)


# -- data URLs ----------------------------------------------------------------------------


def data_url(media_type: str | None, data: str) -> str:
    return f"data:{media_type or 'application/octet-stream'};base64,{data}"


def raw_details(raw: Any) -> list[dict[str, Any]]:
    """A node's raw ``reasoning_details`` entries: one dict, or a list when a text entry and the
    encrypted entry after it were folded into one node (see ``folds_into``)."""
    if isinstance(raw, dict):
        return [raw]
    if isinstance(raw, list):
        return [r for r in raw if isinstance(r, dict)]
    return []


def folds_into(prev_entry: Any, prev_node: Any, entry: dict[str, Any]) -> bool:
    """Whether an encrypted ``reasoning_details`` entry belongs to the text entry just before it.

    OpenRouter sends a model's reasoning as a ``reasoning.text`` entry and its opaque payload as
    a separate ``reasoning.encrypted`` entry. As two nodes they reach an Anthropic client as two
    thinking blocks (text with an empty signature, then an empty one with the signature); one
    node gives one block with both. Only a text entry without a payload of its own, with a
    compatible id, takes the encrypted entry."""
    if entry.get("type") != "reasoning.encrypted" or not isinstance(entry.get("data"), str):
        return False
    if not isinstance(prev_entry, dict) or prev_entry.get("type") != "reasoning.text":
        return False
    if getattr(prev_node, "encrypted", None) not in (None, "") or getattr(prev_node, "summary", None):
        return False
    ids = (prev_entry.get("id"), entry.get("id"))
    return ids[0] is None or ids[1] is None or ids[0] == ids[1]


def default_error_type(status: int) -> str:
    """OpenAI-style error ``type`` for an HTTP status."""
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 404:
        return "not_found_error"
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "api_error"
    return "invalid_request_error"


def chat_id(resp_id: str | None) -> str:
    if resp_id and resp_id.startswith("chatcmpl"):
        return resp_id
    return new_id("chatcmpl-", 16)
