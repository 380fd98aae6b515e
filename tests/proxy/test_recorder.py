"""The Recorder hooks: which hooks a request walks (whole, streamed, failed over), several
recorders on one request, and the do-nothing recorder when no factory wants the request."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gateway.crypto import hash_api_key
from gateway.live_config import DatabaseConfigSource
from gateway.proxy.app import ProxyApp
from gateway.proxy.recorder import HOOKS, NULL_RECORDER, FanOutRecorder, Recorder, RecorderSet
from gateway.wiring import authenticate, proxy_config

from .helpers import SECRET, call, channel, key, provider, snapshot

pytestmark = pytest.mark.asyncio
CHAT = "/v1/chat/completions"


class Log(Recorder):
    """Records hook names (and a few arguments) in order."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: list[str] = []


def _logging(name):
    def hook(self, *args):
        self.seen.append(name)

    return hook


for _name in HOOKS:
    setattr(Log, _name, _logging(_name))


def make_app(upstream, factories, *, first="ok"):
    app = ProxyApp(proxy_config(), DatabaseConfigSource(), authenticate, RecorderSet(factories))
    app.holder.set(
        snapshot(
            [
                provider(1, [channel(1, base_url=f"{upstream.base}/{first}", models={"m": "m"})]),
                provider(2, [channel(2, base_url=f"{upstream.base}/ok", models={"m": "m"})], priority=1),
            ],
            keys={hash_api_key(SECRET): key()},
        )
    )
    return app


def body(**kw):
    return {"model": "m", "messages": [{"role": "user", "content": "q"}], **kw}


async def test_whole_request_walks_the_hooks_in_order(upstream):
    logs: list[Log] = []
    app = make_app(upstream, [lambda ex, snap, k, raw: logs.append(Log()) or logs[-1]])
    try:
        assert (await call(app, "POST", CHAT, body())).status == 200
    finally:
        await app.client.close()
    assert logs[0].seen == [
        "on_request_body",
        "on_request_decoded",
        "on_attempt_start",
        "on_upstream_response",
        "on_upstream_body",
        "on_response",
        "on_client_response",
        "on_attempt_done",
        "on_finish",
    ]


async def test_stream_with_failover_walks_the_hooks(upstream):
    logs: list[Log] = []
    app = make_app(upstream, [lambda ex, snap, k, raw: logs.append(Log()) or logs[-1]], first="s500")
    try:
        reply = await call(app, "POST", CHAT, body(stream=True))
        assert reply.status == 200
    finally:
        await app.client.close()
    seen = logs[0].seen
    assert seen[:6] == [
        "on_request_body",
        "on_request_decoded",
        "on_attempt_start",
        "on_upstream_response",
        "on_upstream_body",
        "on_attempt_failed",
    ]
    assert seen[6:8] == ["on_attempt_start", "on_upstream_response"]
    assert "on_upstream_frame" in seen and "on_response_events" in seen and "on_client_frame" in seen
    assert seen.count("on_usage") == 1
    assert seen.index("on_usage") < seen.index("on_client_frame") < seen.index("on_stream_end")
    assert seen[-3:] == ["on_stream_end", "on_attempt_done", "on_finish"]


async def test_several_recorders_each_see_the_request_and_none_means_null(upstream):
    a, b = Log(), Log()
    app = make_app(upstream, [lambda *args: a, lambda *args: None, lambda *args: b])
    try:
        assert (await call(app, "POST", CHAT, body())).status == 200
    finally:
        await app.client.close()
    assert a.seen == b.seen and "on_finish" in a.seen

    ex = SimpleNamespace(recorded=False)  # start marks the exchange as followed by a recorder
    assert RecorderSet().start(ex, None, None, b"") is NULL_RECORDER and ex.recorded
    assert RecorderSet([lambda *args: None]).start(ex, None, None, b"") is NULL_RECORDER
    assert RecorderSet([lambda *args: a]).start(ex, None, None, b"") is a
    fan = RecorderSet([lambda *args: a, lambda *args: b]).start(ex, None, None, b"")
    assert isinstance(fan, FanOutRecorder) and fan.recorders == (a, b)


async def test_null_recorder_has_every_hook():
    for name in HOOKS:
        assert callable(getattr(NULL_RECORDER, name))
    assert not hasattr(NULL_RECORDER, "__dict__")  # no per-request state to allocate


# --- hook_of: per-event hooks fetched once (issue 20) ---------------------------------------------


async def test_hook_of_skips_hooks_left_as_the_base_no_op() -> None:
    from gateway.proxy.recorder import NULL_RECORDER, FanOutRecorder, Recorder, hook_of

    seen: list[tuple[str, object]] = []

    class Frames(Recorder):
        def on_upstream_frame(self, name: str | None, payload: str) -> None:
            seen.append(("frames", payload))

    class Both(Recorder):
        def on_upstream_frame(self, name: str | None, payload: str) -> None:
            seen.append(("both", payload))

        def on_client_frame(self, data: bytes) -> None:
            seen.append(("both-client", data))

    assert NULL_RECORDER.hook_of("on_upstream_frame") is None
    frames = Frames()
    assert hook_of(frames, "on_upstream_frame") == frames.on_upstream_frame
    assert hook_of(frames, "on_client_frame") is None
    fan = FanOutRecorder([frames, Recorder()])
    assert fan.hook_of("on_upstream_frame") == frames.on_upstream_frame  # one: no fan-out loop
    assert fan.hook_of("on_response_events") is None
    nested = FanOutRecorder([FanOutRecorder([frames, Both()]), Recorder()])
    hook = nested.hook_of("on_upstream_frame")
    assert hook is not None
    hook(None, "x")
    assert seen == [("frames", "x"), ("both", "x")]  # in order, like the fan-out hooks
    client = nested.hook_of("on_client_frame")
    assert client is not None
    client(b"y")
    assert seen[-1] == ("both-client", b"y")


async def test_hook_of_a_plain_object_is_its_attribute() -> None:
    from gateway.proxy.recorder import hook_of

    class Double:
        def on_client_frame(self, data: bytes) -> None: ...

    double = Double()
    assert hook_of(double, "on_client_frame") == double.on_client_frame


async def test_exchange_resolves_its_client_frame_hook_when_the_recorder_is_set() -> None:
    from gateway.proxy.exchange import Exchange
    from gateway.proxy.recorder import NULL_RECORDER, Recorder

    class Client(Recorder):
        def on_client_frame(self, data: bytes) -> None: ...

    ex = Exchange(None, "chat", "rid", 0.0)
    assert ex.recorder is NULL_RECORDER and ex._on_frame is None
    rec = Client()
    ex.recorder = rec
    assert ex.recorder is rec and ex._on_frame == rec.on_client_frame


class _Counts(Recorder):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_usage(self, usage) -> None:
        self.seen.append("usage")


class _Finishes(Recorder):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_finish(self, ex, error) -> None:
        self.seen.append(f"finish:{error}")


class _Double:
    """Not a Recorder: every hook is looked up on it."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __getattr__(self, name: str):
        return lambda *args: self.seen.append(name)


async def test_fan_out_calls_each_hook_on_the_recorders_that_implement_it_in_order():
    a, b, c = _Counts(), _Finishes(), _Double()
    fan = FanOutRecorder([a, b, c])
    fan.on_usage(None)
    fan.on_finish(None, "boom")
    fan.on_client_frame(b"x")
    assert a.seen == ["usage"] and b.seen == ["finish:boom"]
    assert c.seen == ["on_usage", "on_finish", "on_client_frame"]
    assert FanOutRecorder([_Counts(), _Finishes(), _Double()]).plan is fan.plan  # built once
