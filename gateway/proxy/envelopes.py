"""Per-API-key reasoning envelopes (``mz2.``): encrypted reasoning a client receives is wrapped
with the upstream it came from, so that switching providers mid-conversation never sends one
provider's ciphertext (an OpenAI ``encrypted_content``, an Anthropic thinking signature) to
another, which would reject the request.

- Wrap (response side, before any response rule sees the value): every string ``encrypted`` of a
  reasoning node becomes ``mz2.`` + unpadded base64url(JSON ``{"v": 2, "provider_type",
  "model", "item_id", "payload"}``). Streams: encrypted fragments are buffered and the complete
  value is wrapped once, emitted as one delta right before the node completes.
- Unwrap (request side, per attempt, before the request rules): an enveloped reasoning node is
  replayed with its original payload (and item id, when the node lost it) only when the envelope's
  provider type and model equal this attempt's upstream; otherwise the node is dropped. Raw,
  unwrapped values pass unchanged (a client that had envelopes off, or another gateway's value).

``provider_type`` is the channel's protocol and ``model`` the routed upstream model name (before
request rules), the same on both sides of a round trip. Wrapping is a rule the attempt puts first
in the response chain (``rule()``), so the whole and streaming paths need nothing of their own and
the capture's executed chain shows it.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.urp import ReasoningNode, Request, Response
from gateway.urp import events as ev
from gateway.urp.events import Event, NodeDelta, NodeDone, NodeStart, ResponseDone

from .chain import CompiledRule, TransformContext

PREFIX = "mz2."
TYPE_ID = "reasoning_envelope"


@dataclass(slots=True, frozen=True)
class Envelope:
    provider_type: str
    model: str
    item_id: str | None
    payload: str


def wrap(payload: str, provider_type: str, model: str, item_id: str | None) -> str:
    if payload.startswith(PREFIX):
        return payload  # never double-wrap
    data = orjson.dumps(
        {"v": 2, "provider_type": provider_type, "model": model, "item_id": item_id, "payload": payload}
    )
    return PREFIX + base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unwrap(value: Any) -> Envelope | None:
    """The envelope in ``value``, or None when it is not a well-formed ``mz2.`` envelope."""
    if not isinstance(value, str) or not value.startswith(PREFIX):
        return None
    body = value[len(PREFIX) :]
    try:
        data = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(data, dict) or data.get("v") != 2 or not isinstance(data.get("payload"), str):
        return None
    item_id = data.get("item_id")
    return Envelope(
        str(data.get("provider_type")),
        str(data.get("model")),
        item_id if isinstance(item_id, str) else None,
        data["payload"],
    )


def unwrap_request(req: Request, provider_type: str, model: str) -> None:
    """Replay this upstream's own payloads; drop reasoning carrying another upstream's."""
    kept = []
    for node in req.input:
        if (
            isinstance(node, ReasoningNode)
            and isinstance(node.encrypted, str)
            and node.encrypted.startswith(PREFIX)
        ):
            env = unwrap(node.encrypted)
            if env is None or env.provider_type != provider_type or env.model != model:
                continue
            node.encrypted = env.payload
            if node.id is None and env.item_id:
                node.id = env.item_id
        kept.append(node)
    req.input = kept


class EnvelopeWrap:
    """The wrapping side as a response rule (satisfies ``chain.RuleTransform``)."""

    type_id = TYPE_ID

    def __init__(self, provider_type: str, model: str) -> None:
        self.provider_type = provider_type
        self.model = model

    def _wrap_node(self, node: Any, fragments: list[str] | None = None) -> str | None:
        """Wrap ``node.encrypted`` in place; the wrapped value, or None when there is none."""
        if not isinstance(node, ReasoningNode):
            return None
        value = node.encrypted
        if value is None and fragments:
            value = "".join(fragments)
        if not isinstance(value, str) or not value:
            return None
        node.encrypted = wrap(value, self.provider_type, self.model, node.id)
        return node.encrypted

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        return None

    def wrap_stream_encoder(self, encoder: Any, ctx: TransformContext) -> Any:
        return encoder  # wraps values, never the bytes on the wire

    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        for node in resp.output:
            self._wrap_node(node)

    def needs_whole_response(self, ctx: TransformContext) -> bool:
        return False

    def new_stream_state(self, ctx: TransformContext) -> dict[int, list[str]]:
        return {}

    def apply_event(self, event: Event, state: dict[int, list[str]], ctx: TransformContext) -> list[Event]:
        if isinstance(event, NodeDelta) and event.kind == ev.REASONING_ENCRYPTED:
            state.setdefault(event.index, []).append(event.delta)
            return []  # buffered: a client never sees raw fragments
        if isinstance(event, NodeStart) and isinstance(event.node, ReasoningNode):
            event.node.encrypted = None
        elif isinstance(event, NodeDone):
            wrapped = self._wrap_node(event.node, state.pop(event.index, None))
            if wrapped is not None:
                return [NodeDelta(index=event.index, kind=ev.REASONING_ENCRYPTED, delta=wrapped), event]
        elif isinstance(event, ResponseDone):
            for node in event.output:
                self._wrap_node(node)
        return [event]


def rule(provider_type: str, model: str) -> CompiledRule:
    """The wrapping rule an attempt runs first in its response chain."""
    return CompiledRule(
        rule_id=None,
        scope="api_key",
        phase="response",
        models=None,
        transform=EnvelopeWrap(provider_type, model),
    )
