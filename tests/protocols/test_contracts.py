"""Every protocol package satisfies the typing.Protocol contracts in gateway.protocols.contracts:
the names exist and the signatures match (parameter names, kinds and defaults), so a codec that
drifts from the contract fails here and not at a call site in the proxy."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from gateway.protocols import CLIENT_PROTOCOLS, UPSTREAM_PROTOCOLS, chat, codec, gemini, messages, responses
from gateway.protocols.base import EncodeContext
from gateway.protocols.contracts import Codec, StreamDecoder, StreamEncoder, UpstreamCodec

# The static half of the contract: a type checker run over the tests (mypy checks modules against
# protocols, PEP 544) rejects this line when a package drifts from Codec / UpstreamCodec.
STATIC_CHECK: tuple[Codec, Codec, Codec, UpstreamCodec] = (chat, responses, messages, gemini)


def _params(fn) -> list[tuple[str, object, object]]:
    """(name, kind, default) of each parameter, without a leading ``self``."""
    params = list(inspect.signature(fn).parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    return [(p.name, p.kind, p.default) for p in params]


def _methods(proto: type) -> list[str]:
    return [
        name for name, value in vars(proto).items() if inspect.isfunction(value) and not name.startswith("_")
    ]


def _check_functions(target: object, proto: type) -> None:
    for name in _methods(proto):
        assert callable(getattr(target, name, None)), f"{target!r} lacks {name}"
        assert _params(getattr(target, name)) == _params(getattr(proto, name)), f"{target!r}.{name} signature"


@pytest.mark.parametrize("protocol", UPSTREAM_PROTOCOLS)
def test_every_upstream_codec_satisfies_upstream_codec(protocol):
    module = codec(protocol)
    assert isinstance(module, UpstreamCodec)
    _check_functions(module, UpstreamCodec)
    assert module.PROTOCOL == protocol
    decoder = module.StreamDecoder()
    assert isinstance(decoder, StreamDecoder)
    _check_functions(type(decoder), StreamDecoder)


@pytest.mark.parametrize("protocol", CLIENT_PROTOCOLS)
def test_every_client_codec_satisfies_codec(protocol):
    module = codec(protocol)
    assert isinstance(module, Codec)
    _check_functions(module, Codec)
    encoder = module.StreamEncoder(EncodeContext(model="m"))
    assert isinstance(encoder, StreamEncoder)
    _check_functions(type(encoder), StreamEncoder)


def test_gemini_is_a_client_codec_too():
    """Issue 19: Gemini gained the client half (gateway/protocols/gemini/client.py)."""
    assert isinstance(codec("gemini"), Codec)


def test_a_module_missing_a_function_fails_the_contract():
    import types

    fake = types.ModuleType("fake")
    fake.PROTOCOL = "fake"
    fake.StreamDecoder = object
    fake.encode_request = lambda req, ctx: {}
    fake.upstream_path = lambda model, stream: "/"
    fake.upstream_headers = lambda api_key: {}
    assert not isinstance(fake, UpstreamCodec)  # no decode_response
    fake.decode_response = lambda payload: None
    assert isinstance(fake, UpstreamCodec)
    with pytest.raises(AssertionError):
        _check_functions(fake, UpstreamCodec)  # parameter named payload, not body


def test_every_protocol_package_has_the_same_layout():
    root = Path(codec("chat_completion").__file__).parent.parent
    for package in ("chat", "responses", "messages", "gemini"):
        files = {p.name for p in (root / package).glob("*.py")}
        assert {"__init__.py", "common.py", "request.py", "response.py", "stream_decode.py"} <= files, package
        if package != "gemini":
            assert "stream_encode.py" in files, package
