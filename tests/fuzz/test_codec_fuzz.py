"""Property-based fuzzing of every codec (see ``tests/fuzz/properties.py`` for the properties).

Client requests: random objects over each protocol's field names and structured mutations of a
rich valid request. Upstream answers: mutations of valid whole bodies and streams (taken from the
mock upstream's wire modules) and random frame sequences. Decoded streams, whole and truncated,
go through every client StreamEncoder.

Derandomized with moderate example counts so CI is stable and the file stays fast; any
counterexample hypothesis prints is a crash to fix in the codec, with a regression test in that
codec's own test module.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.protocols import CLIENT_PROTOCOLS, UPSTREAM_PROTOCOLS

from . import properties as P
from .corpus import REQUEST_SEEDS, response_seeds, stream_seeds
from .strategies import json_values, mutated, mutated_stream, random_frames, random_object

FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
FEW = settings(FUZZ, max_examples=100)

FIELD_NAMES = {
    protocol: sorted(seed)
    + [
        "n",
        "functions",
        "function_call",
        "reasoning",
        "thinking",
        "output_config",
        "system",
        "text",
        "previous_response_id",
        "_gw_legacy_function",
    ]
    for protocol, seed in REQUEST_SEEDS.items()
}


# -- the seeds themselves are valid (otherwise the mutations prove little) --------------------------


@pytest.mark.parametrize("protocol", CLIENT_PROTOCOLS)
def test_request_seed_decodes_and_encodes_everywhere(protocol):
    assert P.check_request(protocol, REQUEST_SEEDS[protocol]) is not None


@pytest.mark.parametrize("protocol", UPSTREAM_PROTOCOLS)
def test_upstream_seeds_decode(protocol):
    for body in response_seeds(protocol):
        assert P.check_response(protocol, body) is not None
    for frames in stream_seeds(protocol):
        events = P.check_stream(protocol, frames)
        assert type(events[-1]).__name__ == "ResponseDone", events[-1]


# -- client requests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", CLIENT_PROTOCOLS)
@FUZZ
@given(data=st.data())
def test_decode_request_mutated_seed(protocol, data):
    P.check_request(protocol, data.draw(mutated(REQUEST_SEEDS[protocol])))


@pytest.mark.parametrize("protocol", CLIENT_PROTOCOLS)
@FEW
@given(data=st.data())
def test_decode_request_random_object(protocol, data):
    P.check_request(protocol, data.draw(random_object(FIELD_NAMES[protocol])))


@pytest.mark.parametrize("protocol", CLIENT_PROTOCOLS)
@settings(FEW, max_examples=30)
@given(body=json_values)
def test_decode_request_any_json_value(protocol, body):
    P.check_request(protocol, body)


# -- upstream whole answers -------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", UPSTREAM_PROTOCOLS)
@FUZZ
@given(data=st.data())
def test_decode_response_mutated_seed(protocol, data):
    seed = data.draw(st.sampled_from(response_seeds(protocol)))
    P.check_response(protocol, data.draw(mutated(seed)))


@pytest.mark.parametrize("protocol", UPSTREAM_PROTOCOLS)
@settings(FEW, max_examples=30)
@given(body=json_values)
def test_decode_response_any_json_value(protocol, body):
    P.check_response(protocol, body)


# -- upstream streams and the client stream encoders ---------------------------------------------


@pytest.mark.parametrize("protocol", UPSTREAM_PROTOCOLS)
@FUZZ
@given(data=st.data())
def test_stream_decoder_mutated_stream(protocol, data):
    seed = data.draw(st.sampled_from(stream_seeds(protocol)))
    frames = data.draw(mutated_stream(seed))
    events = P.check_stream(protocol, frames)
    # A stream cut anywhere (the upstream died) still encodes, and each encoder closes it.
    cut = data.draw(st.integers(0, len(events)))
    for client in CLIENT_PROTOCOLS:
        P.encode_stream(client, events[:cut], protocol, P.frames_internal_keys(frames))


@pytest.mark.parametrize("protocol", UPSTREAM_PROTOCOLS)
@FEW
@given(frames=random_frames)
def test_stream_decoder_random_frames(protocol, frames):
    P.check_stream(protocol, frames)
