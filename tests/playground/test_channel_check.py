"""The admin's "Test channel" action: one minimal request per selected channel for the chosen
model, showing status, latency and the error in an operator's words."""

from __future__ import annotations

import pytest

from tests.servers import make_route

CHANGELIST = "/admin/providers/channel/"


@pytest.fixture
def channels(db, mock_upstream):
    ok = make_route(
        "chat_completion", "gpt-ok", mock_upstream.base_url("chat_completion"), upstream_model="m-1"
    )
    msgs = make_route("messages", "claude-ok", mock_upstream.base_url("messages"), provider=ok.provider)
    down = make_route("chat_completion", "gpt-down", "http://127.0.0.1:1/v1")
    broken = make_route("chat_completion", "gpt-500", mock_upstream.base_url("chat_completion", "status=500"))
    return ok, msgs, down, broken


def _post(client, ids, **extra):
    return client.post(
        CHANGELIST, {"action": "test_channel", "_selected_action": [str(i) for i in ids], **extra}
    )


def test_action_asks_for_a_model_then_reports_each_channel(admin_client, channels):
    ok, msgs, down, broken = channels
    ids = [r.channel.pk for r in channels]
    page = _post(admin_client, ids)
    assert page.status_code == 200
    assert b"not checked yet" in page.content and b'value="gpt-ok"' in page.content
    page = _post(admin_client, ids, run_check="1")
    assert page.status_code == 200
    results = {r["channel_id"]: r for r in page.context["results"]}
    good = results[ok.channel.pk]
    assert good["ok"] is True and good["status"] == 200 and good["latency_ms"] is not None
    assert good["upstream_model"] == "m-1" and good["reply"]
    assert results[msgs.channel.pk]["ok"] is True  # encoded for the messages protocol
    refused = results[down.channel.pk]
    assert refused["ok"] is False and refused["status"] is None
    assert refused["error"] == "connect refused 127.0.0.1:1"
    failed = results[broken.channel.pk]
    assert failed["ok"] is False and failed["status"] == 500
    assert failed["error"].startswith("upstream status 500 from 127.0.0.1:")
    html = page.content.decode()
    assert "connect refused 127.0.0.1:1" in html and ok.upstream_key not in html


def test_the_chosen_model_is_sent_without_rules(admin_client, channels, mock_upstream):
    from transforms.models import TransformRule

    ok = channels[0]
    TransformRule.objects.create(
        scope="global",
        position=0,
        transform="prompt_inject_system",
        phase="request",
        config={"content": "should not be sent"},
    )
    mock_upstream.clear()
    page = _post(admin_client, [ok.channel.pk], run_check="1", **{f"model_{ok.channel.pk}": "other-upstream"})
    (result,) = page.context["results"]
    assert result["upstream_model"] == "other-upstream"
    (sent,) = [r for r in mock_upstream.requests() if "chat/completions" in r.get("path", "")]
    assert sent["body"]["model"] == "other-upstream"
    assert "should not be sent" not in str(sent["body"])


def test_non_staff_cannot_run_it(client, channels, django_user_model):
    user = django_user_model.objects.create_user("nobody", password="pw")
    client.force_login(user)
    resp = _post(client, [channels[0].channel.pk], run_check="1")
    assert resp.status_code == 302  # to the admin login


def test_error_classes_in_words():
    import aiohttp

    from gateway.errors import AttemptFailed
    from gateway.proxy.diagnose import describe_exception, describe_failure

    url = "https://api.example.com/v1/chat/completions?key=secret"
    assert describe_exception(TimeoutError(), url, 30.0) == "timeout after 30 s (api.example.com:443)"
    assert (
        describe_exception(ConnectionRefusedError(111, "refused"), url, 30.0)
        == "connect refused api.example.com:443"
    )
    assert (
        describe_exception(aiohttp.ServerDisconnectedError(), url, 30.0)
        == "server disconnected (api.example.com:443)"
    )
    failed = AttemptFailed("upstream status 429", status=429)
    text = describe_failure(failed, url, 30.0, body='{"error": "slow down"}')
    assert text == 'upstream status 429 from api.example.com:443: {"error": "slow down"}'
    assert "secret" not in text
