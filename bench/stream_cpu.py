"""Python CPU per streamed SSE event on the gateway's stream path, in one process (issue 20).

Drives the real ``StreamPump`` (``gateway.proxy.stream``): upstream SSE bytes -> ``SSEParser`` ->
the upstream protocol's stream decoder -> ``StreamChain`` (empty: no response rules) and the
recorder hooks -> the client's stream encoder -> ``Exchange.write`` -> an ASGI ``send`` that
keeps the bytes. No HTTP server, no sockets: what is left is the gateway's own Python per event.
The recorder is the production pair for a key without captures (the observe recorder and the
request-log recorder, fanned out), unless ``--recorder null``. Every upstream read is timed as a
production attempt's are (idle 120 s, total 300 s), unless ``--no-timeouts``.

    .venv/bin/python bench/stream_cpu.py [--events 3000] [--runs 7] [--per-chunk 1]
        [--cases chat-chat,messages-chat] [--recorder prod|null] [--no-timeouts]

Per case: µs of process CPU per upstream text delta (``time.process_time``, the minimum and the
median over the runs: load on a shared machine only adds), Python function calls per delta and
C calls per delta (``sys.setprofile``, one separate run: deterministic), and a SHA-256 of the
client's bytes (ids and timestamps pinned) so that a change can be checked byte for byte.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")

WORDS = ["Hello", " world", ",", " this", " is", " a", " streamed", " answer", " — ", " ünïcode", "\n"]


def chat_upstream(n: int) -> list[bytes]:
    """An OpenAI-style Chat stream: role chunk, ``n`` content deltas, finish, usage, [DONE]."""
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1700000000, "model": "m"}

    def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        body = {**head, "system_fingerprint": "fp_x", "choices": [choice], **more}
        return b"data: " + orjson.dumps(body) + b"\n\n"

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"content": WORDS[i % len(WORDS)]}) for i in range(n)]
    frames.append(chunk({}, "stop"))
    usage = {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": n + 10}
    frames.append(b"data: " + orjson.dumps({**head, "choices": [], "usage": usage}) + b"\n\n")
    frames.append(b"data: [DONE]\n\n")
    return frames


def messages_upstream(n: int) -> list[bytes]:
    """An Anthropic Messages stream with one text block of ``n`` deltas."""

    def ev(name: str, body: dict[str, Any]) -> bytes:
        return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(body) + b"\n\n"

    usage = {"input_tokens": 10, "output_tokens": 1}
    msg = {"id": "msg_bench", "type": "message", "role": "assistant", "model": "m", "content": []}
    frames = [ev("message_start", {"type": "message_start", "message": {**msg, "usage": usage}})]
    frames.append(
        ev(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        )
    )
    for i in range(n):
        delta = {"type": "text_delta", "text": WORDS[i % len(WORDS)]}
        frames.append(ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
    frames.append(ev("content_block_stop", {"type": "content_block_stop", "index": 0}))
    done = {"stop_reason": "end_turn", "stop_sequence": None}
    frames.append(
        ev("message_delta", {"type": "message_delta", "delta": done, "usage": {"output_tokens": n}})
    )
    frames.append(ev("message_stop", {"type": "message_stop"}))
    return frames


CASES = {
    "chat-chat": ("chat_completion", "chat_completion", chat_upstream),
    "messages-chat": ("messages", "chat_completion", messages_upstream),
    "chat-messages": ("chat_completion", "messages", chat_upstream),
}


class _Content:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def _gen(self) -> Any:
        for c in self.chunks:
            yield c

    def iter_any(self) -> Any:
        return self._gen()


def _pin_ids() -> None:
    """Fixed ids and timestamps in the encoders so that the output digest is stable."""
    from gateway.protocols.chat import stream_encode as chat_enc

    chat_enc.chat_id = lambda _=None: "chatcmpl-pinned"  # type: ignore[assignment]
    chat_enc.time = SimpleNamespace(time=lambda: 1700000000)  # type: ignore[assignment]
    from gateway.protocols.messages import stream_encode as msg_enc

    if hasattr(msg_enc, "new_id"):
        msg_enc.new_id = lambda prefix="": prefix + "pinned"  # type: ignore[assignment]


def _recorder(kind: str, ex: Any) -> Any:
    from gateway.proxy.recorder import NULL_RECORDER

    if kind == "null":
        return NULL_RECORDER
    from requestlogs.recorder import RequestLogRecorder

    return RequestLogRecorder(ex, SimpleNamespace(name="bench", id=None), 100, "none")


async def one_stream(case: str, chunks: list[bytes], recorder: str, timeouts: bool = True) -> bytes:
    """Relay one upstream stream through ``StreamPump``; the client's bytes."""
    from gateway.protocols import codec
    from gateway.protocols.base import EncodeContext
    from gateway.proxy.chain import TransformContext
    from gateway.proxy.exchange import Exchange
    from gateway.proxy.stream import StreamLimits, StreamPump

    upstream, client, _ = CASES[case]
    sent: list[bytes] = []

    async def send(msg: dict[str, Any]) -> None:
        if msg["type"] == "http.response.body":
            sent.append(msg["body"])

    ex = Exchange(send, "chat" if client == "chat_completion" else client, "rid", time.perf_counter())
    ex.start_stream()
    rec = _recorder(recorder, ex)
    ex.recorder = rec
    rt = SimpleNamespace(
        breaker=None, stream_first_byte_timeout=0.0, stream_idle_timeout=0.0, stream_max_seconds=0.0
    )

    def new_encoder(source: str | None) -> Any:
        return codec(client).StreamEncoder(
            EncodeContext(model="bench", source_protocol=source, include_usage=True)
        )

    call = SimpleNamespace(rt=rt, ex=ex, rec=rec, new_encoder=new_encoder)
    att = SimpleNamespace(
        provider=SimpleNamespace(circuit_breaker_enabled=False),
        channel=SimpleNamespace(protocol=upstream, name="c", id=1),
        codec=codec(upstream),
        response_rules=[],
        tctx=TransformContext(logical_model="bench", client_protocol=client, stream=True),
        secrets=(),
        # the defaults of a production attempt (SettingsSnap): every upstream read is timed
        total_timeout=300.0 if timeouts else 0.0,
        idle_timeout=120.0 if timeouts else 0.0,
        response_id=None,
        completed=False,
    )
    resp = SimpleNamespace(content=_Content(chunks))
    pump = StreamPump(call, att, resp, StreamLimits(call, att))  # type: ignore[arg-type]
    await pump.run()
    return b"".join(sent)


def _group(frames: list[bytes], per_chunk: int) -> list[bytes]:
    return [b"".join(frames[i : i + per_chunk]) for i in range(0, len(frames), per_chunk)]


def measure(case: str, args: argparse.Namespace) -> dict[str, Any]:
    chunks = _group(CASES[case][2](args.events), args.per_chunk)
    loop = asyncio.new_event_loop()
    out = loop.run_until_complete(
        one_stream(case, chunks, args.recorder, not args.no_timeouts)
    )  # warm-up, digest
    cpu = []
    for _ in range(args.runs):
        t = time.process_time()
        loop.run_until_complete(one_stream(case, chunks, args.recorder, not args.no_timeouts))
        cpu.append((time.process_time() - t) / args.events * 1e6)
    counts = {"call": 0, "c_call": 0}

    def prof(frame: Any, event: str, arg: Any) -> None:
        if event in counts:
            counts[event] += 1

    sys.setprofile(prof)
    loop.run_until_complete(one_stream(case, chunks, args.recorder, not args.no_timeouts))
    sys.setprofile(None)
    loop.close()
    return {
        "case": case,
        "cpu_us_min": min(cpu),
        "cpu_us_median": statistics.median(cpu),
        "py_calls": counts["call"] / args.events,
        "c_calls": counts["c_call"] / args.events,
        "bytes": len(out),
        "sha256": hashlib.sha256(out).hexdigest()[:16],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=3000, help="text deltas per stream")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--per-chunk", type=int, default=1, help="SSE events per upstream read")
    parser.add_argument("--cases", default="chat-chat,messages-chat,chat-messages")
    parser.add_argument("--recorder", choices=("prod", "null"), default="prod")
    parser.add_argument(
        "--no-timeouts",
        action="store_true",
        help="untimed upstream reads (the default times them as production does)",
    )
    args = parser.parse_args()
    import django

    django.setup()
    _pin_ids()
    print(
        f"events={args.events} per_chunk={args.per_chunk} recorder={args.recorder} runs={args.runs} "
        f"timeouts={not args.no_timeouts}"
        f" python={sys.version.split()[0]}"
    )
    print(f"{'case':<15} {'µs/ev min':>10} {'median':>8} {'py calls':>9} {'C calls':>8}  bytes      sha256")
    for case in args.cases.split(","):
        r = measure(case, args)
        print(
            f"{r['case']:<15} {r['cpu_us_min']:>10.2f} {r['cpu_us_median']:>8.2f} {r['py_calls']:>9.1f}"
            f" {r['c_calls']:>8.1f}  {r['bytes']:<10} {r['sha256']}"
        )


if __name__ == "__main__":
    main()
