"""The staff live tail in a real browser: the page and its WebSocket are served by the
production gateway (uvicorn, the ASGI app routing ``/captures/live/ws`` to Channels, in-memory
channel layer: one worker); a request through the same server shows up as a pending row while
the upstream is slow, then turns into its final status."""

from __future__ import annotations

import os
import threading

import httpx
import pytest

from tests.browser.chromium import needs_chromium
from tests.servers import make_key, make_route

pytestmark = [needs_chromium, pytest.mark.timeout(180)]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def _login(page, base: str, username: str) -> None:
    page.goto(f"{base}/captures/login/?next=/captures/live/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw-live-tail-1")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/captures/live/")


def test_rows_appear_pending_and_turn_final(page, gateway, mock_upstream):
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("tail-staff", password="pw-live-tail-1", is_staff=True)
    make_route(
        "chat_completion", "tail-slow", mock_upstream.base_url("chat_completion", "delay-first-byte=2")
    )
    make_route("chat_completion", "tail-bad", mock_upstream.base_url("chat_completion", "status=400"))
    _, secret = make_key("tail")
    gateway.wait_config()

    _login(page, gateway.url, "tail-staff")
    page.wait_for_selector("#live-state[data-state=open]")

    replies: list[httpx.Response] = []

    def post(model: str) -> None:
        replies.append(
            httpx.post(
                f"{gateway.url}/v1/chat/completions",
                timeout=30,
                headers={"authorization": f"Bearer {secret}"},
                json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
            )
        )

    worker = threading.Thread(target=post, args=("tail-slow",))
    worker.start()
    pending = page.locator("#live-rows tr.live-pending", has_text="tail-slow")
    pending.wait_for(timeout=10000)  # the upstream holds its first byte for 2 s: the row is pending
    assert pending.locator("td").nth(6).inner_text() == "pending"
    worker.join(30)
    rid = replies[0].headers["x-request-id"]
    final = page.locator(f'#live-rows tr.live-final[data-request-id="{rid}"]')
    final.wait_for(timeout=10000)
    cells = final.locator("td")
    assert cells.nth(6).inner_text() == "200"
    assert cells.nth(4).inner_text() == "tail-slow"
    assert cells.nth(9).inner_text() == "1"

    post("tail-bad")
    bad = page.locator(f'#live-rows tr.live-final[data-request-id="{replies[1].headers["x-request-id"]}"]')
    bad.wait_for(timeout=10000)
    assert "row-error" in bad.get_attribute("class")
    assert page.locator("#live-rows tr").count() == 2
    assert page.js_errors == []


def test_non_staff_cannot_open_the_socket(page, gateway):
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("tail-user", password="pw-live-tail-1", is_staff=False)
    page.goto(f"{gateway.url}/captures/login/")
    page.fill("#id_username", "tail-user")
    page.fill("#id_password", "pw-live-tail-1")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    reply = page.goto(f"{gateway.url}/captures/live/")
    assert reply.status == 403
    # the socket itself refuses a non-staff session, whatever page opened it
    state = page.evaluate("""() => new Promise(resolve => {
        const ws = new WebSocket(`ws://${location.host}/captures/live/ws`);
        ws.onopen = () => resolve('open');
        ws.onclose = (e) => resolve('closed ' + e.code);
    })""")
    assert state.startswith("closed")


def test_a_viewer_on_one_process_sees_requests_served_by_another_through_redis(
    page, gateway_factory, mock_upstream
):
    """Two gateway processes sharing Redis (the Redis channel layer): the page's socket is on the
    first, the request goes to the second, which learns of the viewer from the group in Redis."""
    from django.contrib.auth import get_user_model

    from tests.e2e.test_harness import redis_or_skip

    redis_url = redis_or_skip()
    get_user_model().objects.create_user("tail-redis", password="pw-live-tail-1", is_staff=True)
    make_route("chat_completion", "tail-redis", mock_upstream.base_url("chat_completion"))
    _, secret = make_key("tail-redis")
    viewer_side, serving_side = (
        gateway_factory({"REDIS_URL": redis_url}),
        gateway_factory({"REDIS_URL": redis_url}),
    )
    for server in (viewer_side, serving_side):
        server.wait_config()
    _login(page, viewer_side.url, "tail-redis")
    page.wait_for_selector("#live-state[data-state=open]")
    headers = {"authorization": f"Bearer {secret}"}
    body = {"model": "tail-redis", "messages": [{"role": "user", "content": "hi"}]}
    # the serving process polls the group's membership every 2 s: its first request may precede that
    deadline = 20
    rid = None
    for _ in range(deadline * 2):
        reply = httpx.post(f"{serving_side.url}/v1/chat/completions", headers=headers, json=body, timeout=30)
        assert reply.status_code == 200
        rid = reply.headers["x-request-id"]
        try:
            page.locator(f'#live-rows tr.live-final[data-request-id="{rid}"]').wait_for(timeout=500)
            break
        except Exception:
            continue
    row = page.locator(f'#live-rows tr.live-final[data-request-id="{rid}"]')
    assert row.locator("td").nth(6).inner_text() == "200"
    assert row.locator("td").nth(4).inner_text() == "tail-redis"
