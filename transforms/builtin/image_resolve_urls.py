"""image_resolve_urls: download http(s) image URLs and inline them as base64, for upstreams that
cannot fetch URLs themselves (request phase) and for clients that want the bytes rather than a
short-lived upstream URL (response phase; this is how an Images API client gets ``b64_json``
from an upstream that answers with URLs).

All downloads go through the gateway's one outbound fetcher (``gateway.fetch``): concurrent per
call, per-fetch timeout, byte cap while streaming, redirects re-checked, and the SSRF guard
(private, loopback, link-local and metadata addresses refused unless the operator allows them).
A failed fetch leaves that URL as it was; the request never fails because of it.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import posixpath
from urllib.parse import urlsplit

from gateway.fetch import Fetched, Fetcher, fetcher
from gateway.urp import ImageNode, MediaSource, Node, Request, Response
from transforms.base import Transform, TransformContext, TransformExample

log = logging.getLogger("transforms.image_resolve_urls")

ALL_ROLES = ["system", "developer", "user", "assistant"]
_EXTENSIONS = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "svg": "image/svg+xml",
    "bmp": "image/bmp",
    "tif": "image/tiff",
    "tiff": "image/tiff",
}


def guess_media_type(url: str) -> str:
    """From the URL path's extension when the server sent no Content-Type."""
    ext = posixpath.splitext(urlsplit(url).path)[1].lower().lstrip(".")
    return _EXTENSIONS.get(ext, "application/octet-stream")


def _source(url: str, got: Fetched) -> MediaSource:
    return MediaSource(
        kind="base64",
        media_type=got.content_type or guess_media_type(url),
        data=base64.b64encode(got.body).decode("ascii"),
    )


class ImageResolveUrls(Transform):
    """Targets image nodes (not tool-result entries) whose role is in ``roles`` and whose source
    is a URL that is not a data URL: the request's input, the response's output. Successful
    downloads become base64 sources (media type from Content-Type without parameters, else from
    the URL's extension; id, role and extras kept; ``detail`` is lost, base64 has none).

    Streams: downloads cannot run between stream events without stalling the stream, so a
    streaming request with the response rule is served in whole-response mode. Within one
    attempt a URL is downloaded once (``ctx.shared``)."""

    type_id = "image_resolve_urls"
    category = "image"
    name = {"en": "Image: resolve URLs to base64", "zh": "图像：将 URL 解析为 base64"}
    description = {
        "en": "Downloads http(s) image URLs and inlines them as base64 (requests for upstreams that cannot fetch "
        "URLs, responses for clients that want the bytes, e.g. Images API b64_json). Failed downloads leave "
        "the URL; private addresses are refused unless allowed.",
        "zh": "下载 http(s) 图片 URL 并内联为 base64（请求阶段用于无法获取 URL 的上游，响应阶段用于需要图片字节的"
        "客户端，例如 Images API 的 b64_json）。下载失败时保留 URL；除非允许，否则拒绝私有地址。",
    }
    phases = ("request", "response")
    scopes = ("provider", "api_key")
    config_schema = {
        "type": "object",
        "properties": {
            "timeout_seconds": {
                "type": "integer",
                "minimum": 1,
                "default": 30,
                "description": "Per-download timeout (redirects included).",
            },
            "max_bytes": {
                "type": "integer",
                "minimum": 1,
                "default": 20971520,
                "description": "Largest image downloaded; larger ones keep their URL.",
            },
            "roles": {
                "type": "array",
                "items": {"type": "string"},
                "default": ALL_ROLES,
                "description": "Roles whose images are resolved (system, developer, user, assistant).",
            },
        },
    }
    examples = (
        TransformExample(
            title="Only the configured roles are resolved; data URLs are never fetched",
            phase="request",
            config={"roles": ["assistant"]},
            input={
                "model": "gpt-4o",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                            {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
                        ],
                    }
                ],
            },
            expected={
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                            {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
                        ],
                    }
                ]
            },
            note={
                "en": "With the default roles the first image would be downloaded and sent as "
                "data:image/png;base64,... (see the tests, which serve it locally).",
                "zh": "使用默认角色时，第一张图片会被下载并以 data:image/png;base64,... 发送（测试中由本地服务器提供）。",
            },
        ),
    )

    def setup(self) -> None:
        roles = self.config.get("roles")
        self.roles = frozenset(r for r in (roles if isinstance(roles, list) else ALL_ROLES) if r in ALL_ROLES)
        self.timeout = float(self.config.get("timeout_seconds") or 30)
        self.max_bytes = int(self.config.get("max_bytes") or 20971520)

    def _targets(self, nodes: list[Node]) -> list[ImageNode]:
        return [
            n
            for n in nodes
            if type(n) is ImageNode
            and n.role in self.roles
            and n.source.kind == "url"
            and isinstance(n.source.url, str)
            and not n.source.url.startswith("data:")
        ]

    async def _resolve(self, nodes: list[Node], ctx: TransformContext, using: Fetcher | None = None) -> None:
        targets = self._targets(nodes)
        if not targets:
            return
        cache: dict[str, MediaSource] = ctx.shared.setdefault(self.type_id, {})
        wanted = [n.source.url for n in targets if n.source.url is not None and n.source.url not in cache]
        if wanted:
            results = await (using or fetcher()).fetch_many(
                wanted, timeout=self.timeout, max_bytes=self.max_bytes
            )
            notes = ctx.shared.setdefault("notes", [])
            for url, got in results.items():
                if isinstance(got, Fetched):
                    cache[url] = _source(url, got)
                else:
                    notes.append(f"{self.type_id}: kept a URL ({got.reason}: {got.message})")
        for node in targets:
            src = cache.get(node.source.url or "")
            if src is not None:
                node.source = MediaSource(kind="base64", media_type=src.media_type, data=src.data)

    def _run_sync(self, nodes: list[Node], ctx: TransformContext) -> None:
        """The sync entry (worked examples, tests, count_tokens): downloads need an event loop;
        inside a running one (a sync caller on the loop) the URLs are left rather than blocking."""
        if not self._targets(nodes):
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self._resolve_once(nodes, ctx))
            return
        log.info("image_resolve_urls called synchronously on the event loop; URLs left as they are")

    async def _resolve_once(self, nodes: list[Node], ctx: TransformContext) -> None:
        own = Fetcher()  # a private session for this short-lived loop, closed with it
        try:
            await self._resolve(nodes, ctx, own)
        finally:
            await own.close()

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        self._run_sync(req.input, ctx)

    async def apply_request_async(self, req: Request, ctx: TransformContext) -> None:
        await self._resolve(req.input, ctx)

    def needs_whole_response(self, ctx: TransformContext) -> bool:
        return True

    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        self._run_sync(resp.output, ctx)

    async def apply_response_async(self, resp: Response, ctx: TransformContext) -> None:
        await self._resolve(resp.output, ctx)
