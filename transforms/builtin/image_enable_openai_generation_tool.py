"""image_enable_openai_generation_tool: give a Responses request OpenAI's hosted
``image_generation`` tool, so a chat-style client (which has no way to ask for it) can get
images from a Responses upstream; optionally force the tool and streaming with partial images.
"""

from __future__ import annotations

from typing import Any

from gateway.proxy.prepare import RULE_ADDED_TOOL
from gateway.urp import Request, ToolDef
from transforms.base import Transform, TransformContext, TransformExample, TransformFailed

TOOL = "image_generation"
# Image-generation controls some clients put at the top level of the body (legacy shape).
LIFTED = (
    "size",
    "quality",
    "background",
    "output_format",
    "output_compression",
    "moderation",
    "partial_images",
    "input_fidelity",
)
OPTIONS = "_gw_image_generation"  # typed image options on Request.extra (internal marker, never on the wire)


def lift_legacy(req: Request) -> dict[str, Any]:
    """Remove the recognised controls from the request's top level (a boolean ``background`` is
    the Responses background-mode flag and stays) and return them."""
    lifted: dict[str, Any] = {}
    for key in LIFTED:
        if key in req.extra and not (key == "background" and isinstance(req.extra[key], bool)):
            lifted[key] = req.extra.pop(key)
    return lifted


def _tool_config(tool: ToolDef) -> dict[str, Any]:
    return tool.extra


class ImageEnableOpenaiGenerationTool(Transform):
    """Never touches ``input`` or responses. Typed image options (the lifted legacy controls, or
    ones already on the request) are projected into every image_generation tool, overriding the
    tool's own values, as the Responses encoder of the reference does."""

    type_id = "image_enable_openai_generation_tool"
    category = "image"
    name = {"en": "Image: enable OpenAI generation tool", "zh": "图像：启用 OpenAI 图像生成工具"}
    description = {
        "en": "Adds OpenAI's image_generation tool to requests (unless one is present), optionally forcing the tool "
        "choice and streaming with partial images; lifts legacy top-level image options into it.",
        "zh": "为请求添加 OpenAI 的 image_generation 工具（已存在时不重复添加），可选强制工具选择与流式（含部分图片）；"
        "并将旧式顶层图像参数移入工具。",
    }
    phases = ("request",)
    scopes = ("provider", "api_key")
    config_schema = {
        "type": "object",
        "properties": {
            "output_format": {"type": "string", "enum": ["png", "webp", "jpeg"], "default": "png"},
            "action": {
                "type": "string",
                "minLength": 1,
                "description": "Tool action, e.g. generate, edit, auto.",
            },
            "force_stream": {"type": "boolean", "default": False},
            "force_tool_choice": {"type": "boolean", "default": False},
            "extra": {
                "type": "object",
                "default": {},
                "description": "Copied into the added tool's configuration.",
            },
        },
    }
    examples = (
        TransformExample(
            title="The tool is added",
            phase="request",
            protocol="responses",
            config={"output_format": "png"},
            input={"model": "gpt-5", "input": "draw a cat", "tools": []},
            expected={"tools": [{"type": "image_generation", "output_format": "png"}]},
        ),
        TransformExample(
            title="An existing image tool is kept as it is",
            phase="request",
            protocol="responses",
            config={},
            input={
                "model": "gpt-5",
                "input": "draw a cat",
                "tools": [{"type": "image_generation", "output_format": "webp"}],
            },
            expected={"tools": [{"type": "image_generation", "output_format": "webp"}]},
        ),
        TransformExample(
            title="Extra settings go into the tool",
            phase="request",
            protocol="responses",
            config={
                "output_format": "png",
                "extra": {"quality": "high", "size": "1024x1024", "background": "transparent"},
            },
            input={"model": "gpt-5", "input": "draw a cat"},
            expected={
                "tools": [
                    {
                        "type": "image_generation",
                        "quality": "high",
                        "size": "1024x1024",
                        "background": "transparent",
                        "output_format": "png",
                    }
                ]
            },
        ),
        TransformExample(
            title="Forced streaming keeps an explicit partial_images of 0",
            phase="request",
            protocol="responses",
            config={"force_stream": True, "extra": {"partial_images": 0}},
            input={
                "model": "gpt-5",
                "input": "draw a cat",
                "stream": False,
                "tools": [{"type": "image_generation", "partial_images": 0}],
            },
            expected={"stream": True, "tools": [{"type": "image_generation", "partial_images": 0}]},
        ),
    )

    def setup(self) -> None:
        self.output_format = str(self.config.get("output_format") or "png")
        self.action = self.config.get("action") or None
        self.force_stream = bool(self.config.get("force_stream"))
        self.force_tool_choice = bool(self.config.get("force_tool_choice"))
        extra = self.config.get("extra")
        self.extra = dict(extra) if isinstance(extra, dict) else {}

    def apply_request(self, req: Request, ctx: TransformContext) -> None:
        lifted = lift_legacy(req)
        typed = req.extra.get(OPTIONS)
        if not isinstance(typed, dict):
            typed = lifted
            if typed:
                req.extra[OPTIONS] = typed
        if self.force_stream:
            req.stream = True
        if self.force_tool_choice:
            req.tool_choice = {"type": TOOL}
        if req.tools is None:
            req.tools = []
        wants_partials = self.force_stream and "partial_images" not in typed
        existing = [t for t in req.tools if t.kind == TOOL]
        if existing:
            for tool in existing:
                cfg = _tool_config(tool)
                if not isinstance(cfg, dict):
                    raise TransformFailed("image_generation tool config is not an object")
                if wants_partials and "partial_images" not in cfg:
                    cfg["partial_images"] = 3
        else:
            cfg = dict(self.extra)
            cfg["output_format"] = self.output_format
            if self.action:
                cfg["action"] = self.action
            if wants_partials and "partial_images" not in self.extra:
                cfg["partial_images"] = 3
            cfg[RULE_ADDED_TOOL] = True  # passes the cross-protocol tool filter to Responses upstreams
            req.tools.append(ToolDef(kind=TOOL, origin_protocol="responses", extra=cfg))
            existing = [req.tools[-1]]
        for tool in existing:  # typed options win over tool defaults (tool settings only: not n, user...)
            for key, value in typed.items():
                if key in LIFTED:
                    tool.extra[key] = value
