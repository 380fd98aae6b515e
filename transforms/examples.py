"""Runs a transform's worked examples (``Transform.examples``).

Used by the parametrised test over every registered transform, by the start-up system check,
and by the admin and registry endpoint, which show each example's input and expected output.
An example is wire JSON in, wire JSON out, in one protocol, so an operator reads it in the
shape they already know.
"""

from __future__ import annotations

from typing import Any

from gateway.protocols import codec
from gateway.protocols.base import EncodeContext
from transforms.base import Transform, TransformContext, TransformExample


def run_example(cls: type[Transform], example: TransformExample) -> dict[str, Any]:
    """Apply ``cls`` configured with ``example.config`` to ``example.input`` and return the
    encoded result (the whole body; compare with ``mismatches``)."""
    module = codec(example.protocol)
    transform = cls(dict(example.config))
    model = example.input.get("model") or example.context.get("logical_model") or "model"
    fields: dict[str, Any] = {
        "logical_model": model,
        "client_protocol": example.protocol,
        "upstream_protocol": example.protocol,
        "upstream_model": model,
    }
    fields.update(example.context)
    ctx = TransformContext(**fields)
    enc = EncodeContext(model=model, source_protocol=example.protocol, strip_nested=False)
    if example.phase == "request":
        req = module.decode_request(example.input)
        transform.apply_request(req, ctx)
        enc.model = req.model or model  # as the pipeline does: a request rule may rename the upstream model
        return module.encode_request(req, enc)
    if example.phase == "response":
        resp = module.decode_response(example.input)
        transform.apply_response(resp, ctx)
        return module.encode_response(resp, enc)
    raise ValueError(f"example phase must be 'request' or 'response', not {example.phase!r}")


def mismatches(example: TransformExample, actual: dict[str, Any]) -> list[str]:
    """The top-level keys of ``expected`` whose value differs from ``actual``, and the keys of
    ``absent`` that are present (empty: passes)."""
    found = [
        f"{key}: expected {example.expected[key]!r}, got {actual.get(key, '<missing>')!r}"
        for key in example.expected
        if actual.get(key, _MISSING) != example.expected[key]
    ]
    found += [f"{key}: expected absent, got {actual[key]!r}" for key in example.absent if key in actual]
    return found


def check_example(cls: type[Transform], example: TransformExample) -> list[str]:
    """Problems with one example (empty when it passes); never raises."""
    try:
        return mismatches(example, run_example(cls, example))
    except Exception as exc:  # reported by the test and the system check, not raised
        return [f"{type(exc).__name__}: {exc}"]


_MISSING = object()
