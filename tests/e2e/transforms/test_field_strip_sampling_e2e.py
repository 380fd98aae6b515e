"""field_strip_sampling end to end, as a global rule: an ``openai`` SDK Chat Completions client
sends ``temperature`` and ``top_p``; the provider's upstream speaks Anthropic Messages (which
rejects some sampling combinations). The global rule strips ``temperature`` only.
"""

from __future__ import annotations

from tests.e2e.transforms.rules import RuleSpec, last_upstream_body, openai_client, setup


def test_global_rule_strips_only_the_listed_fields(gateway, mock_upstream):
    s = setup(
        mock_upstream,
        "messages",
        "fss-global",
        [RuleSpec("field_strip_sampling", config={"fields": ["temperature", "stop"]}, scope="global")],
    )
    gateway.wait_config()
    reply = openai_client(gateway, s.secret).chat.completions.create(
        model=s.model, messages=[{"role": "user", "content": "hi"}], temperature=0.3, top_p=0.9, stop=["END"]
    )
    assert reply.choices[0].message.content == "Echo: hi"
    body = last_upstream_body(mock_upstream)
    assert "temperature" not in body
    assert "stop_sequences" not in body
    assert body["top_p"] == 0.9
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
