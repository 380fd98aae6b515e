"""field_set end to end.

Request: an ``openai`` SDK Chat Completions client sends ``service_tier``; the provider's upstream
speaks Anthropic Messages. A conditional provider rule rewrites ``priority`` to ``auto`` and leaves
any other value alone; an unconditional rule adds a nested field the client never sent (it reaches
the upstream even though it is not on the Messages passthrough whitelist).

Response: an ``openai`` SDK Responses client over a Messages upstream; a response rule adds a
top-level field to the Responses object the client receives.
"""

from __future__ import annotations

from tests.e2e.transforms.rules import RuleSpec, last_upstream_body, openai_client, post_raw, setup


def test_request_field_is_set_conditionally(gateway, mock_upstream):
    rules = [
        RuleSpec("field_set", config={"path": "service_tier", "when_equals": "priority", "value": "auto"}),
        RuleSpec("field_set", config={"path": "routing_hint.region", "value": "eu-west"}),
    ]
    s = setup(mock_upstream, "messages", "fset-req", rules)
    gateway.wait_config()
    client = openai_client(gateway, s.secret)

    reply = client.chat.completions.create(
        model=s.model, messages=[{"role": "user", "content": "hi"}], service_tier="priority"
    )
    assert reply.choices[0].message.content == "Echo: hi"
    body = last_upstream_body(mock_upstream)
    assert body["service_tier"] == "auto"
    assert body["routing_hint"] == {"region": "eu-west"}

    client.chat.completions.create(
        model=s.model, messages=[{"role": "user", "content": "hi"}], service_tier="flex"
    )
    body = last_upstream_body(mock_upstream)
    assert body["service_tier"] == "flex", "when_equals did not match: the value must stay"
    assert body["routing_hint"] == {"region": "eu-west"}


def test_response_field_is_set_for_the_client(gateway, mock_upstream):
    rules = [RuleSpec("field_set", "response", {"path": "gateway_info.region", "value": "eu-west"})]
    s = setup(mock_upstream, "messages", "fset-resp", rules)
    gateway.wait_config()

    raw = post_raw(gateway, s.secret, "/v1/responses", {"model": s.model, "input": "hi"})
    assert raw.status_code == 200, raw.text
    assert raw.json()["gateway_info"] == {"region": "eu-west"}

    reply = openai_client(gateway, s.secret).responses.create(model=s.model, input="hello")
    assert reply.output_text == "Echo: hello"
    assert reply.model_extra["gateway_info"] == {"region": "eu-west"}


def test_response_field_is_set_on_a_same_protocol_responses_hop(gateway, mock_upstream):
    s = setup(
        mock_upstream,
        "responses",
        "fset-resp-same",
        [RuleSpec("field_set", "response", {"path": "gateway_info.region", "value": "eu-west"})],
    )
    gateway.wait_config()
    raw = post_raw(gateway, s.secret, "/v1/responses", {"model": s.model, "input": "hi"})
    assert raw.status_code == 200, raw.text
    assert raw.json().get("gateway_info") == {"region": "eu-west"}
