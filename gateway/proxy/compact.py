"""``POST /v1/responses/compact`` (reference protocols.md §6.1): OpenAI's native conversation
compaction, passed through to Responses upstreams only, non-stream only.

Codex calls it to shrink a long conversation; the answer (a ``response.compaction`` object with
an opaque compaction item) is meaningful only to the Responses API that made it, so other
upstream protocols are skipped, and a model served by none of them gets a clear 400.
"""

from __future__ import annotations

from typing import Any

import orjson

from .errors import ClientError, to_client_error
from .exchange import JSON_CT, Exchange
from .forward import Planner, Upstream, forward, logical_model_for, openai_headers, parse_body, upstream_url
from .snapshot import ChannelSnap, KeySnap, Snapshot

COMPACT_PATH = "/v1/responses/compact"


def _plan(body: dict[str, Any]) -> Planner:
    def plan(channel: ChannelSnap, upstream_model: str, logical: str) -> Upstream | None:
        if channel.protocol != "responses":
            return None

        def translate(answer: dict[str, Any]) -> dict[str, Any]:
            return {**answer, "model": logical} if "model" in answer else answer

        return Upstream(
            url=upstream_url(channel, COMPACT_PATH),
            body={**body, "model": upstream_model},
            headers=openai_headers(channel),
            translate=translate,
        )

    return plan


async def serve_compact(
    runtime: Any, ex: Exchange, snapshot: Snapshot, key: KeySnap, raw_body: bytes
) -> None:
    """Answer one compaction request; every failure is an OpenAI (Responses) error."""
    try:
        body = parse_body(raw_body)
        if body.get("stream"):
            raise ClientError(400, "invalid_request", "/v1/responses/compact does not stream", param="stream")
        logical = logical_model_for(key, body["model"], snapshot)
        answer = await forward(
            runtime,
            ex,
            snapshot,
            logical,
            _plan(body),
            unsupported=lambda: ClientError(
                400,
                "compaction_not_supported",
                f"model {logical!r} has no Responses upstream; /v1/responses/compact is served by Responses "
                "upstreams only",
                param="model",
            ),
        )
        await ex.send_bytes(200, orjson.dumps(answer), JSON_CT)
    except Exception as exc:
        if not ex.headers_sent:
            await ex.send_error(to_client_error(exc))
