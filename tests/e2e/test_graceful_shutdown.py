"""Graceful shutdown of the production server (uvicorn subprocess): on SIGTERM it stops accepting,
the stream in flight runs to its end, the captures queued by then are persisted (or spooled,
never lost) and the process exits cleanly. ``/readyz`` answers ready before."""

from __future__ import annotations

import signal
import threading
import time

import httpx
import orjson
import pytest

from tests.servers import GatewayServer, make_key, make_route

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_sigterm_lets_the_stream_finish_flushes_captures_and_exits(transactional_db, mock_upstream, tmp_path):
    from captures.models import Capture

    make_route(
        "chat_completion",
        "slow-stream",
        mock_upstream.base_url("chat_completion", "frame-delay=0.25"),
        upstream_model="up-slow",
    )
    make_route(
        "chat_completion", "quick", mock_upstream.base_url("chat_completion"), upstream_model="up-quick"
    )
    _, secret = make_key("shutdown", capture_mode="all")
    server = GatewayServer(
        {"GATEWAY_DATA_DIR": str(tmp_path), "GATEWAY_SHUTDOWN_GRACE_SECONDS": "20"}, name="gateway-shutdown"
    ).start()
    try:
        server.wait_config()
        ready = server.client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        headers = {"authorization": f"Bearer {secret}"}
        words = " ".join(f"w{i}" for i in range(12))
        chunks: list[bytes] = []
        first = threading.Event()
        outcome: dict[str, object] = {}

        def stream() -> None:
            body = {"model": "slow-stream", "stream": True, "messages": [{"role": "user", "content": words}]}
            try:
                with httpx.stream(
                    "POST", server.url + "/v1/chat/completions", json=body, headers=headers, timeout=30
                ) as reply:
                    outcome["status"] = reply.status_code
                    for chunk in reply.iter_bytes():
                        chunks.append(chunk)
                        first.set()
            except Exception as exc:  # reported by the assertion below
                outcome["error"] = repr(exc)
            first.set()

        worker = threading.Thread(target=stream)
        worker.start()
        with httpx.Client(base_url=server.url, headers=headers, timeout=10) as client:
            for i in range(10):  # their captures are queued around the SIGTERM
                reply = client.post(
                    "/v1/chat/completions",
                    json={"model": "quick", "messages": [{"role": "user", "content": f"q{i}"}]},
                )
                assert reply.status_code == 200
        assert first.wait(10)
        t_term = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        with pytest.raises(httpx.TransportError):  # stopped accepting
            httpx.get(server.url + "/healthz", timeout=2)
        # uvicorn (>= 0.29) re-raises the SIGTERM it handled once its shutdown is complete, so a
        # clean exit is "terminated by SIGTERM" after the lifespan shutdown, not a crash or a kill.
        assert server.proc.wait(timeout=30) in (0, -signal.SIGTERM)
        log = server.log_tail()
        assert "Application shutdown complete." in log and "Finished server process" in log
        worker.join(10)
        took = time.monotonic() - t_term
        text = b"".join(chunks).decode()
        assert outcome.get("status") == 200 and "error" not in outcome, outcome
        assert text.rstrip().endswith("data: [DONE]")
        content = "".join(
            orjson.loads(line[6:])["choices"][0]["delta"].get("content") or ""
            for line in text.splitlines()
            if line.startswith("data: {") and '"choices":[{' in line
        )
        assert content == f"Echo: {words}"
        assert took > 1.0  # the stream (12 frames, 0.25 s apart) really was still running at SIGTERM
        rows = set(Capture.objects.values_list("request_id", flat=True))
        spool = tmp_path / "capture-spool"
        spooled = [p for p in spool.iterdir() if p.suffix == ".cap"] if spool.exists() else []
        assert len(rows) + len(spooled) == 11, (len(rows), len(spooled))
    finally:
        server.stop()
