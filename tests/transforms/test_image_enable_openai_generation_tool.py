"""image_enable_openai_generation_tool: the reference's examples on the Responses wire, legacy
lifting, forcing, and that other protocols never see the tool."""

from __future__ import annotations

from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from transforms.base import TransformContext
from transforms.registry import registry

TYPE_ID = "image_enable_openai_generation_tool"


def run(config, body, client="responses", upstream="responses"):
    req = codec(client).decode_request(body)
    registry()[TYPE_ID](config).apply_request(
        req, TransformContext(logical_model="m", client_protocol=client, upstream_protocol=upstream)
    )
    return codec(upstream).encode_request(req, EncodeContext(model="m", source_protocol=client))


def test_examples_1_to_4():
    assert run({"output_format": "png"}, {"model": "m", "input": "x", "tools": []})["tools"] == [
        {"type": "image_generation", "output_format": "png"}
    ]
    assert run(
        {}, {"model": "m", "input": "x", "tools": [{"type": "image_generation", "output_format": "webp"}]}
    )["tools"] == [{"type": "image_generation", "output_format": "webp"}]
    tool = run(
        {
            "output_format": "png",
            "extra": {"quality": "high", "size": "1024x1024", "background": "transparent"},
        },
        {"model": "m", "input": "x"},
    )["tools"]
    assert tool == [
        {
            "type": "image_generation",
            "quality": "high",
            "size": "1024x1024",
            "background": "transparent",
            "output_format": "png",
        }
    ]
    body = run(
        {"force_stream": True, "extra": {"partial_images": 0}},
        {
            "model": "m",
            "input": "x",
            "stream": False,
            "tools": [{"type": "image_generation", "partial_images": 0}],
        },
    )
    assert body["stream"] is True and body["tools"] == [{"type": "image_generation", "partial_images": 0}]


def test_force_stream_default_partials_action_and_tool_choice():
    body = run(
        {"force_stream": True, "force_tool_choice": True, "action": "edit"}, {"model": "m", "input": "x"}
    )
    assert body["stream"] is True and body["tool_choice"] == {"type": "image_generation"}
    assert body["tools"] == [
        {"type": "image_generation", "output_format": "png", "action": "edit", "partial_images": 3}
    ]
    existing = run(
        {"force_stream": True}, {"model": "m", "input": "x", "tools": [{"type": "image_generation"}]}
    )
    assert existing["tools"] == [{"type": "image_generation", "partial_images": 3}]


def test_legacy_top_level_controls_lifted_into_the_tool_boolean_background_stays():
    body = run({}, {"model": "m", "input": "x", "size": "512x512", "quality": "low", "background": False})
    assert "size" not in body and "quality" not in body and body["background"] is False
    assert body["tools"] == [
        {"type": "image_generation", "output_format": "png", "size": "512x512", "quality": "low"}
    ]
    body = run(
        {},
        {
            "model": "m",
            "input": "x",
            "background": "transparent",
            "output_format": "webp",
            "tools": [{"type": "image_generation", "output_format": "png"}],
        },
    )
    assert "background" not in body
    assert body["tools"] == [
        {"type": "image_generation", "output_format": "webp", "background": "transparent"}
    ]


def test_a_chat_client_gets_the_tool_on_a_responses_upstream_and_chat_upstreams_never_see_it():
    chat = {"model": "m", "messages": [{"role": "user", "content": "draw"}]}
    assert run({}, chat, client="chat_completion")["tools"] == [
        {"type": "image_generation", "output_format": "png"}
    ]
    assert "tools" not in run({}, chat, client="chat_completion", upstream="chat_completion") or not run(
        {}, chat, client="chat_completion", upstream="chat_completion"
    ).get("tools")


def test_metadata():
    cls = registry()[TYPE_ID]
    assert cls.phases == ("request",) and cls.scopes == ("provider", "api_key")
    assert cls.validate_config({"output_format": "gif"}) and cls.validate_config({"action": ""})
