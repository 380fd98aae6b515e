"""Secret-looking body fields are masked before a capture is stored."""

from __future__ import annotations

import orjson

from captures.dump import build
from captures.redact import MASK, mask_secrets
from tests.captures.helpers import record


def test_secret_keys_are_masked_at_any_depth():
    body = {
        "api_key": "sk-live",
        "Authorization": "Bearer x",
        "nested": [{"password": "p", "x-api-key": "k"}],
        "metadata": {"client_secret": "s", "access_token": "t", "note": "keep"},
        "token": "tok",
        "secret": "",
    }
    out = mask_secrets(body)
    assert out["api_key"] == MASK and out["Authorization"] == MASK and out["token"] == MASK
    assert out["nested"][0] == {"password": MASK, "x-api-key": MASK}
    assert out["metadata"] == {"client_secret": MASK, "access_token": MASK, "note": "keep"}
    assert out["secret"] == ""  # nothing to hide


def test_ordinary_fields_that_mention_tokens_are_kept():
    body = {
        "max_tokens": 100,
        "usage": {"input_tokens": 3, "output_tokens": 4},
        "logprobs": {"content": [{"token": "Hello", "logprob": -0.1, "bytes": [72]}]},
    }
    assert mask_secrets(orjson.loads(orjson.dumps(body))) == body


def test_dump_masks_every_stage():
    rec = record()
    rec.client_request["api_key"] = "sk-client-in-body"
    rec.attempts[0].upstream_request["password"] = "hunter2"
    rec.attempts[0].upstream_response["secret"] = "s3"
    rec.client_response["token"] = "t0"
    data, _ = build(rec)
    for secret in (b"sk-client-in-body", b"hunter2", b"s3", b"t0"):
        assert secret not in data
    assert orjson.loads(data)["client_request"]["api_key"] == MASK
