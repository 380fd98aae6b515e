"""The side-by-side cases: the gateway against the upstream itself and the peers (LiteLLM, Portkey),
non-stream at 1 and N connections, streams, capture off vs on, and the soak's request mix.

Each peer gets the same request shape where it has the feature; where it has not, the case either
leaves it out with a note (the five-rule chain: no peer has those transforms) or sends it anyway
and lets the check request (``Bench.check``) record why it cannot serve it (Portkey's ``/v1/messages``
only passes through to an Anthropic upstream: a Messages client cannot reach a Chat upstream).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import payloads, servers, wrk
from .cases import Case, StreamCase

if TYPE_CHECKING:  # pragma: no cover
    from run import Bench

ANTHROPIC = {"anthropic-version": "2023-06-01"}
CHAT, MSGS, RSP = "/v1/chat/completions", "/v1/messages", "/v1/responses"


def _requests(b: Bench) -> dict[str, wrk.WrkRequest]:
    """Every non-stream request shape, by ``<system>-<shape>``."""
    gw = {"authorization": f"Bearer {servers.PLAIN_KEY}"}
    ll = {"authorization": f"Bearer {servers.LITELLM_KEY}"}
    up = {"authorization": f"Bearer {servers.UPSTREAM_KEY}"}
    pk = servers.portkey_headers(b.ports["nginx"])
    pk_anthropic = servers.portkey_headers(b.ports["nginx"], "anthropic")
    body = b.body
    r = {
        "direct-chat": wrk.WrkRequest(CHAT, body("direct-chat", payloads.chat_body("bench-model")), up),
        "gateway-chat": wrk.WrkRequest(CHAT, body("gw-chat", payloads.chat_body("bench-chat")), gw),
        "litellm-chat": wrk.WrkRequest(CHAT, body("ll-chat", payloads.chat_body("bench-chat")), ll),
        "portkey-chat": wrk.WrkRequest(CHAT, body("pk-chat", payloads.chat_body("bench-model")), pk),
        "direct-chain": wrk.WrkRequest(CHAT, body("direct-chain", payloads.chain_body("bench-model")), up),
        "gateway-chain": wrk.WrkRequest(CHAT, body("gw-chain", payloads.chain_body("bench-chain")), gw),
        "gateway-msgs": wrk.WrkRequest(
            MSGS,
            body("gw-msgs", payloads.messages_body("bench-chat")),
            {"x-api-key": servers.PLAIN_KEY, **ANTHROPIC},
        ),
        "litellm-msgs": wrk.WrkRequest(
            MSGS,
            body("ll-msgs", payloads.messages_body("bench-chat")),
            {"x-api-key": servers.LITELLM_KEY, **ANTHROPIC},
        ),
        "portkey-msgs": wrk.WrkRequest(
            MSGS, body("pk-msgs", payloads.messages_body("bench-model")), {**pk, **ANTHROPIC}
        ),
        "direct-large": wrk.WrkRequest(CHAT, body("direct-large", payloads.large_body("bench-model")), up),
        "gateway-large": wrk.WrkRequest(CHAT, body("gw-large", payloads.large_body("bench-chat")), gw),
        "litellm-large": wrk.WrkRequest(CHAT, body("ll-large", payloads.large_body("bench-chat")), ll),
        "portkey-large": wrk.WrkRequest(CHAT, body("pk-large", payloads.large_body("bench-model")), pk),
        "direct-rsp": wrk.WrkRequest(
            RSP, body("direct-rsp", {"model": "bench-model", "input": "hello benchmark"}), up
        ),
        "gateway-to-rsp": wrk.WrkRequest(CHAT, body("gw-to-rsp", payloads.chat_body("bench-responses")), gw),
        "direct-msgs": wrk.WrkRequest(
            MSGS,
            body("direct-msgs", payloads.messages_body("bench-model")),
            {"x-api-key": servers.UPSTREAM_KEY, **ANTHROPIC},
        ),
        "gateway-to-msgs": wrk.WrkRequest(CHAT, body("gw-to-msgs", payloads.chat_body("bench-messages")), gw),
        "gateway-msgs-pass": wrk.WrkRequest(
            MSGS,
            body("gw-msgs-pass", payloads.messages_body("bench-messages")),
            {"x-api-key": servers.PLAIN_KEY, **ANTHROPIC},
        ),
        "portkey-msgs-pass": wrk.WrkRequest(
            MSGS, body("pk-msgs-pass", payloads.messages_body("bench-model")), {**pk_anthropic, **ANTHROPIC}
        ),
        # Portkey's anthropic provider translates a Chat request to /v1/messages (Chat -> Messages upstream)
        "portkey-to-msgs": wrk.WrkRequest(
            CHAT, body("pk-to-msgs", payloads.chat_body("bench-model")), pk_anthropic
        ),
        "gateway-chat-cap": wrk.WrkRequest(
            CHAT,
            body("gw-chat-cap", payloads.chat_body("bench-chat")),
            {"authorization": f"Bearer {servers.CAPTURE_KEY}"},
        ),
        "gateway-stream": wrk.WrkRequest(
            CHAT, body("gw-stream", payloads.chat_body("bench-stream", stream=True)), gw
        ),
    }
    return r


def _pick(
    b: Bench, r: dict[str, wrk.WrkRequest], shape: str, systems: tuple[str, ...], direct: str | None = None
) -> dict[str, wrk.WrkRequest]:
    """The targets of a case: direct's request (its own shape unless ``direct`` names another),
    then each system of ``systems`` that runs in this bench."""
    out = {"direct": r[f"direct-{direct or shape}"]}
    for system in systems:
        if system == "gateway" or b.has(system):
            out[system] = r[f"{system}-{shape}"]
    return out


def define(b: Bench) -> None:
    r = _requests(b)
    peers = ("gateway", "litellm", "portkey")
    b.soak_mix = [
        r["gateway-chat"],
        r["gateway-chain"],
        r["gateway-msgs"],
        r["gateway-large"],
        r["gateway-stream"],
    ]
    for conns in (1, b.args.connections):
        tag = f"{conns} conn"
        b.cases += [
            Case(f"chat-{conns}", f"Chat → Chat, empty chain, {tag}", conns, _pick(b, r, "chat", peers)),
            Case(
                f"chain-{conns}",
                f"Chat → Chat, five-rule chain, {tag}",
                conns,
                _pick(b, r, "chain", ("gateway",)),
                note="no peer has an equivalent of these transforms",
            ),
            Case(
                f"cross-{conns}",
                f"Messages client → Chat upstream, {tag}",
                conns,
                _pick(b, r, "msgs", peers, direct="chat"),
                note="direct = the Chat upstream the request is translated to",
            ),
            Case(
                f"large-{conns}",
                f"Chat → Chat, 50 messages + 10 tools, {tag}",
                conns,
                _pick(b, r, "large", peers),
            ),
        ]
    b.cases += [
        Case(
            "to-responses-1",
            "Chat client → Responses upstream, 1 conn",
            1,
            _pick(b, r, "to-rsp", ("gateway",), "rsp"),
            note="no peer translates a Chat request to a Responses upstream",
        ),
        Case(
            "to-messages-1",
            "Chat client → Messages upstream, 1 conn",
            1,
            _pick(b, r, "to-msgs", ("gateway", "portkey"), "msgs"),
            note="Portkey: provider anthropic with the custom host; LiteLLM not configured for it",
        ),
        Case(
            "msgs-pass-1",
            "Messages client → Messages upstream, 1 conn",
            1,
            _pick(b, r, "msgs-pass", ("gateway", "portkey"), "msgs"),
            note="the like-for-like Messages case for Portkey (its anthropic provider passes /v1/messages through); "
            "LiteLLM not configured for it",
        ),
    ]
    b.capture_cases += [
        Case(
            f"capture-{conns}",
            f"Chat → Chat, capture off vs on, {conns} conn",
            conns,
            {"gateway": r["gateway-chat"], "gateway+capture": r["gateway-chat-cap"]},
            settle=True,
            section="capture",
            base="gateway",
        )
        for conns in (1, b.args.connections)
    ]
    define_streams(b)


def define_streams(b: Bench) -> None:
    gw = {"authorization": f"Bearer {servers.PLAIN_KEY}"}
    ll = {"authorization": f"Bearer {servers.LITELLM_KEY}"}
    up = {"authorization": f"Bearer {servers.UPSTREAM_KEY}"}
    paced, a = b.ports["paced"], b.args
    stream_body = payloads.dumps(payloads.chat_body("bench-stream", stream=True))
    pk_stream_body = payloads.dumps(payloads.chat_body("bench-model", stream=True))
    msgs_stream = payloads.dumps(payloads.messages_body("bench-stream", stream=True))
    pk_msgs_stream = payloads.dumps(payloads.messages_body("bench-model", stream=True))
    direct = (paced, CHAT, stream_body, up)
    chat = {"direct": direct, "gateway": (b.ports["gateway"], CHAT, stream_body, gw)}
    cross = {
        "direct": direct,
        "gateway": (b.ports["gateway"], MSGS, msgs_stream, {"x-api-key": servers.PLAIN_KEY, **ANTHROPIC}),
    }
    if b.has("litellm"):
        chat["litellm"] = (b.ports["litellm"], CHAT, stream_body, ll)
        cross["litellm"] = (
            b.ports["litellm"],
            MSGS,
            msgs_stream,
            {"x-api-key": servers.LITELLM_KEY, **ANTHROPIC},
        )
    if b.has("portkey"):
        chat["portkey"] = (b.ports["portkey"], CHAT, pk_stream_body, servers.portkey_headers(paced))
        cross["portkey"] = (
            b.ports["portkey"],
            MSGS,
            pk_msgs_stream,
            {**servers.portkey_headers(paced), **ANTHROPIC},
        )
    pk_note = (
        "Portkey holds the first event of a stream for 25 ms before forwarding it (a fixed `setTimeout(25)` "
        "in its stream splitter for this provider), which its first-byte figure includes"
        if b.has("portkey")
        else ""
    )
    b.streams += [
        StreamCase(
            "stream-chat",
            f"Chat → Chat stream ({a.deltas} deltas, {a.interval_ms:g} ms apart)",
            chat,
            note=pk_note,
        ),
        StreamCase("stream-cross", "Messages client → Chat upstream stream", cross),
    ]
