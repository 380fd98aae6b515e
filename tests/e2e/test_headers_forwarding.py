"""The one client header the gateway forwards: a Messages client's ``anthropic-beta`` opt-ins,
to Messages upstreams only. Nothing else of the client's (its key above all) reaches upstream."""

from __future__ import annotations

import anthropic
import pytest

from tests.servers import make_key, make_route


@pytest.mark.parametrize(("upstream", "forwarded"), [("messages", True), ("chat_completion", False)])
def test_anthropic_beta_reaches_messages_upstreams_only(gateway, mock_upstream, upstream, forwarded):
    make_route(upstream, "beta-model", mock_upstream.base_url(upstream))
    _, secret = make_key()
    gateway.wait_config()
    mock_upstream.clear()
    client = anthropic.Anthropic(api_key=secret, base_url=gateway.url)
    message = client.messages.create(
        model="beta-model",
        max_tokens=64,
        messages=[{"role": "user", "content": "hello"}],
        extra_headers={
            "anthropic-beta": "context-management-2025-06-27,fine-grained-tool-streaming-2025-05-14",
            "x-custom-client-header": "nope",
        },
    )
    assert message.content[0].text == "Echo: hello"
    [seen] = mock_upstream.requests()
    headers = {k.lower(): v for k, v in seen["headers"].items()}
    if forwarded:
        assert (
            headers["anthropic-beta"]
            == "context-management-2025-06-27,fine-grained-tool-streaming-2025-05-14"
        )
    else:
        assert "anthropic-beta" not in headers
    assert "x-custom-client-header" not in headers
    assert secret not in str(seen["headers"])
