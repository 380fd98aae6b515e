"""image_compress_input: shrink the images a client sends (user images, tool-result images,
images inside function-call arguments) before they reach the upstream, to save upload size and
vision tokens. The pipeline is shared with image_compress_output (``gateway.images.compress``);
in the proxy the work runs on the image thread pool, never on the event loop."""

from __future__ import annotations

from gateway.images import sites as sites_mod
from gateway.images.compress import CONFIG_SCHEMA, CompressConfig, check_config
from gateway.images.samples import PNG_RGB_8, PNG_RGBA_1
from gateway.urp import ImageNode, Request, ToolResultNode
from transforms.base import Transform, TransformContext, TransformExample

SCOPES = ("provider", "api_key")


def _has_mask(req: Request) -> bool:
    for node in req.input:
        if type(node) is ImageNode and node.role == "user" and sites_mod.is_mask(node):
            return True
        if type(node) is ToolResultNode and any(
            type(e) is ImageNode and sites_mod.is_mask(e) for e in node.content
        ):
            return True
    return False


class ImageCompressInput(Transform):
    """Processes user image nodes, image entries of every tool result, and data-URL/base64 images
    inside function tool-call arguments. A request holding an image mask (an Images API edit) is
    left entirely unchanged: resizing the image and not the mask would break the edit."""

    type_id = "image_compress_input"
    category = "image"
    name = {"en": "Image: compress request images", "zh": "图像：压缩请求图片"}
    description = {
        "en": "Re-encodes and optionally downsizes base64 and data-URL images in requests (user images, "
        "tool results, function-call arguments); keeps the original when the result is not smaller.",
        "zh": "重新编码并可缩小请求中的 base64 与 data URL 图片（用户图片、工具结果、函数调用参数）；"
        "结果不更小时保留原图。",
    }
    phases = ("request",)
    scopes = SCOPES
    config_schema = CONFIG_SCHEMA
    examples = (
        TransformExample(
            title="Bytes are PNG but declared JPEG: kept, media type corrected",
            phase="request",
            config={"output_format": "jpg"},
            input={
                "model": "gpt-4o",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image_url",
                                "image_url": {"url": f"data:image/jpeg;base64,{PNG_RGB_8}", "detail": "high"},
                            }
                        ],
                    }
                ],
            },
            expected={
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image_url",
                                "image_url": {"url": f"data:image/png;base64,{PNG_RGB_8}", "detail": "high"},
                            }
                        ],
                    }
                ]
            },
            note={
                "en": "The JPEG re-encode of this tiny image is larger, so the bytes stay; the declared type "
                "is corrected to what the bytes are.",
                "zh": "该小图重新编码为 JPEG 后更大，因此保留原字节，只把声明的类型改为实际类型。",
            },
        ),
        TransformExample(
            title="An image with alpha is never turned into JPEG",
            phase="request",
            config={"output_format": "jpg", "max_edge_px": 1, "skip_if_smaller": False},
            input={
                "model": "gpt-4o",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_RGBA_1}"}}
                        ],
                    }
                ],
            },
            expected={
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_RGBA_1}"}}
                        ],
                    }
                ]
            },
        ),
    )

    @classmethod
    def check(cls, config: dict) -> list[tuple[str, str]]:
        return check_config(config)

    def setup(self) -> None:
        self.cfg = CompressConfig.from_config(self.config)

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        if _has_mask(req):
            return
        sites = sites_mod.collect(req.input, "user", skip_masks=False)
        sites_mod.note(ctx, self.type_id, sites_mod.process_inline(sites, self.cfg))

    async def apply_request_async(self, req: Request, ctx: TransformContext) -> None:
        if _has_mask(req):
            return
        sites = sites_mod.collect(req.input, "user", skip_masks=False)
        sites_mod.note(ctx, self.type_id, await sites_mod.process_on_pool(sites, self.cfg))
