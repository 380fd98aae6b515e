"""The rest of the API surface through the real server with the official ``openai`` SDK (issue
19): embeddings (OpenAI-shaped and Gemini upstreams), legacy completions (whole, streamed,
refusals), Responses compaction, path aliases, and the model list."""

from __future__ import annotations

import base64
import struct

import httpx
import openai
import pytest

from gateway.mock_upstream.extras import vector_for
from tests.servers import make_key, make_route


def _client(gateway, secret: str, prefix: str = "/v1") -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.url + prefix, api_key=secret, max_retries=0)


def _last_upstream(mock_upstream) -> dict:
    return mock_upstream.requests()[-1]


# -- embeddings -----------------------------------------------------------------------------------


@pytest.mark.parametrize("upstream", ["chat_completion", "responses", "messages", "gemini"])
def test_embeddings_through_every_upstream_protocol(gateway, mock_upstream, upstream):
    make_route(upstream, "e2e-embed", mock_upstream.base_url(upstream), upstream_model="up-embed")
    _, secret = make_key()
    gateway.wait_config()
    client = _client(gateway, secret)
    one = client.embeddings.create(model="e2e-embed", input="hello")  # SDK default: base64 on the wire
    assert one.model == "e2e-embed" and len(one.data) == 1
    assert one.data[0].embedding == vector_for("hello")
    assert one.usage.prompt_tokens > 0
    sent = _last_upstream(mock_upstream)
    if upstream == "gemini":
        assert sent["route"].endswith("/models/up-embed:embedContent")
    else:
        assert sent["route"] == "/v1/embeddings" and sent["body"]["model"] == "up-embed"
        assert sent["body"]["input"] == "hello"
    many = client.embeddings.create(model="e2e-embed", input=["a", "bb", "ccc"], encoding_format="float")
    assert [d.index for d in many.data] == [0, 1, 2]
    assert [d.embedding for d in many.data] == [vector_for(t) for t in ("a", "bb", "ccc")]
    if upstream == "gemini":
        assert _last_upstream(mock_upstream)["route"].endswith(":batchEmbedContents")


def test_embeddings_base64_is_float32_little_endian(gateway, mock_upstream):
    make_route("gemini", "e2e-embed-b64", mock_upstream.base_url("gemini"))
    _, secret = make_key()
    gateway.wait_config()
    response = httpx.post(
        gateway.url + "/v1/embeddings",
        headers={"authorization": f"Bearer {secret}"},
        json={"model": "e2e-embed-b64", "input": "x", "encoding_format": "base64", "dimensions": 4},
    )
    assert response.status_code == 200, response.text
    raw = base64.b64decode(response.json()["data"][0]["embedding"])
    assert list(struct.unpack("<4f", raw)) == vector_for("x", 4)
    assert response.headers["x-gateway-token-count"] == "estimated"


def test_embeddings_errors_are_openai_shaped(gateway, mock_upstream):
    make_route("chat_completion", "e2e-embed-err", mock_upstream.base_url("chat_completion", "status=400"))
    _, secret = make_key(allowed_models=["e2e-embed-*"])
    gateway.wait_config()
    client = _client(gateway, secret)
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="e2e-embed-err", input="x")
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="e2e-embed-missing", input="x")
    with pytest.raises(openai.PermissionDeniedError):
        client.embeddings.create(model="other", input="x")
    with pytest.raises(openai.BadRequestError) as info:
        client.embeddings.create(model="e2e-embed-err", input=[1, 2])  # type: ignore[list-item]
    assert info.value.param == "input"


# -- legacy completions ---------------------------------------------------------------------------


@pytest.mark.parametrize("upstream", ["chat_completion", "messages"])
def test_legacy_completions_whole_and_streamed(gateway, mock_upstream, upstream):
    make_route(upstream, "e2e-legacy", mock_upstream.base_url(upstream), upstream_model="up-legacy")
    _, secret = make_key()
    gateway.wait_config()
    client = _client(gateway, secret)
    whole = client.completions.create(model="e2e-legacy", prompt="Say this", max_tokens=32)
    assert whole.object == "text_completion" and whole.model == "e2e-legacy"
    assert whole.choices[0].text == "Echo: Say this" and whole.choices[0].finish_reason == "stop"
    assert whole.id.startswith("cmpl-") and whole.usage.total_tokens > 0
    sent = _last_upstream(mock_upstream)["body"]
    assert sent["model"] == "up-legacy" and "prompt" not in sent
    pieces = []
    finish = None
    for chunk in client.completions.create(
        model="e2e-legacy", prompt=["Stream this"], max_tokens=32, stream=True
    ):
        assert chunk.object == "text_completion"
        for choice in chunk.choices:
            pieces.append(choice.text)
            finish = choice.finish_reason or finish
    assert "".join(pieces) == "Echo: Stream this" and finish == "stop"


@pytest.mark.parametrize("field, value", [("suffix", "x"), ("echo", True), ("best_of", 2), ("logprobs", 3)])
def test_legacy_completions_refuse_what_chat_cannot_do(gateway, mock_upstream, field, value):
    make_route("chat_completion", "e2e-legacy-refuse", mock_upstream.base_url("chat_completion"))
    _, secret = make_key()
    gateway.wait_config()
    mock_upstream.clear()
    with pytest.raises(openai.BadRequestError) as info:
        _client(gateway, secret).completions.create(model="e2e-legacy-refuse", prompt="x", **{field: value})
    assert info.value.param == field
    with pytest.raises(openai.BadRequestError) as info:
        _client(gateway, secret).completions.create(model="e2e-legacy-refuse", prompt=["a", "b"])
    assert info.value.param == "prompt"
    assert mock_upstream.requests() == []


# -- compaction -----------------------------------------------------------------------------------


def test_compact_passes_through_to_responses_upstreams_only(gateway, mock_upstream):
    make_route("responses", "e2e-compact", mock_upstream.base_url("responses"), upstream_model="up-compact")
    make_route("chat_completion", "e2e-compact-chat", mock_upstream.base_url("chat_completion"))
    _, secret = make_key()
    gateway.wait_config()
    client = _client(gateway, secret)
    compacted = client.responses.compact(
        model="e2e-compact",
        input=[{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}],
    )
    assert compacted.object == "response.compaction"
    assert compacted.output[0].type == "compaction"
    sent = _last_upstream(mock_upstream)
    assert sent["route"] == "/v1/responses/compact" and sent["body"]["model"] == "up-compact"
    mock_upstream.clear()
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.compact(model="e2e-compact-chat", input="hello")
    assert info.value.code == "compaction_not_supported"
    assert mock_upstream.requests() == []


# -- aliases and models ----------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["/api/v1", "", "/api"])
def test_path_aliases(gateway, mock_upstream, prefix):
    make_route("chat_completion", "e2e-alias", mock_upstream.base_url("chat_completion"))
    _, secret = make_key()
    gateway.wait_config()
    client = _client(gateway, secret, prefix)
    chat = client.chat.completions.create(model="e2e-alias", messages=[{"role": "user", "content": "hi"}])
    assert chat.choices[0].message.content == "Echo: hi"
    assert client.responses.create(model="e2e-alias", input="yo").output_text == "Echo: yo"
    assert "e2e-alias" in [m.id for m in client.models.list()]
    assert client.embeddings.create(model="e2e-alias", input="z").data[0].embedding == vector_for("z")
    response = httpx.post(
        f"{gateway.url}{prefix}/messages",
        headers={"x-api-key": secret},
        json={"model": "e2e-alias", "max_tokens": 8, "messages": [{"role": "user", "content": "m"}]},
    )
    assert response.status_code == 200 and response.json()["content"][0]["text"] == "Echo: m"


def test_models_list_and_retrieve(gateway, mock_upstream):
    make_route("chat_completion", "e2e-m-b", mock_upstream.base_url("chat_completion"))
    make_route("messages", "e2e-m-a", mock_upstream.base_url("messages"))
    make_route("chat_completion", "hidden-model", mock_upstream.base_url("chat_completion"))
    make_route("chat_completion", "e2e-m-zero", mock_upstream.base_url("chat_completion"), weight=0)
    _, secret = make_key(allowed_models=["e2e-m-*"])
    gateway.wait_config()
    client = _client(gateway, secret)
    ids = [m.id for m in client.models.list()]
    assert ids == sorted(ids) and {"e2e-m-a", "e2e-m-b"} <= set(ids)
    assert "hidden-model" not in ids and "e2e-m-zero" not in ids
    model = client.models.retrieve("e2e-m-a")
    assert model.id == "e2e-m-a" and model.object == "model"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("hidden-model")
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("e2e-m-nope")


def test_models_list_describes_the_configured_codex_models(gateway, mock_upstream):
    """``models``: a Codex ``ModelInfo`` per configured Codex id the key can see, in the configured
    order; ids that are not served, or that the key may not use, get none. The exact JSON is the
    contract the pinned Codex CLI parses (tests/e2e/agents/test_codex.py runs it)."""
    from gateway.models import GlobalSettings
    from gateway.proxy.codex_models import INSTRUCTIONS
    from gateway.services import write_settings

    make_route("chat_completion", "e2e-cx-b", mock_upstream.base_url("chat_completion"))
    make_route("responses", "e2e-cx-a", mock_upstream.base_url("responses"))
    make_route("chat_completion", "cx-hidden", mock_upstream.base_url("chat_completion"))
    assert write_settings(GlobalSettings.load(), {"codex_model_ids": ["x"] * 2})  # refused: duplicates
    assert not write_settings(
        GlobalSettings.load(), {"codex_model_ids": ["e2e-cx-b", "e2e-cx-unserved", "cx-hidden", "e2e-cx-a"]}
    )
    _, secret = make_key(allowed_models=["e2e-cx-*"])
    gateway.wait_config()
    reply = httpx.get(
        gateway.url + "/v1/models?client_version=0.171.0", headers={"authorization": f"Bearer {secret}"}
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert [m["id"] for m in body["data"]] == ["e2e-cx-a", "e2e-cx-b"]
    levels = [
        {"effort": "low", "description": "Faster answers with lighter reasoning"},
        {"effort": "medium", "description": "Balanced speed and reasoning depth"},
        {"effort": "high", "description": "Deeper reasoning for complex problems"},
    ]
    assert body["models"] == [
        {
            "slug": slug,
            "display_name": slug,
            "description": f"{slug} through the gateway",
            "default_reasoning_level": "medium",
            "supported_reasoning_levels": levels,
            "shell_type": "shell_command",
            "visibility": "list",
            "supported_in_api": True,
            "priority": priority,
            "upgrade": None,
            "base_instructions": INSTRUCTIONS,
            "supports_reasoning_summaries": False,
            "support_verbosity": False,
            "default_verbosity": None,
            "apply_patch_tool_type": "freeform",
            "truncation_policy": {"mode": "bytes", "limit": 10000},
            "supports_parallel_tool_calls": False,
            "experimental_supported_tools": [],
            "input_modalities": ["text"],
        }
        for priority, slug in ((1, "e2e-cx-b"), (2, "e2e-cx-a"))
    ]
    # the openai SDK reads the same answer as a plain model list
    assert [m.id for m in _client(gateway, secret).models.list()] == ["e2e-cx-a", "e2e-cx-b"]


def test_forwarded_endpoints_carry_the_loop_guard(gateway, mock_upstream):
    """Embeddings and compaction reach their upstream with ``x-monogate-hop`` like generations,
    and a looped one is refused with 508 without going upstream (issue 13)."""
    from gateway.proxy.loopguard import HOP_HEADER

    make_route("responses", "e2e-hop-fw", mock_upstream.base_url("responses"))
    _, secret = make_key()
    gateway.wait_config()
    mock_upstream.clear()
    auth = {"authorization": f"Bearer {secret}"}
    assert (
        httpx.post(
            gateway.url + "/v1/embeddings", headers=auth, json={"model": "e2e-hop-fw", "input": "x"}
        ).status_code
        == 200
    )
    compact = httpx.post(
        gateway.url + "/v1/responses/compact",
        headers=auth,
        json={"model": "e2e-hop-fw", "input": [{"role": "user", "content": "x"}]},
    )
    assert compact.status_code == 200, compact.text
    hops = [r["headers"].get(HOP_HEADER) for r in mock_upstream.requests()]
    assert len(hops) == 2 and hops[0] and hops[0] == hops[1], hops
    looped = httpx.post(
        gateway.url + "/v1/embeddings",
        headers={**auth, HOP_HEADER: hops[0]},
        json={"model": "e2e-hop-fw", "input": "x"},
    )
    assert looped.status_code == 508 and looped.json()["error"]["code"] == "loop_detected"
    assert len(mock_upstream.requests()) == 2
