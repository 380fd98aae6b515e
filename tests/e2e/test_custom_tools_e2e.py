"""field_custom_tools_to_function end to end: the official ``openai`` SDK speaks Responses with a
custom ``apply_patch`` tool to our production server; the provider's upstream is a Chat
Completions mock that only sees a JSON function and answers with fragmented ``{"input": ...}``
arguments; the client gets a ``custom_tool_call`` whose input is the normalised patch.

Also: the frame-length limit (``stream_split_sse_frames``) on the same stream, and the 400 for a
function/custom name clash.
"""

from __future__ import annotations

import openai
import orjson
import pytest

from tests.servers import make_key, make_route

PATCH = '*** Begin Patch ***\n*** Add File: "café".txt\nsay "hi"\n\tdone\n*** End of File\n*** End Patch ***'
NORMALISED = '*** Begin Patch\n*** Add File: "café".txt\n+say "hi"\n+\tdone\n*** End Patch\n'
CUSTOM_TOOL = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: /(.|\\n)+/"},
}


def _setup(mock_upstream, model: str, *, split: int | None = None) -> str:
    from transforms.models import TransformRule

    route = make_route(
        "chat_completion", model, mock_upstream.base_url("chat_completion"), upstream_model="up-chat"
    )
    position = 0
    for phase in ("request", "response"):
        TransformRule.objects.create(
            scope="provider",
            provider=route.provider,
            position=position,
            transform="field_custom_tools_to_function",
            phase=phase,
            models=[model],
            config={"names": ["apply_patch"]},
        )
        position += 1
    if split is not None:
        TransformRule.objects.create(
            scope="provider",
            provider=route.provider,
            position=position,
            transform="stream_split_sse_frames",
            phase="response",
            models=None,
            config={"max_frame_length": split},
        )
    from gateway import config_version

    config_version.bump()
    _, secret = make_key()
    return secret


def _script_call(mock_upstream) -> None:
    mock_upstream.script(
        [
            {
                "text": "",
                "tool_calls": [
                    {
                        "name": "apply_patch",
                        "arguments": orjson.dumps({"input": PATCH}).decode(),
                        "id": "call_patch_1",
                    }
                ],
            }
        ]
    )


def _check_upstream(mock_upstream) -> None:
    body = mock_upstream.requests()[-1]["body"]
    tool = next(t for t in body["tools"] if (t.get("function") or {}).get("name") == "apply_patch")
    assert tool["type"] == "function"
    params = tool["function"]["parameters"]
    assert params["required"] == ["input"] and params["properties"]["input"]["type"] == "string"
    assert "grammar" not in orjson.dumps(body).decode()


def _client(gateway, secret: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=secret, max_retries=0)


def test_non_stream_custom_call_is_restored(gateway, mock_upstream):
    secret = _setup(mock_upstream, "ctf-nonstream")
    gateway.wait_config()
    _script_call(mock_upstream)
    resp = _client(gateway, secret).responses.create(
        model="ctf-nonstream", input="patch it", tools=[CUSTOM_TOOL]
    )
    calls = [item for item in resp.output if item.type == "custom_tool_call"]
    assert len(calls) == 1, resp.output
    assert calls[0].name == "apply_patch" and calls[0].call_id == "call_patch_1"
    assert calls[0].input == NORMALISED
    assert not [item for item in resp.output if item.type == "function_call"]
    _check_upstream(mock_upstream)


@pytest.mark.parametrize("split", [None, 200], ids=["plain", "split-frames"])
def test_stream_custom_call_is_restored_without_leaks(gateway, mock_upstream, split):
    model = f"ctf-stream-{split or 0}"
    secret = _setup(mock_upstream, model, split=split)
    gateway.wait_config()
    _script_call(mock_upstream)
    deltas: list[str] = []
    final = None
    with _client(gateway, secret).responses.create(
        model=model, input="patch it", tools=[CUSTOM_TOOL], stream=True
    ) as stream:
        for event in stream:
            if event.type == "response.custom_tool_call_input.delta":
                deltas.append(event.delta)
            elif event.type == "response.function_call_arguments.delta":
                raise AssertionError(f"a function-call fragment leaked: {event.delta!r}")
            elif event.type == "response.completed":
                final = event.response
    assert "".join(deltas) == NORMALISED
    if split:
        assert len(deltas) > 1, "the 200-byte frame limit should have split the custom input delta"
    assert all('\\"' not in d and '{"input"' not in d for d in deltas)
    assert final is not None
    calls = [item for item in final.output if item.type == "custom_tool_call"]
    assert len(calls) == 1 and calls[0].input == NORMALISED and calls[0].name == "apply_patch"
    _check_upstream(mock_upstream)


def test_function_and_custom_with_the_same_name_is_a_400(gateway, mock_upstream):
    secret = _setup(mock_upstream, "ctf-clash")
    gateway.wait_config()
    tools = [CUSTOM_TOOL, {"type": "function", "name": "apply_patch", "parameters": {"type": "object"}}]
    with pytest.raises(openai.BadRequestError) as info:
        _client(gateway, secret).responses.create(model="ctf-clash", input="patch it", tools=tools)
    assert "apply_patch" in str(info.value)
    assert mock_upstream.requests() == []  # rejected before forwarding
