"""The Images API endpoints: ``POST /v1/images/generations`` (JSON) and ``POST /v1/images/edits``
(multipart: ``image`` / ``image[]`` files, optional ``mask``), as the official ``openai`` SDK's
``images.generate`` and ``images.edit`` send them.

Each call becomes ``n`` URP requests (one image each, run concurrently): a user text node with
the prompt, user image nodes for the uploaded images, and the mask as an image node with the
mask id (``gateway.images.sites.MASK_NODE_ID``). They go through the same routing, retries,
failover and rule chains as the generation endpoints (model from the body, key redirects and
allow-lists), so any upstream can serve them: an ``openai_image`` channel, a Responses upstream
with ``image_enable_openai_generation_tool``, or a chat model whose Markdown image links
``image_markdown_to_output`` turns into images. The answer is OpenAI's ``ImagesResponse``:
``data[]`` with ``b64_json`` (or ``url`` when the upstream gave a URL, e.g. because the client
asked ``response_format: url``; ``image_resolve_urls`` in the response phase turns such URLs into
``b64_json``), ``revised_prompt`` when known, and summed ``usage`` when the upstream reported it.
Errors use OpenAI's error shape. Streaming image generation is refused with a clear 400.

Multipart parsing and base64 work run on the image pool, not the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.errors import ClientError
from gateway.images import multipart, pool
from gateway.images.sites import MASK_NODE_ID
from gateway.protocols.openai_image import IMAGE_OPTIONS
from gateway.urp import ImageNode, MediaSource, Request, Response, TextNode

from .attempt import Attempt
from .call import Call, Runtime
from .chain import run_response_async
from .errors import to_client_error
from .exchange import Exchange
from .failover import route
from .recorder import NULL_RECORDER
from .routing import model_allowed, resolve_logical_model
from .snapshot import KeySnap, Snapshot
from .whole import fetch_whole

GENERATIONS_PATH = "/v1/images/generations"
EDITS_PATH = "/v1/images/edits"
IMAGES_PATHS = (GENERATIONS_PATH, EDITS_PATH)
MAX_N = 10
MAX_IMAGES = 16
MAX_IMAGE_BYTES = 50 * 1024 * 1024  # per uploaded file, OpenAI's gpt-image limit
# Passed to the upstream as request extras (the openai_image codec whitelists them again).
OPTION_FIELDS = (
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
)
_SNIFF = {b"\x89PNG": "image/png", b"\xff\xd8\xff": "image/jpeg", b"RIFF": "image/webp", b"GIF8": "image/gif"}


@dataclass(slots=True)
class ImagesJob:
    model: str
    prompt: str
    n: int
    images: list[tuple[str, str]] = field(default_factory=list)  # (media type, base64)
    mask: tuple[str, str] | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def request(self) -> Request:
        nodes: list[Any] = [TextNode(role="user", content=self.prompt)]
        nodes += [
            ImageNode(role="user", source=MediaSource(kind="base64", media_type=mt, data=data))
            for mt, data in self.images
        ]
        if self.mask is not None:
            nodes.append(
                ImageNode(
                    role="user",
                    id=MASK_NODE_ID,
                    source=MediaSource(kind="base64", media_type=self.mask[0], data=self.mask[1]),
                )
            )
        # Typed image options (an internal marker, so they survive cross-protocol clean-up): the
        # openai_image codec sends them, image_enable_openai_generation_tool projects them into the
        # Responses image tool.
        return Request(model=self.model, input=nodes, stream=False, extra={IMAGE_OPTIONS: dict(self.options)})

    def summary(self) -> dict[str, Any]:
        """What captures record as the client request: image bytes as placeholders (the capture
        bounds cut large strings too, but a placeholder says what it was)."""
        out: dict[str, Any] = {"model": self.model, "prompt": self.prompt, "n": self.n, **self.options}
        if self.images:
            out["image"] = [{"media_type": mt, "base64_chars": len(d)} for mt, d in self.images]
        if self.mask is not None:
            out["mask"] = {"media_type": self.mask[0], "base64_chars": len(self.mask[1])}
        return out


def _bad(message: str, param: str | None = None) -> ClientError:
    return ClientError(400, "invalid_request", message, param=param)


def _common(fields: dict[str, Any]) -> ImagesJob:
    model = fields.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model is required", "model")
    prompt = fields.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise _bad("prompt is required and must be a non-empty string", "prompt")
    n = fields.get("n", 1)
    if isinstance(n, str) and n.strip().isdigit():
        n = int(n)
    if n is None:
        n = 1
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_N:
        raise _bad(f"n must be an integer between 1 and {MAX_N}", "n")
    stream = fields.get("stream")
    if stream is True or (isinstance(stream, str) and stream.lower() == "true"):
        raise _bad("streaming image generation is not supported by this gateway", "stream")
    options = {k: fields[k] for k in OPTION_FIELDS if fields.get(k) is not None}
    if (
        "output_compression" in options
        and isinstance(options["output_compression"], str)
        and options["output_compression"].isdigit()
    ):
        options["output_compression"] = int(options["output_compression"])
    return ImagesJob(model=model, prompt=prompt, n=n, options=options)


def parse_generations(raw: bytes) -> ImagesJob:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise _bad("request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise _bad("request body must be a JSON object")
    return _common(body)


def _media_type(part: multipart.Part) -> str:
    declared = (part.content_type or "").lower()
    if declared.startswith("image/"):
        return declared
    for magic, mt in _SNIFF.items():
        if part.data.startswith(magic):
            return mt
    return "image/png"


def parse_edits_in_pool(raw: bytes, content_type: str) -> ImagesJob | tuple[int, str, str, str | None]:
    """``parse_edits`` for the image pool (possibly another process): a client error comes back
    as a plain tuple, since ClientError does not survive pickling."""
    try:
        return parse_edits(raw, content_type)
    except ClientError as err:
        return (err.status, err.code, err.message, err.param)


def parse_edits(raw: bytes, content_type: str) -> ImagesJob:
    """MIME parsing and base64 of large files: run it on the image pool."""
    try:
        parts = multipart.parse(raw, content_type)
    except multipart.MultipartError as exc:
        raise _bad(f"images/edits needs multipart/form-data: {exc}") from None
    fields: dict[str, Any] = {}
    files: list[multipart.Part] = []
    mask: multipart.Part | None = None
    for part in parts:
        if part.name in ("image", "image[]") and part.filename is not None:
            files.append(part)
        elif part.name == "mask" and part.filename is not None:
            mask = part
        elif part.filename is None:
            fields[part.name] = part.text
    job = _common(fields)
    if not files:
        raise _bad("at least one image file is required", "image")
    if len(files) > MAX_IMAGES:
        raise _bad(f"at most {MAX_IMAGES} images", "image")
    for part in [*files, *([mask] if mask else [])]:
        if not part.data:
            raise _bad(f"the {part.name} file is empty", part.name.rstrip("[]"))
        if len(part.data) > MAX_IMAGE_BYTES:
            raise ClientError(413, "request_too_large", f"each image must be at most {MAX_IMAGE_BYTES} bytes")
    job.images = [(_media_type(p), base64.b64encode(p.data).decode("ascii")) for p in files]
    if mask is not None:
        job.mask = (_media_type(mask), base64.b64encode(mask.data).decode("ascii"))
    return job


@dataclass(slots=True)
class ImagesCall(Call):
    """A ``Call`` whose attempts rebuild their request from the parsed job (not from JSON bytes)."""

    job: ImagesJob | None = None
    result: Response | None = None

    def fresh_request(self) -> Request:
        assert self.job is not None
        return self.job.request()


async def _run_one(call: Call, att: Attempt) -> None:
    resp = await fetch_whole(call, att)
    executed = await run_response_async(att.response_rules, resp, att.tctx)
    call.rec.on_response(resp, executed)
    call.result = resp  # type: ignore[attr-defined]


def images_body(responses: list[Response]) -> dict[str, Any]:
    data: list[dict[str, Any]] = []
    for resp in responses:
        for node in resp.output:
            if type(node) is not ImageNode or node.role != "assistant":
                continue
            src = node.source
            item: dict[str, Any]
            if src.kind == "base64" and src.data:
                item = {"b64_json": src.data}
            elif src.kind == "url" and isinstance(src.url, str) and src.url.startswith("data:"):
                item = {"b64_json": src.url.partition(",")[2]}
            elif src.kind == "url" and src.url:
                item = {"url": src.url}
            else:
                continue
            if isinstance(node.extra.get("revised_prompt"), str):
                item["revised_prompt"] = node.extra["revised_prompt"]
            data.append(item)
    if not data:
        raise ClientError(
            502, "upstream_no_image", "the upstream answered without an image", error_type="upstream_error"
        )
    body: dict[str, Any] = {"created": int(time.time()), "data": data}
    usages = [r.usage for r in responses if r.usage is not None]
    if usages:
        inp = sum(u.input_tokens for u in usages)
        out = sum(u.output_tokens for u in usages)
        body["usage"] = {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}
    return body


async def _parse_job(raw_body: bytes, content_type: str, path: str) -> ImagesJob:
    """The request's job: an edit's multipart body is parsed in the image pool, a generation's
    JSON here; a client error raises ``ClientError``."""
    if path == EDITS_PATH:
        parsed = await pool.run(parse_edits_in_pool, raw_body, content_type)
        if isinstance(parsed, tuple):
            status, code, message, param = parsed
            raise ClientError(status, code, message, param=param)
        job = parsed
    else:
        job = parse_generations(raw_body)
    return job


async def _run_calls(calls: list[ImagesCall], *, concurrently: bool) -> None:
    """Run the ``n`` sub-requests, all at once or (for a recorded request) one after the other;
    the first failure is raised."""
    if concurrently:
        results = await asyncio.gather(*(route(c, _run_one) for c in calls), return_exceptions=True)
        for res in results:
            if isinstance(res, BaseException):
                raise res
    else:
        for c in calls:
            await route(c, _run_one)


async def serve_images(
    rt: Runtime, ex: Exchange, snapshot: Snapshot, key: KeySnap, raw_body: bytes, content_type: str, path: str
) -> None:
    """Answer one Images API request; every failure in OpenAI's error shape.

    The ``n`` sub-requests run concurrently, except when the request is recorded: recorders see
    attempts one after the other (``Recorder`` contract), so recorded requests run them in turn."""
    # Recorders get a JSON stand-in for a multipart body, then the parsed job's summary.
    head = (
        raw_body
        if path == GENERATIONS_PATH
        else orjson.dumps({"multipart": True, "content_type": content_type[:200], "bytes": len(raw_body)})
    )
    rec = rt.recorders.start(ex, snapshot, key, head)
    ex.recorder = rec
    error_text = None
    try:
        job = await _parse_job(raw_body, content_type, path)
        rec.on_request_body(orjson.dumps(job.summary()))
        logical = resolve_logical_model(key, job.model)
        if not model_allowed(key, logical):
            raise ClientError(
                403,
                "model_not_allowed",
                f"model {logical!r} is not allowed for this API key",
                error_type="permission_error",
            )
        calls = [
            ImagesCall(
                rt=rt,
                ex=ex,
                snapshot=snapshot,
                key=key,
                req=None,
                logical_model=logical,
                client_stream=False,
                include_usage=True,
                rec=rec,
                job=job,
            )
            for _ in range(job.n)
        ]
        rec.on_request_decoded(calls[0])
        await _run_calls(calls, concurrently=rec is NULL_RECORDER)
        body = images_body([c.result for c in calls if c.result is not None])
        await ex.send_bytes(200, orjson.dumps(body))
    except Exception as exc:
        err = to_client_error(exc)
        error_text = f"{err.code}: {err.message}"
        if not ex.headers_sent:
            await ex.send_error(err)
    finally:
        rec.on_finish(ex, error_text)
