"""``POST /v1/embeddings`` (reference protocols.md §6.1): OpenAI-shaped embeddings for any
upstream protocol.

Chat Completions, Responses and Messages channels get the client body at their base URL's
``/v1/embeddings`` with only ``model`` rewritten (OpenAI-compatible servers answer there; the
reference forwards to every provider type the same way). Gemini channels get the request
translated to ``:embedContent`` (one input) or ``:batchEmbedContents`` (an array), and the
answer translated back: ``data[i].embedding`` as floats or, when the client asked for
``encoding_format: "base64"`` (the ``openai`` SDK's default), little-endian float32 in base64.
Gemini reports no token counts for embeddings; ``usage`` is then an estimate (characters / 4)
and the answer says so in ``x-gateway-token-count: estimated``.
"""

from __future__ import annotations

import base64
import math
import sys
from array import array
from typing import Any
from urllib.parse import quote

import orjson

from .errors import ClientError, to_client_error
from .exchange import JSON_CT, Exchange
from .forward import Planner, Upstream, forward, logical_model_for, openai_headers, parse_body, upstream_url
from .snapshot import ChannelSnap, KeySnap, Snapshot

EMBEDDINGS_PATH = "/v1/embeddings"
_GEMINI_FIELDS = {"task_type": "taskType", "title": "title"}


def _inputs(body: dict[str, Any]) -> list[str]:
    value = body.get("input")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    raise ClientError(
        400, "invalid_request", "input must be a string or a non-empty array of strings", param="input"
    )


def _float_list(values: Any) -> list[float]:
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        raise ValueError("embedding values are not a list of numbers")
    return [float(v) for v in values]


def _encode(values: list[float], encoding: str | None) -> Any:
    if encoding == "base64":
        packed = array("f", values)
        if packed.itemsize != 4:  # pragma: no cover - every platform CPython runs on
            raise ValueError("float32 unavailable")
        if sys.byteorder != "little":  # pragma: no cover
            packed.byteswap()
        return base64.b64encode(packed.tobytes()).decode("ascii")
    return values


def _openai_plan(body: dict[str, Any]) -> Planner:
    def plan(channel: ChannelSnap, upstream_model: str, logical: str) -> Upstream | None:
        def translate(answer: dict[str, Any]) -> dict[str, Any]:
            if not isinstance(answer.get("data"), list):
                raise ValueError("no data list")
            return {**answer, "model": logical}

        return Upstream(
            url=upstream_url(channel, EMBEDDINGS_PATH),
            body={**body, "model": upstream_model},
            headers=openai_headers(channel),
            translate=translate,
        )

    return plan


def _gemini_plan(body: dict[str, Any], inputs: list[str], estimated: list[bool]) -> Planner:
    encoding = body.get("encoding_format")
    dims = body.get("dimensions")

    def plan(channel: ChannelSnap, upstream_model: str, logical: str) -> Upstream | None:
        name = upstream_model[7:] if upstream_model.startswith("models/") else upstream_model
        options: dict[str, Any] = {}
        if isinstance(dims, int) and not isinstance(dims, bool) and dims > 0:
            options["outputDimensionality"] = dims
        for ours, theirs in _GEMINI_FIELDS.items():
            if isinstance(body.get(ours), str):
                options[theirs] = body[ours]
        requests = [
            {"model": f"models/{name}", "content": {"parts": [{"text": text}]}, **options} for text in inputs
        ]
        batch = isinstance(body.get("input"), list)
        path = f"/v1beta/models/{quote(name, safe='')}:{'batchEmbedContents' if batch else 'embedContent'}"
        wire = {"requests": requests} if batch else requests[0]

        def translate(answer: dict[str, Any]) -> dict[str, Any]:
            vectors = answer["embeddings"] if batch else [answer["embedding"]]
            if not isinstance(vectors, list) or len(vectors) != len(inputs):
                raise ValueError("embedding count differs from the input count")
            data = [
                {"object": "embedding", "index": i, "embedding": _encode(_float_list(v["values"]), encoding)}
                for i, v in enumerate(vectors)
            ]
            estimated[0] = True
            tokens = sum(math.ceil(len(text) / 4) for text in inputs)
            return {
                "object": "list",
                "data": data,
                "model": logical,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }

        headers = {"content-type": "application/json", "accept": "application/json"}
        for hname, value in channel.extra_headers:
            headers[hname.lower()] = value
        headers["x-goog-api-key"] = channel.api_key
        return Upstream(url=upstream_url(channel, path), body=wire, headers=headers, translate=translate)

    return plan


async def serve_embeddings(
    runtime: Any, ex: Exchange, snapshot: Snapshot, key: KeySnap, raw_body: bytes
) -> None:
    """Answer one embeddings request in the OpenAI shape; every failure is an OpenAI error."""
    try:
        body = parse_body(raw_body)
        inputs = _inputs(body)
        if body.get("encoding_format") not in (None, "float", "base64"):
            raise ClientError(
                400, "invalid_request", "encoding_format must be 'float' or 'base64'", param="encoding_format"
            )
        logical = logical_model_for(key, body["model"], snapshot)
        estimated = [False]
        openai_plan = _openai_plan(body)
        gemini_plan = _gemini_plan(body, inputs, estimated)

        def plan(channel: ChannelSnap, upstream_model: str, logical_model: str) -> Upstream | None:
            chosen = gemini_plan if channel.protocol == "gemini" else openai_plan
            return chosen(channel, upstream_model, logical_model)

        answer = await forward(
            runtime,
            ex,
            snapshot,
            logical,
            plan,
            unsupported=lambda: ClientError(400, "invalid_request", "no embeddings upstream"),
        )
        extra = ((b"x-gateway-token-count", b"estimated"),) if estimated[0] else ()
        await ex.send_bytes(200, orjson.dumps(answer), JSON_CT, extra_headers=extra)
    except Exception as exc:
        if not ex.headers_sent:
            await ex.send_error(to_client_error(exc))
