"""reasoning_strip_config: the reasoning controls leave the request, nothing else does."""

from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from gateway.urp import ReasoningConfig, ReasoningNode, Request
from transforms.base import TransformContext
from transforms.registry import registry

TYPE_ID = "reasoning_strip_config"
CTX = TransformContext(logical_model="m", client_protocol="responses")


def test_reasoning_removed_input_kept():
    req = Request(
        model="m",
        input=[ReasoningNode(content="r")],
        reasoning=ReasoningConfig(effort="low"),
        temperature=0.5,
    )
    registry()[TYPE_ID]().apply_request(req, CTX)
    assert req.reasoning is None and len(req.input) == 1 and req.temperature == 0.5
    req = Request(model="m")
    registry()[TYPE_ID]().apply_request(req, CTX)
    assert req.reasoning is None


def test_messages_client_thinking_and_output_config_effort_gone():
    body = {
        "model": "claude-opus-4-6",
        "max_tokens": 2000,
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
        "messages": [{"role": "user", "content": "hi"}],
    }
    req = codec("messages").decode_request(body)
    registry()[TYPE_ID]().apply_request(req, CTX)
    out = codec("messages").encode_request(
        req, EncodeContext(model="claude-opus-4-6", source_protocol="messages")
    )
    assert "thinking" not in out and "effort" not in out.get("output_config", {})


def test_unknown_keys_accepted():
    from transforms.validation import validate_rule

    assert (
        validate_rule(transform=TYPE_ID, scope="api_key", phase="request", models=None, config={"x": 1}) == {}
    )
