"""Every built-in transform on fuzzed input: a rule that crashes on a strange (but decodable)
client request or upstream answer would turn into a 500 ``transform_apply_failed``.

Fixed-seed mutations (``corpus.mutate``); each request goes through the same steps as an
attempt (``prepare_before_chains``, the rule, ``prepare_after_chains``, the upstream encoder)
and each response through the rule's whole-response and per-event paths and every client
encoder, whose SSE is also cut by the frame splitter at several limits.
"""

from __future__ import annotations

import random

import orjson
import pytest

from gateway.errors import ProtocolError, TransformRejected, UpstreamProtocolError
from gateway.protocols import CLIENT_PROTOCOLS, UPSTREAM_PROTOCOLS, codec
from gateway.protocols.base import EncodeContext
from gateway.protocols.json_depth import too_deep
from gateway.protocols.sse import SSEParser
from gateway.proxy.prepare import prepare_after_chains, prepare_before_chains
from gateway.urp import clone
from gateway.urp.synth import response_to_events
from transforms.base import TransformContext
from transforms.lib.sse_frame_split import FrameSplitter
from transforms.registry import registry

from . import properties as P
from .corpus import REQUEST_SEEDS, WEIRD_STRINGS, WIRES, mutate, response_seeds, stream_seeds

# A valid configuration for each transform whose schema requires one; the rest use their first
# worked example's config, or defaults.
CONFIGS = {
    "prompt_inject_system": {"content": "injected", "position": "prepend"},
    "field_set": {"path": "metadata.trace.id", "value": {"a": 1}},
    "field_remove": {"path": "metadata.k"},
    "field_override_max_tokens": {"value": 100},
    "field_strip_sampling": {
        "fields": [
            "temperature",
            "top_p",
            "stop",
            "verbosity",
            "parallel_tool_calls",
            "max_output_tokens",
            "response_format",
            "user",
        ]
    },
    "stream_force": {"enabled": True},
    "stream_split_sse_frames": {"max_frame_length": 40},
    "reasoning_effort_to_budget": {"low": 1024, "med": 4096, "high": 16384},
    "reasoning_effort_to_model_suffix": {"rules": [{"pattern": "*", "suffix": "-{effort}"}]},
    "reasoning_from_think_xml": {"tag": "think"},
    "reasoning_to_think_xml": {"tag": "think"},
}
BODIES = 80


def _instances(phase: str) -> list[tuple[str, object]]:
    out = []
    for type_id, cls in sorted(registry.items()):
        # Otherwise the first worked example's config (plug-ins and new transforms need no entry here).
        config = CONFIGS.get(type_id, cls.examples[0].config if cls.examples else {})
        assert cls.validate_config(config) == [], (type_id, "fix CONFIGS for this transform")
        transform = cls(config)
        if phase in transform.phases:
            out.append((type_id, transform))
    return out


@pytest.mark.parametrize("protocol", CLIENT_PROTOCOLS)
def test_request_rules_on_mutated_requests(protocol):
    rng = random.Random(f"transforms-{protocol}")
    rules = _instances("request")
    assert rules
    for n in range(BODIES):
        body = mutate(rng, REQUEST_SEEDS[protocol], max_ops=rng.choice([1, 2, 4]))
        if too_deep(body):
            continue
        try:
            req = codec(protocol).decode_request(body)
        except ProtocolError:
            continue
        upstream = UPSTREAM_PROTOCOLS[n % len(UPSTREAM_PROTOCOLS)]
        for type_id, rule in rules:
            areq = clone(req)
            ctx = TransformContext(
                logical_model="fuzz-model",
                client_protocol=protocol,
                upstream_protocol=upstream,
                upstream_model="up-model",
            )
            prepare_before_chains(
                areq,
                upstream_protocol=upstream,
                source_protocol=protocol,
                strip_nested=True,
                extra_whitelist=None,
            )
            try:
                rule.apply_request(areq, ctx)
            except TransformRejected as exc:
                assert exc.message, type_id
                continue
            try:  # both refuse what the upstream cannot take (e.g. custom tools without a conversion rule)
                prepare_after_chains(areq, upstream_protocol=upstream, source_protocol=protocol)
                out = codec(upstream).encode_request(
                    areq, EncodeContext(model="up-model", source_protocol=protocol)
                )
            except ProtocolError:
                continue
            orjson.dumps(out)


@pytest.mark.parametrize("upstream", UPSTREAM_PROTOCOLS)
def test_response_rules_on_mutated_responses(upstream):
    rng = random.Random(f"transforms-response-{upstream}")
    rules = _instances("response")
    assert rules
    for _ in range(BODIES):
        body = mutate(rng, rng.choice(response_seeds(upstream)))
        if too_deep(body):
            continue
        try:
            resp = codec(upstream).decode_response(body)
        except UpstreamProtocolError:
            continue
        for client in CLIENT_PROTOCOLS:
            ctx = TransformContext(
                logical_model="fuzz-model",
                client_protocol=client,
                upstream_protocol=upstream,
                upstream_model="up-model",
            )
            ectx = EncodeContext(model="fuzz-model", source_protocol=upstream)
            for _type_id, rule in rules:
                whole = clone(resp)
                rule.apply_response(whole, ctx)
                orjson.dumps(codec(client).encode_response(whole, ectx))
                state = rule.new_stream_state(ctx)
                events = [
                    out
                    for event in response_to_events(clone(resp))
                    for out in rule.apply_event(event, state, ctx)
                ]
                enc = codec(client).StreamEncoder(ectx)
                b"".join(enc.encode(event) for event in events)


@pytest.mark.parametrize("upstream", UPSTREAM_PROTOCOLS)
def test_frame_splitter_on_streams_with_odd_text(upstream):
    """Escapes, multi-byte characters and line separators in streamed text, cut at tiny limits:
    every frame the splitter writes is still valid JSON."""
    rng = random.Random(f"frames-{upstream}")
    odd = [s for s in WEIRD_STRINGS if s] + ['\\n\\"\u2028é🦄' * 20, '\\\\\\"' * 40]
    for i in range(BODIES // 2):
        text = orjson.dumps(rng.choice(odd)).decode()[1:-1]  # as it appears inside a JSON string
        frames = [
            (name, data.replace("Hello", text).replace("think", text).replace("lookup", text))
            for name, data in rng.choice(stream_seeds(upstream))
        ]
        events = P.decode_stream(upstream, frames)
        for client in CLIENT_PROTOCOLS:
            limit = (1, 16, 40, 300)[i % 4]
            enc = codec(client).StreamEncoder(EncodeContext(model="fuzz-model", source_protocol=upstream))
            splitter = FrameSplitter(client, limit)
            raw = b"".join(splitter.process(enc.encode(event)) for event in events)
            raw += splitter.process(enc.close() or b"")
            parser = SSEParser()
            for _name, data in [*parser.feed(raw), *parser.close()]:
                if data != "[DONE]":
                    orjson.loads(data)


def test_every_upstream_protocol_has_wire_seeds():
    assert set(WIRES) == set(UPSTREAM_PROTOCOLS)
