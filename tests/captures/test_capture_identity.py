"""Issue 13: a capture's identity is the gateway's own id; the client's x-request-id is kept as
data (echoed back, stored, searchable) and can neither collide with another key's capture nor
shape the viewer's links."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from captures import dump, store
from captures.models import Capture
from gateway.proxy.recorder import Recorder, RecorderSet
from gateway.wiring import build_proxy_app
from tests.captures.helpers import record
from tests.proxy.helpers import FakeUpstream, call, channel, provider, snapshot

CRAFTED = "../../admin/auth/user/"


class Seen(Recorder):
    def __init__(self, ex, out):
        out.append((ex.request_id, ex.client_request_id))


@pytest.mark.asyncio
async def test_the_request_identity_is_ours_and_the_client_id_is_data():
    up = FakeUpstream()
    await up.start()
    app = build_proxy_app()
    seen: list[tuple[str, str | None]] = []
    app.runtime.recorders = RecorderSet([lambda ex, snap, key, raw: Seen(ex, seen)])
    try:
        app.holder.set(snapshot([provider(1, [channel(1, base_url=f"{up.base}/ok/v1", models={"m": "m"})])]))
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        first = await call(app, "POST", "/v1/chat/completions", body, headers={"x-request-id": CRAFTED})
        second = await call(app, "POST", "/v1/chat/completions", body, headers={"x-request-id": CRAFTED})
    finally:
        await app.client.close()
        await up.stop()
    assert first.status == second.status == 200
    assert first.headers["x-request-id"] == CRAFTED  # still echoed for the client's correlation
    assert first.headers["x-gateway-request-id"] != second.headers["x-gateway-request-id"]
    assert [c for _i, c in seen] == [CRAFTED, CRAFTED]
    assert seen[0][0] != seen[1][0] and all(i.isalnum() for i, _c in seen)


@pytest.mark.django_db
def test_client_id_is_stored_searchable_and_not_the_link(client):
    rec = record("a1b2c3", client_request_id=CRAFTED)
    data, meta = dump.build(rec)
    store.save(meta.as_dict(), dump.compress(data))
    cap = Capture.objects.get()
    assert cap.request_id == "a1b2c3" and cap.client_request_id == CRAFTED
    client.force_login(User.objects.create_superuser("root", "r@x.io", "pw"))
    page = client.get("/captures/", {"request_id": CRAFTED}).content.decode()
    assert 'href="/captures/a1b2c3/"' in page and 'href="/captures/../' not in page
    assert (
        client.get("/api/captures/", {"request_id": CRAFTED}).json()["results"][0]["request_id"] == "a1b2c3"
    )
