"""image_markdown_to_output: turn Markdown image links in assistant text (``![alt](url)``) into
real image outputs, for upstreams that can only answer in text (image models behind a chat
API often answer with a link) and clients that render image parts."""

from __future__ import annotations

from typing import Any

from gateway.images.sites import data_image
from gateway.urp import ImageNode, MediaSource, Node, Response, TextNode
from gateway.urp import events as ev
from transforms.base import Transform, TransformContext, TransformExample

_WS = frozenset(" \t\n\r\x0c")
STALE_EXTRAS = ("logprobs", "signature")


def parse(text: str) -> tuple[list[tuple[int, int]], list[MediaSource]]:
    """The Markdown image blocks of ``text``: their (start, end) spans and sources, in order.

    At each ``![`` the alt text runs to the first ``]``, which must be followed by ``(``; the URL
    runs to the next ``)``. An empty URL or ASCII whitespace in it makes the block plain text up
    to that character (titles are unsupported). A ``data:`` URL is an image only as
    ``data:image/<x>;base64,<non-empty>``; other URLs (relative ones too) become URL sources."""
    spans: list[tuple[int, int]] = []
    sources: list[MediaSource] = []
    n = len(text)
    i = 0
    while True:
        start = text.find("![", i)
        if start < 0:
            break
        close = text.find("]", start + 2)
        if close < 0:
            break
        if close + 1 >= n or text[close + 1] != "(":
            i = close + 1
            continue
        j = close + 2
        while j < n and text[j] != ")" and text[j] not in _WS:
            j += 1
        if j >= n:
            break
        url = text[close + 2 : j]
        if text[j] != ")" or not url:
            i = j
            continue
        if url.startswith("data:"):
            parsed = data_image(url)
            if parsed is None:
                i = j + 1
                continue
            sources.append(MediaSource(kind="base64", media_type=parsed[0], data=parsed[1]))
        else:
            sources.append(MediaSource(kind="url", url=url))
        spans.append((start, j + 1))
        i = j + 1
    return spans, sources


def _remove(text: str, spans: list[tuple[int, int]]) -> str:
    out, pos = [], 0
    for a, b in spans:
        out.append(text[pos:a])
        pos = b
    out.append(text[pos:])
    return "".join(out)


def _shift_annotations(extra: dict[str, Any], spans: list[tuple[int, int]]) -> None:
    """Annotations with answer ranges (``start_index``/``end_index``): dropped when they overlap
    removed Markdown, else shifted left by the characters removed before them."""
    annotations = extra.get("annotations")
    if not isinstance(annotations, list):
        return
    kept = []
    for ann in annotations:
        if not (
            isinstance(ann, dict)
            and isinstance(ann.get("start_index"), int)
            and isinstance(ann.get("end_index"), int)
        ):
            kept.append(ann)
            continue
        a, b = ann["start_index"], ann["end_index"]
        if any(a < e and s < b for s, e in spans):
            continue
        removed = sum(e - s for s, e in spans if e <= a)
        kept.append({**ann, "start_index": a - removed, "end_index": b - removed})
    extra["annotations"] = kept


def extract(output: list[Node]) -> None:
    """Non-stream: each assistant text node loses its image blocks, which follow it as assistant
    image nodes in source order; a text node left empty is removed; unchanged nodes keep every
    field."""
    result: list[Node] = []
    for node in output:
        if type(node) is not TextNode or node.role != "assistant" or "![" not in node.content:
            result.append(node)
            continue
        spans, sources = parse(node.content)
        if not spans:
            result.append(node)
            continue
        node.content = _remove(node.content, spans)
        for key in STALE_EXTRAS:
            node.extra.pop(key, None)
        _shift_annotations(node.extra, spans)
        if node.content:
            result.append(node)
        result.extend(ImageNode(role="assistant", source=src) for src in sources)
    output[:] = result


class ImageMarkdownToOutput(Transform):
    """Parsing is exact (no HTML, no reference-style images, no titles). A changed text node loses
    its signature and logprobs; annotation ranges are shifted or dropped with the removed text.

    Streams: a Markdown block can span any number of deltas, and the images must come out as
    their own nodes, so a streaming request with this rule is served in whole-response mode
    (upstream called without streaming, client stream synthesised from the rewritten response).
    The reference does that for Chat and Messages clients and streams Responses clients
    incrementally; here every client gets the buffered path (documented difference)."""

    type_id = "image_markdown_to_output"
    category = "image"
    name = {"en": "Image: Markdown to image nodes", "zh": "图像：Markdown 转为图片节点"}
    description = {
        "en": "Turns Markdown image links (![alt](url), data:image/... base64 included) in assistant text into "
        "image outputs placed right after the text.",
        "zh": "将助手文本中的 Markdown 图片链接（![alt](url)，包括 data:image/... base64）转换为紧随文本之后的图片输出。",
    }
    phases = ("response",)
    scopes = ("provider", "api_key")
    examples = (
        TransformExample(
            title="Links and data URLs become image outputs after the text",
            phase="response",
            input={
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {
                            "role": "assistant",
                            "content": "hello ![a](https://example.com/a.png) world ![b](data:image/png;base64,QUJD)",
                        },
                    }
                ],
            },
            expected={
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {
                            "role": "assistant",
                            "content": [
                                {"type": "text", "text": "hello  world "},
                                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
                            ],
                        },
                    }
                ]
            },
            note={
                "en": "The characters around each link stay exactly as they were (hence the double space).",
                "zh": "链接两侧的字符保持原样（因此出现两个空格）。",
            },
        ),
    )

    def needs_whole_response(self, ctx: TransformContext) -> bool:
        return True

    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        extract(resp.output)

    def apply_event(self, event: ev.Event, state: Any, ctx: TransformContext) -> list[ev.Event]:
        # Only reached if another path streams anyway: keep the terminal output consistent.
        if isinstance(event, ev.ResponseDone):
            extract(event.output)
        return [event]
