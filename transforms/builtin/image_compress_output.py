"""image_compress_output: shrink the images an upstream answers with (assistant images,
tool-result images, images inside function-call arguments) before the client downloads them.
Same pipeline as image_compress_input (``gateway.images.compress``), on the image thread pool."""

from __future__ import annotations

from gateway.images import sites as sites_mod
from gateway.images.compress import CONFIG_SCHEMA, CompressConfig, check_config
from gateway.images.samples import PNG_RGB_8
from gateway.urp import Response
from transforms.base import Transform, TransformContext, TransformExample


class ImageCompressOutput(Transform):
    """Non-stream: assistant image nodes, image entries of tool results (mask entries skipped) and
    function tool-call arguments in the output. Streams: re-encoding is CPU work that must not
    run on the event loop between events, so a streaming request with this rule is served in
    whole-response mode (the upstream is called without streaming and the client's stream is
    synthesised from the compressed response)."""

    type_id = "image_compress_output"
    category = "image"
    name = {"en": "Image: compress response images", "zh": "图像：压缩响应图片"}
    description = {
        "en": "Re-encodes and optionally downsizes base64 and data-URL images in responses (assistant images, "
        "tool results, function-call arguments); keeps the original when the result is not smaller.",
        "zh": "重新编码并可缩小响应中的 base64 与 data URL 图片（助手图片、工具结果、函数调用参数）；"
        "结果不更小时保留原图。",
    }
    phases = ("response",)
    scopes = ("provider", "api_key")
    config_schema = CONFIG_SCHEMA
    examples = (
        TransformExample(
            title="A data URL in function-call arguments: declared JPEG, really PNG",
            phase="response",
            config={"output_format": "png"},
            input={
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {
                                        "name": "show",
                                        "arguments": f'{{"image":"data:image/jpeg;base64,{PNG_RGB_8}"}}',
                                    },
                                }
                            ],
                        },
                    }
                ],
            },
            expected={
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {
                                        "name": "show",
                                        "arguments": f'{{"image":"data:image/png;base64,{PNG_RGB_8}"}}',
                                    },
                                }
                            ],
                        },
                    }
                ]
            },
            note={
                "en": "The re-encoded PNG is not smaller than this tiny image, so the bytes stay and only the "
                "declared type is corrected; other argument fields would be kept as they are.",
                "zh": "重新编码后的 PNG 并不比这张小图更小，因此保留原字节，只更正声明的类型；参数中的其他字段保持不变。",
            },
        ),
    )

    @classmethod
    def check(cls, config: dict) -> list[tuple[str, str]]:
        return check_config(config)

    def setup(self) -> None:
        self.cfg = CompressConfig.from_config(self.config)

    def needs_whole_response(self, ctx: TransformContext) -> bool:
        return True

    def apply_response(self, resp: Response, ctx: TransformContext) -> None:
        sites = sites_mod.collect(resp.output, "assistant", skip_masks=True)
        sites_mod.note(ctx, self.type_id, sites_mod.process_inline(sites, self.cfg))

    async def apply_response_async(self, resp: Response, ctx: TransformContext) -> None:
        sites = sites_mod.collect(resp.output, "assistant", skip_masks=True)
        sites_mod.note(ctx, self.type_id, await sites_mod.process_on_pool(sites, self.cfg))
