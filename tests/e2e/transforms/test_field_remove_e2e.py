"""field_remove end to end.

Request: an ``openai`` SDK Chat Completions client sends ``service_tier``; the provider's upstream
speaks Anthropic Messages; the provider rule removes it, so the upstream never sees it.

Response: an ``openai`` SDK Responses client over a Messages upstream; a response ``field_set``
rule writes an object and the following ``field_remove`` rule deletes one key of it (a dotted
path), so the client sees the object without that key.
"""

from __future__ import annotations

from tests.e2e.transforms.rules import RuleSpec, last_upstream_body, openai_client, post_raw, setup


def test_request_field_is_removed(gateway, mock_upstream):
    s = setup(
        mock_upstream, "messages", "frm-req", [RuleSpec("field_remove", config={"path": "service_tier"})]
    )
    gateway.wait_config()
    reply = openai_client(gateway, s.secret).chat.completions.create(
        model=s.model, messages=[{"role": "user", "content": "hi"}], service_tier="priority", temperature=0.5
    )
    assert reply.choices[0].message.content == "Echo: hi"
    body = last_upstream_body(mock_upstream)
    assert "service_tier" not in body
    assert body["temperature"] == 0.5  # typed fields are out of reach of field_remove


def test_request_missing_path_is_a_no_op(gateway, mock_upstream):
    s = setup(
        mock_upstream, "messages", "frm-miss", [RuleSpec("field_remove", config={"path": "service_tier.x"})]
    )
    gateway.wait_config()
    openai_client(gateway, s.secret).chat.completions.create(
        model=s.model, messages=[{"role": "user", "content": "hi"}], service_tier="priority"
    )
    assert last_upstream_body(mock_upstream)["service_tier"] == "priority"


def test_response_field_is_removed(gateway, mock_upstream):
    rules = [
        RuleSpec(
            "field_set", "response", {"path": "gateway_info", "value": {"region": "eu", "trace": "t-1"}}
        ),
        RuleSpec("field_remove", "response", {"path": "gateway_info.trace"}),
    ]
    s = setup(mock_upstream, "messages", "frm-resp", rules)
    gateway.wait_config()
    raw = post_raw(gateway, s.secret, "/v1/responses", {"model": s.model, "input": "hi"})
    assert raw.status_code == 200, raw.text
    assert raw.json()["gateway_info"] == {"region": "eu"}
    assert raw.json()["output"][0]["content"][0]["text"] == "Echo: hi"


def test_upstream_response_field_is_removed_on_a_same_protocol_responses_hop(gateway, mock_upstream):
    s = setup(
        mock_upstream,
        "responses",
        "frm-resp-same",
        [RuleSpec("field_remove", "response", {"path": "service_tier"})],
    )
    gateway.wait_config()
    raw = post_raw(gateway, s.secret, "/v1/responses", {"model": s.model, "input": "hi"})
    assert raw.status_code == 200, raw.text
    assert "service_tier" not in raw.json()
