"""Replay from a capture (current configuration, dry run or sent by staff), the chips' own
diffs and the assembled-answer diff of stream captures, through the viewer's pages."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from captures.record import AttemptRecord
from tests.captures.helpers import record, stored
from tests.servers import make_route

pytestmark = pytest.mark.django_db


def viewer(name: str, *, staff: bool) -> User:
    user = User.objects.create_user(name, password="pw", is_staff=staff)
    user.user_permissions.add(Permission.objects.get(codename="view_capture"))
    return user


def test_replay_dry_run_shows_the_upstream_request_diff(client):
    from transforms.models import TransformRule

    route = make_route("chat_completion", "gpt-4o", "http://127.0.0.1:9/v1", upstream_model="up-4o")
    rule = TransformRule.objects.create(
        scope="global",
        position=0,
        transform="prompt_inject_system",
        phase="request",
        config={"content": "Answer in German."},
    )
    stored(record("r1"))  # captured when the system prompt said French
    client.force_login(viewer("staff", staff=True))
    detail = client.get("/captures/r1/").content.decode()
    assert 'id="replay-link"' in detail
    r = client.get("/captures/replay/r1")
    assert r.status_code == 200
    html = r.content.decode()
    assert "dry run: nothing sent upstream" in html
    assert "Answer in German." in html and "Answer in French." in html
    changes = r.context["comparison"].changes
    assert any(c.op == "changed" and c.path == "$.messages[0].content" for c in changes)
    assert r.context["report"]["routing"]["provider"] == route.provider.name
    rule.config = {"content": "Answer in French."}
    rule.save()
    r = client.get("/captures/replay/r1")
    # The fixture's captured body is hand-written (no "stream" field); the messages now agree.
    assert not any(c.path.startswith("$.messages") for c in r.context["comparison"].changes)


def test_replay_is_for_staff(client):
    stored(record("r2"))
    client.force_login(viewer("plain", staff=False))
    assert 'id="replay-link"' not in client.get("/captures/r2/").content.decode()
    assert client.get("/captures/replay/r2").status_code == 403


def test_replay_sent_for_real(client, mock_upstream):
    make_route("chat_completion", "gpt-4o", mock_upstream.base_url("chat_completion"), upstream_model="up-4o")
    stored(record("r3"))
    client.force_login(viewer("staff2", staff=True))
    r = client.post("/captures/replay/r3", {"send": "1"})
    assert r.status_code == 200
    sent = r.context["sent"]
    assert sent["status"] == 200 and sent["error"] is None
    assert sent["client_response"]["model"] == "gpt-4o"
    assert "sent for real" in r.content.decode()


def test_chips_link_rules_and_open_their_diff(client):
    from transforms.models import TransformRule

    rule = TransformRule.objects.create(
        scope="global", position=0, transform="prompt_inject_system", phase="request", config={"content": "x"}
    )
    rec = record("r4")
    att = rec.attempts[0]
    att.executed_chain = [
        {"scope": "global", "transform": "prompt_inject_system", "phase": "request", "rule_id": rule.pk},
        {"scope": "global", "transform": "role_merge_consecutive", "phase": "request", "rule_id": None},
    ]
    att.rule_steps = {
        "request": {
            "before": {"input": [{"role": "user"}]},
            "steps": [
                {
                    "rule_id": rule.pk,
                    "scope": "global",
                    "transform": "prompt_inject_system",
                    "phase": "request",
                    "changed": True,
                    "after": {"input": [{"role": "system"}, {"role": "user"}]},
                },
                {
                    "rule_id": None,
                    "scope": "global",
                    "transform": "role_merge_consecutive",
                    "phase": "request",
                    "changed": False,
                    "after": None,
                },
            ],
        }
    }
    stored(rec)
    client.force_login(viewer("staff3", staff=True))
    html = client.get("/captures/r4/").content.decode()
    assert 'data-chip="1"' in html and 'id="chip-diff-1"' in html
    assert 'id="chip-diff-2"' not in html and "no change" in html
    assert f'href="/admin/transforms/globaltransformrule/{rule.pk}/change/"' in html


def test_stream_capture_diffs_the_assembled_answers(client):
    rec = record("r5", stream=True)
    att: AttemptRecord = rec.attempts[0]
    att.upstream_response = None
    for frame in (
        '{"id":"c1","object":"chat.completion.chunk","model":"up-4o","choices":[{"index":0,'
        '"delta":{"role":"assistant","content":"Bon"}}]}',
        '{"id":"c1","object":"chat.completion.chunk","model":"up-4o","choices":[{"index":0,'
        '"delta":{"content":"jour"},"finish_reason":"stop"}]}',
        "[DONE]",
    ):
        att.upstream_frames.append(frame)
    rec.client_response = None
    rec.client_protocol = "messages"
    for chunk in (
        'event: message_start\ndata: {"type":"message_start","message":{"id":"m1","type":"message",'
        '"role":"assistant","model":"gpt-4o","content":[],"usage":{"input_tokens":1,"output_tokens":0}}}\n\n',
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        '"content_block":{"type":"text","text":""}}\n\n',
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        '"delta":{"type":"text_delta","text":"Bonjour"}}\n\n',
        'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
        'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
        '"usage":{"output_tokens":2}}\n\n',
        'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    ):
        rec.client_frames.append(chunk)
    stored(rec)
    client.force_login(viewer("staff4", staff=True))
    r = client.get("/captures/r5/")
    tabs = {t["title"]: t for t in r.context["tabs"]}
    diff = tabs["Assembled answers (URP): upstream → client"]["diff"]
    paths = {c.path for c in diff.changes}
    assert "$.model" in paths  # up-4o upstream, the logical model for the client
    assert not any("content" in p or "text" in p for p in paths)  # same text, assembled across protocols
    assert "Upstream stream" in tabs and tabs["Upstream stream"]["kind"] == "frames"
