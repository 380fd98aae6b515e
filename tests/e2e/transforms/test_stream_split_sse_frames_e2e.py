"""stream_split_sse_frames end to end, as an API-key rule: an Anthropic Messages client streams
from a Chat Completions upstream whose answer is one long token full of characters JSON must
escape (quotes, backslashes, non-ASCII). We read the raw SSE bytes: with the rule every delta
event's ``data:`` line fits the configured limit (measured in bytes, escaped) and the text deltas still concatenate to the original; the same
request with a key without the rule carries a longer line (the control). The ``anthropic`` SDK
also parses the split stream into the same text.
"""

from __future__ import annotations

import httpx
import orjson

from tests.e2e.transforms.rules import RuleSpec, anthropic_client, setup
from tests.servers import make_key

LIMIT = 160
TOKEN = ('say:"hi"\\path→café;' * 40)  # no whitespace: the mock streams it as a single delta


def _stream_lines(gateway, secret: str, model: str) -> list[bytes]:
    body = {"model": model, "max_tokens": 256, "stream": True, "messages": [{"role": "user", "content": "talk"}]}
    headers = {"x-api-key": secret, "anthropic-version": "2023-06-01"}
    with httpx.stream("POST", f"{gateway.url}/v1/messages", json=body, headers=headers, timeout=30) as response:
        assert response.status_code == 200, response.read()
        return [line.encode() for line in response.iter_lines()]


def _delta_lines(lines: list[bytes]) -> list[bytes]:
    """The ``data:`` lines of delta events, the ones the limit applies to (``message_start`` and
    ``message_delta`` carry no string delta and are never split)."""
    return [line for line in lines if line.startswith(b'data: {"type":"content_block_delta"')]


def _text(lines: list[bytes]) -> tuple[str, int]:
    """(concatenated text deltas, number of text_delta events)."""
    texts = []
    for line in lines:
        if line.startswith(b"data: "):
            event = orjson.loads(line[len(b"data: "):])
            if event.get("type") == "content_block_delta" and event["delta"].get("type") == "text_delta":
                texts.append(event["delta"]["text"])
    return "".join(texts), len(texts)


def test_api_key_rule_caps_every_data_line(gateway, mock_upstream):
    s = setup(mock_upstream, "chat_completion", "ssf",
              [RuleSpec("stream_split_sse_frames", "response", {"max_frame_length": LIMIT}, scope="api_key")])
    _, plain_secret = make_key("no-split")
    gateway.wait_config()

    mock_upstream.script([{"text": TOKEN}])
    lines = _stream_lines(gateway, s.secret, s.model)
    assert max(len(line) for line in _delta_lines(lines)) <= LIMIT
    text, count = _text(lines)
    assert text == TOKEN
    assert count > 5

    mock_upstream.script([{"text": TOKEN}])
    control = _stream_lines(gateway, plain_secret, s.model)
    assert max(len(line) for line in _delta_lines(control)) > LIMIT
    assert _text(control) == (TOKEN, 1)

    mock_upstream.script([{"text": TOKEN}])
    with anthropic_client(gateway, s.secret).messages.stream(
            model=s.model, max_tokens=256, messages=[{"role": "user", "content": "talk"}]) as stream:
        assert "".join(stream.text_stream) == TOKEN
        assert stream.get_final_message().content[0].text == TOKEN
