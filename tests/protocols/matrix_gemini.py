"""Gemini as the fourth client of the codec matrix (``test_matrix``): its request bodies per
scenario, a lifecycle checker for its ``alt=sse`` stream, and its reader through the official
``google-genai`` SDK (the client's answer served by a mock transport).

The proxy carries Gemini's URL parts into the body before decoding (``model`` from the path,
``stream`` from the method, see ``gateway.proxy.gemini_client.gemini_body``); the bodies here
carry them the same way."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import orjson

LOGICAL = "matrix-model"
USER_TEXT = "Hello matrix"
IMG_URL = "https://example.com/cat.png"
IMG_B64 = "iVBORw0KGgoAAAANSUhEUg"
TOOL_PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
HISTORY_CALLS = [("call_paris", "Paris", "sunny"), ("call_rome", "Rome", "rainy")]
URL_PARTS = ("model", "stream")  # what the proxy adds from the URL (not part of Gemini's body)


def _user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "parts": list(parts)}


def gemini_body(scenario: str, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if scenario == "plain":
        body["contents"] = [_user({"text": USER_TEXT})]
    elif scenario == "multiturn":
        body["systemInstruction"] = {"parts": [{"text": "You are terse."}]}
        body["contents"] = [
            _user({"text": "first question"}),
            {"role": "model", "parts": [{"text": "first answer"}]},
            _user({"text": USER_TEXT}),
        ]
    elif scenario == "tools":
        body["tools"] = [
            {
                "functionDeclarations": [
                    {"name": "get_weather", "description": "Weather", "parameters": TOOL_PARAMS}
                ]
            }
        ]
        body["contents"] = [
            _user({"text": USER_TEXT + ": weather in Paris and Rome?"}),
            {
                "role": "model",
                "parts": [  # Gemini 3 signs the first call of a turn; the client replays it
                    {
                        "functionCall": {"id": cid, "name": "get_weather", "args": {"city": city}},
                        **({"thoughtSignature": "Q0FMTFNJRw=="} if i == 0 else {}),
                    }
                    for i, (cid, city, _) in enumerate(HISTORY_CALLS)
                ],
            },
            _user(
                *[
                    {"functionResponse": {"id": cid, "name": "get_weather", "response": {"result": result}}}
                    for cid, _, result in HISTORY_CALLS
                ],
                {"text": "and Oslo and Lima?"},
            ),
        ]
    elif scenario == "image":
        body["contents"] = [
            _user(
                {"text": USER_TEXT + ": describe"},
                {"fileData": {"mimeType": "image/png", "fileUri": IMG_URL}},
                {"inlineData": {"mimeType": "image/png", "data": IMG_B64}},
            )
        ]
    else:
        body["generationConfig"] = {"thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": True}}
        body["contents"] = [
            _user({"text": "first question"}),
            {
                "role": "model",
                "parts": [
                    {"text": "thinking hard", "thought": True, "thoughtSignature": "HISTSIG"},
                    {"text": "first answer"},
                ],
            },
            _user({"text": USER_TEXT}),
        ]
    return {**body, "model": LOGICAL, "stream": stream}


def wire_body(body: dict[str, Any]) -> dict[str, Any]:
    """What a Gemini client puts in its request body (the URL parts removed)."""
    return {k: v for k, v in body.items() if k not in URL_PARTS}


def check_gemini_stream(raw: bytes) -> list[dict[str, Any]]:
    """``alt=sse`` grammar: data-only frames, each one ``GenerateContentResponse`` (no ``[DONE]``);
    exactly the last carries the finish reason and the usage; every frame the same response id."""
    text = raw.decode("utf-8")
    assert text.endswith("\n\n"), "stream must end with a complete frame"
    frames = []
    for block in text.split("\n\n")[:-1]:
        block = block.strip("\n")
        if not block:
            continue  # keep-alive blank line
        assert block.startswith("data: ") and "\n" not in block, f"one data line per frame: {block!r}"
        assert block != "data: [DONE]", "Gemini streams have no [DONE]"
        frames.append(orjson.loads(block[6:]))
    assert frames, "empty stream"
    finished = [i for i, f in enumerate(frames) if f["candidates"][0].get("finishReason")]
    assert finished == [len(frames) - 1], "only the last frame finishes"
    assert "usageMetadata" in frames[-1]
    assert len({f["responseId"] for f in frames}) == 1
    assert all(f["candidates"][0]["content"]["role"] == "model" for f in frames)
    return frames


def gemini_view(out: Any, stream: bool, raw: bytes) -> dict[str, Any]:
    """Text, function calls (id, name, args), usage and finish as ``google-genai`` reads them.
    ``json`` is the raw answer plus the thought signatures as the client would send them back
    (the SDK holds them as bytes and re-encodes them; the codec reads them back), since another
    protocol's opaque signature travels to a Gemini client wrapped in base64."""
    from google import genai
    from google.genai import types

    from gateway.protocols import codec

    if stream:
        check_gemini_stream(out)
    else:
        assert out["modelVersion"] and isinstance(out["candidates"], list)
    ctype = "text/event-stream" if stream else "application/json"
    http = httpx.Client(
        transport=httpx.MockTransport(
            lambda request: httpx.Response(200, content=raw, headers={"content-type": ctype})
        )
    )
    client = genai.Client(
        api_key="k", http_options=types.HttpOptions(base_url="http://gw", httpx_client=http)
    )
    config = types.GenerateContentConfig(
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True)
    )
    if stream:
        chunks = list(client.models.generate_content_stream(model=LOGICAL, contents="x", config=config))
    else:
        chunks = [client.models.generate_content(model=LOGICAL, contents="x", config=config)]
    text, calls, usage, finish, replayed = "", [], (0, 0), None, []
    for chunk in chunks:
        if chunk.usage_metadata is not None:
            meta = chunk.usage_metadata
            usage = (
                meta.prompt_token_count or 0,
                (meta.candidates_token_count or 0) + (meta.thoughts_token_count or 0),
            )
        candidate = chunk.candidates[0]
        finish = candidate.finish_reason.name if candidate.finish_reason is not None else finish
        for part in (candidate.content.parts if candidate.content else None) or []:
            if part.thought_signature:
                replayed.append(base64.urlsafe_b64encode(part.thought_signature).decode())
            if part.function_call is not None:
                calls.append(
                    (part.function_call.id, part.function_call.name, dict(part.function_call.args or {}))
                )
            elif part.text and not part.thought:
                text += part.text
    history = {
        "model": LOGICAL,
        "contents": [
            {
                "role": "model",
                "parts": [{"text": "t", "thought": True, "thoughtSignature": sig} for sig in replayed],
            }
        ],
    }
    back = [
        n.extra.get("_gw_gemini_thought_signature") for n in codec("gemini").decode_request(history).input
    ]
    return {
        "text": text,
        "calls": calls,
        "usage": usage,
        "finish": "tool_calls" if calls else finish,
        "json": raw.decode() + " replayed signatures: " + " ".join(map(str, back)),
    }
