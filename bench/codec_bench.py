"""Codec micro-benchmark: what the protocol layer costs per request and per stream, for every
client protocol × upstream protocol (CPU only, no network, no Django request handling).

Three measurements per cell, each the median over several runs of µs per operation:

- **request**: a typical client body (10 messages: system, user/assistant turns, one tool call and
  its result; 5 function tools) already parsed → ``decode_request`` → upstream ``encode_request``.
  The second column, **request (full)**, is what the proxy does per attempt on the same body:
  ``orjson.loads`` of the client bytes → decode → ``prepare_before_chains`` /
  ``prepare_after_chains`` → encode → ``orjson.dumps`` of the upstream body (no rules).
- **stream**: upstream SSE bytes of a 100-event answer (reasoning, text, one tool call whose
  arguments arrive in fragments), fed one upstream frame per read as from a socket →
  ``SSEParser`` → upstream ``StreamDecoder`` → client ``StreamEncoder``; also µs per event.
- **response**: a whole upstream response body (reasoning, text, a tool call) →
  ``decode_response`` → client ``encode_response``.

Upstream bodies and streams are produced by the bundled mock upstream's hand-written wire
modules (never by our codecs), so every decoder sees realistic shapes.

Not a test and not part of ``make test``: tests never assert on time. Run it on an idle machine::

    .venv/bin/python bench/codec_bench.py [--runs 9] [--min-time 0.05] [--out bench/CODEC_RESULTS.md]

It prints a Markdown table and writes it to ``bench/CODEC_RESULTS.md``.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")

from gateway.mock_upstream.behaviour import ToolCall, Turn, signature_for  # noqa: E402
from gateway.mock_upstream.wire import WireContext  # noqa: E402
from gateway.mock_upstream.wire import chat as wire_chat  # noqa: E402
from gateway.mock_upstream.wire import gemini as wire_gemini  # noqa: E402
from gateway.mock_upstream.wire import messages as wire_messages  # noqa: E402
from gateway.mock_upstream.wire import responses as wire_responses  # noqa: E402
from gateway.protocols import CLIENT_PROTOCOLS, UPSTREAM_PROTOCOLS, codec  # noqa: E402
from gateway.protocols.base import EncodeContext  # noqa: E402
from gateway.protocols.sse import SSEParser  # noqa: E402
from gateway.proxy.prepare import prepare_after_chains, prepare_before_chains  # noqa: E402

WIRES = {
    "chat_completion": wire_chat,
    "responses": wire_responses,
    "messages": wire_messages,
    "gemini": wire_gemini,
}
STREAM_EVENTS = 100
LOGICAL_MODEL = "bench-logical"
UPSTREAM_MODEL = "bench-upstream"

# -- the typical request ---------------------------------------------------------------------------

TOOL_NAMES = ("get_weather", "get_time", "search_docs", "read_file", "write_file")


def _schema(i: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": f"What to look up ({i})"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            "flags": {"type": "array", "items": {"type": "string", "enum": ["fast", "exact", "recent"]}},
        },
        "required": ["query"],
        "additionalProperties": False,
    }


SYSTEM = "You are a careful assistant for an engineering team. Answer briefly and cite files by path."
TURNS = [
    "Where is the retry policy for upstream calls configured?",
    "It lives in providers/routing.py, in the function that orders channels by weight.",
    "And how many attempts does it make before giving up on a provider?",
    "By default three attempts per provider, then it moves to the next provider by priority.",
    "Can you check the weather in Paris for the offsite next week?",
]
CALL_ARGS = '{"query": "Paris", "limit": 3}'
RESULT = "Paris: 18C, light rain on Tuesday, sunny from Wednesday."
FINAL = ["Thanks. Summarise the three points above as a bullet list for the wiki page, please."]


def chat_body() -> dict[str, Any]:
    """10 messages: system, 5 alternating user/assistant turns, an assistant tool call, its
    result, an assistant answer and a final user turn; 5 function tools."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    messages += [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(TURNS)]
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_weather_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": CALL_ARGS},
                }
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": "call_weather_1", "content": RESULT})
    messages.append({"role": "assistant", "content": "Light rain on Tuesday, sunny afterwards."})
    messages += [{"role": "user", "content": t} for t in FINAL]
    assert len(messages) == 10
    tools = [
        {
            "type": "function",
            "function": {"name": n, "description": f"The {n} tool.", "parameters": _schema(i)},
        }
        for i, n in enumerate(TOOL_NAMES)
    ]
    return {
        "model": LOGICAL_MODEL,
        "messages": messages,
        "tools": tools,
        "temperature": 0.2,
        "max_tokens": 1024,
    }


def responses_body() -> dict[str, Any]:
    """The same conversation as 10 Responses input items (a developer message first)."""
    items: list[dict[str, Any]] = [{"role": "developer", "content": SYSTEM}]
    items += [
        {"role": "user", "content": t}
        if i % 2 == 0
        else {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": t}]}
        for i, t in enumerate(TURNS)
    ]
    items.append(
        {"type": "function_call", "call_id": "call_weather_1", "name": "get_weather", "arguments": CALL_ARGS}
    )
    items.append({"type": "function_call_output", "call_id": "call_weather_1", "output": RESULT})
    items.append(
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Light rain on Tuesday, sunny afterwards."}],
        }
    )
    items += [{"role": "user", "content": t} for t in FINAL]
    assert len(items) == 10
    tools = [
        {"type": "function", "name": n, "description": f"The {n} tool.", "parameters": _schema(i)}
        for i, n in enumerate(TOOL_NAMES)
    ]
    return {
        "model": LOGICAL_MODEL,
        "input": items,
        "tools": tools,
        "temperature": 0.2,
        "max_output_tokens": 1024,
    }


def messages_body() -> dict[str, Any]:
    """The same conversation in Anthropic Messages (system + 9 messages; the tool call and the
    assistant text around it are content blocks, as Messages requires)."""
    messages: list[dict[str, Any]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(TURNS)
    ]
    messages.append(
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_weather_1",
                    "name": "get_weather",
                    "input": orjson.loads(CALL_ARGS),
                }
            ],
        }
    )
    messages.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_weather_1", "content": RESULT}],
        }
    )
    messages.append({"role": "assistant", "content": "Light rain on Tuesday, sunny afterwards."})
    messages += [{"role": "user", "content": t} for t in FINAL]
    assert len(messages) == 9  # + the system prompt = 10 messages
    tools = [
        {"name": n, "description": f"The {n} tool.", "input_schema": _schema(i)}
        for i, n in enumerate(TOOL_NAMES)
    ]
    return {
        "model": LOGICAL_MODEL,
        "system": SYSTEM,
        "messages": messages,
        "tools": tools,
        "temperature": 0.2,
        "max_tokens": 1024,
    }


CLIENT_BODIES: dict[str, Callable[[], dict[str, Any]]] = {
    "chat_completion": chat_body,
    "responses": responses_body,
    "messages": messages_body,
}

# -- the upstream answer ---------------------------------------------------------------------------

REASONING = "The user wants the weather for the offsite so I should call the weather tool for Paris first"


def _turn(words: int) -> Turn:
    text = " ".join(f"word{i}" for i in range(words))
    reasoning = REASONING
    return Turn(
        text=text,
        reasoning=reasoning,
        reasoning_signature=signature_for(reasoning),
        tool_calls=[
            ToolCall(
                "get_weather", '{"query": "Paris, France", "limit": 3, "flags": ["recent"]}', "call_bench_1"
            )
        ],
        input_tokens=420,
        output_tokens=80 + words,
        reasoning_tokens=20,
    )


def _ctx() -> WireContext:
    return WireContext(
        model=UPSTREAM_MODEL,
        response_id="0123456789abcdef01234567",
        created=1796032299,
        arg_chunk=12,
        include_usage=True,
    )


def _words_for(protocol: str) -> int:
    """The text length (in words, one upstream event each) that makes the stream
    ``STREAM_EVENTS`` events long (``[DONE]`` counts) for this upstream protocol."""
    wire = WIRES[protocol]
    for words in range(1, 400):
        count = sum(1 for _ in wire.stream(_turn(words), _ctx()))
        if count >= STREAM_EVENTS:
            assert count == STREAM_EVENTS, f"{protocol}: {count} frames"
            return words
    raise AssertionError(f"{protocol}: could not build a {STREAM_EVENTS}-event stream")


def upstream_stream(protocol: str) -> list[bytes]:
    """Upstream SSE frames of exactly ``STREAM_EVENTS`` events, as the mock would send them."""
    return list(WIRES[protocol].stream(_turn(_words_for(protocol)), _ctx()))


def upstream_response(protocol: str) -> dict[str, Any]:
    return WIRES[protocol].respond(_turn(40), _ctx())


# -- the operations --------------------------------------------------------------------------------


def op_request(client: str, upstream: str) -> Callable[[], Any]:
    ccodec, ucodec = codec(client), codec(upstream)
    body = CLIENT_BODIES[client]()
    ctx = EncodeContext(model=UPSTREAM_MODEL, source_protocol=client)

    def run() -> Any:
        return ucodec.encode_request(ccodec.decode_request(body), ctx)

    run()  # fail loudly before timing
    return run


def op_request_full(client: str, upstream: str) -> Callable[[], Any]:
    ccodec, ucodec = codec(client), codec(upstream)
    raw = orjson.dumps(CLIENT_BODIES[client]())

    def run() -> bytes:
        req = ccodec.decode_request(orjson.loads(raw))
        req.model = UPSTREAM_MODEL
        prepare_before_chains(
            req, upstream_protocol=upstream, source_protocol=client, strip_nested=True, extra_whitelist=None
        )
        prepare_after_chains(req, upstream_protocol=upstream, source_protocol=client)
        return orjson.dumps(
            ucodec.encode_request(req, EncodeContext(model=UPSTREAM_MODEL, source_protocol=client))
        )

    run()
    return run


def op_stream(client: str, upstream: str) -> Callable[[], Any]:
    ccodec, ucodec = codec(client), codec(upstream)
    frames = upstream_stream(upstream)

    def run() -> list[bytes]:
        parser = SSEParser()
        decoder = ucodec.StreamDecoder()
        encoder = ccodec.StreamEncoder(EncodeContext(model=LOGICAL_MODEL, source_protocol=upstream))
        out = []
        for chunk in frames:
            for name, data in parser.feed(chunk):
                for event in decoder.feed(name, data):
                    out.append(encoder.encode(event))
        for name, data in parser.close():
            for event in decoder.feed(name, data):
                out.append(encoder.encode(event))
        for event in decoder.close():
            out.append(encoder.encode(event))
        return out

    written = b"".join(run())
    # The client stream must carry the whole answer, or we would be timing an error path.
    last_word = f"word{_words_for(upstream) - 1}".encode()
    assert b"get_weather" in written and last_word in written, f"{client} <- {upstream}: incomplete stream"
    return run


def op_response(client: str, upstream: str) -> Callable[[], Any]:
    ccodec, ucodec = codec(client), codec(upstream)
    body = upstream_response(upstream)
    ctx = EncodeContext(model=LOGICAL_MODEL, source_protocol=upstream)

    def run() -> Any:
        return ccodec.encode_response(ucodec.decode_response(body), ctx)

    run()
    return run


# -- timing ----------------------------------------------------------------------------------------


def calibrate(fn: Callable[[], Any], min_time: float) -> int:
    """Loop count for one run of ``fn`` to last at least ``min_time`` seconds (also a warm-up)."""
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        if time.perf_counter() - start >= min_time:
            return number
        number *= 2


def time_once(fn: Callable[[], Any], number: int) -> float:
    """µs per call over one run of ``number`` calls."""
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number * 1e6


def measure_all(
    ops: dict[tuple[str, str, str], Callable[[], Any]], *, runs: int, min_time: float
) -> dict[tuple[str, str, str], float]:
    """Median µs per call of every operation. The runs are interleaved (pass 1 over every
    operation, then pass 2...), so load from other processes on a shared machine spreads over
    all cells instead of inflating whichever cells ran during a busy second."""
    numbers = {key: calibrate(fn, min_time) for key, fn in ops.items()}
    samples: dict[tuple[str, str, str], list[float]] = {key: [] for key in ops}
    for _ in range(runs):
        gc.collect()
        for key, fn in ops.items():
            samples[key].append(time_once(fn, numbers[key]))
    return {key: statistics.median(values) for key, values in samples.items()}


def build_report(
    results: dict[tuple[str, str], dict[str, float]], *, runs: int, min_time: float, total_seconds: float
) -> str:
    lines = [
        "# Codec benchmark",
        "",
        f"Generated by `bench/codec_bench.py` on {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}; "
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs (shared with other "
        f"work while measured: load average {os.getloadavg()[0]:.1f} at the end); median of {runs} interleaved "
        f"runs, each at least {min_time * 1000:.0f} ms; {total_seconds:.0f} s in total.",
        "",
        "µs per operation, CPU only (no network, no Django request handling):",
        "",
        "- **request**: a parsed client body of 10 messages and 5 function tools → `decode_request` → upstream "
        "`encode_request`;",
        "- **request (full)**: the same from client bytes, with `orjson.loads`, the per-attempt "
        "`prepare_before_chains`/`prepare_after_chains` and `orjson.dumps` of the upstream body (no rules);",
        f"- **stream**: {STREAM_EVENTS} upstream SSE events (reasoning, text, a tool call with fragmented arguments), "
        "one frame per read → `SSEParser` → upstream `StreamDecoder` → client `StreamEncoder`; **/event** is "
        f"that divided by {STREAM_EVENTS};",
        "- **response**: a whole upstream response (reasoning, text, a tool call) → `decode_response` → client "
        "`encode_response`.",
        "",
        "| client → upstream | request | request (full) | stream (100 events) | stream /event | response |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (client, upstream), r in results.items():
        lines.append(
            f"| {client} → {upstream} | {r['request']:.1f} | {r['request_full']:.1f} | {r['stream']:.0f} | "
            f"{r['stream'] / STREAM_EVENTS:.2f} | {r['response']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="timed runs per cell (the median is reported)")
    parser.add_argument("--min-time", type=float, default=0.05, help="seconds each run lasts at least")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "CODEC_RESULTS.md")
    args = parser.parse_args(argv)

    import django

    django.setup()  # some codecs read settings lazily; nothing here touches the database
    started = time.perf_counter()
    makers = (
        ("request", op_request),
        ("request_full", op_request_full),
        ("stream", op_stream),
        ("response", op_response),
    )
    ops = {
        (client, upstream, name): make(client, upstream)
        for client in CLIENT_PROTOCOLS
        for upstream in UPSTREAM_PROTOCOLS
        for name, make in makers
    }
    timings = measure_all(ops, runs=args.runs, min_time=args.min_time)
    results: dict[tuple[str, str], dict[str, float]] = {}
    for (client, upstream, name), value in timings.items():
        results.setdefault((client, upstream), {})[name] = value
    report = build_report(
        results, runs=args.runs, min_time=args.min_time, total_seconds=time.perf_counter() - started
    )
    print()
    print(report)
    args.out.write_text(report, encoding="utf-8")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
