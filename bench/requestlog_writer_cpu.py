"""CPU per row of the request-log writer without Redis, in-process (``thread_time``, ns resolution).

Two measurements, each in a fresh SQLite file in a temporary directory:

1. ``store``: ``requestlogs.store.save_rows`` on batches of ``--batch`` rows shaped like the
   recorder's (ids as the gateway makes them: a per-process prefix and a counter), the writer's
   CPU per row; once alone and once with a second thread spinning in Python (a stand-in for the
   busy event loop: it takes the GIL back whenever the driver gives it up);
2. ``queue``: the hand-off's queue per record, writer side (``HandOff._drain`` and ``_done``
   against ``get_nowait`` and ``task_done`` per record).

    .venv/bin/python bench/requestlog_writer_cpu.py [--batch 750] [--batches 12]

On a shared machine run it several times (and against a baseline checkout with ``cd``): the
spread between runs is a few microseconds per row.
"""

from __future__ import annotations

import argparse
import itertools
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
_tmp = tempfile.mkdtemp(prefix="gw-rlw-")
os.environ["GATEWAY_DATA_DIR"] = _tmp
os.environ["DATABASE_URL"] = f"sqlite:///{_tmp}/bench.sqlite3"

ROW = {
    "x_request_id": "",
    "client_request_id": "",
    "api_key_id": None,
    "api_key_name": "k",
    "client_protocol": "chat_completion",
    "endpoint": "chat",
    "stream": False,
    "client_ip": "127.0.0.1",
    "logical_model": "gpt-4o",
    "upstream_model": "gpt-4o-2024",
    "provider": "acme",
    "channel": "main",
    "provider_ref": 1,
    "channel_ref": 2,
    "affinity": False,
    "input_tokens": 1200,
    "output_tokens": 300,
    "cache_read_tokens": 200,
    "cache_write_tokens": 0,
    "reasoning_tokens": 0,
    "cost_nano": 11340000,
    "cost_estimated": False,
    "status": "success",
    "http_status": 200,
    "error_code": "",
    "error_message": "",
    "duration_ms": 0.43,
    "ttfb_ms": 0.41,
    "has_capture": False,
}
_prefix = uuid.uuid4().hex[:16]
_count = itertools.count()


def rows(n: int) -> list[dict]:
    out = []
    now = time.time()
    for i in range(n):
        rid = f"{_prefix}{next(_count):016x}"
        attempt = {"provider": "acme", "channel": "main", "upstream_model": "gpt-4o-2024", "status": 200}
        out.append(
            {
                **ROW,
                "request_id": rid,
                "x_request_id": rid,
                "created_at": now + i * 1e-5,
                "attempts": [attempt],
            }
        )
    return out


def store_cpu(batch: int, batches: int, busy: bool) -> float:
    """The writer's CPU per row of ``save_rows`` (the first two batches are warm-up)."""
    from requestlogs import store

    stop = threading.Event()

    def spin() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            if n % 1000 == 0:  # the loop's poll gives the GIL up now and then
                time.sleep(0)

    spinner = threading.Thread(target=spin, daemon=True)
    if busy:
        spinner.start()
    spent = 0.0
    for i in range(batches):
        todo = rows(batch)
        cpu = time.thread_time()
        store.save_rows(todo)
        if i >= 2:
            spent += time.thread_time() - cpu
    stop.set()
    return spent * 1e6 / (batch * (batches - 2))


def queue_cpu(batch: int) -> tuple[float, float]:
    """Writer-side CPU per record of taking a batch off the queue and marking it done:
    (one call per record, ``HandOff._drain`` + ``_done``)."""
    from requestlogs.sink import Writer

    writer = Writer()
    per_call, drained = [], []
    for _ in range(20):
        for record in range(batch):
            writer.queue.put_nowait(record)
        cpu = time.thread_time()
        got = []
        while len(got) < batch:
            try:
                got.append(writer.queue.get_nowait())
            except queue.Empty:
                break
        for _ in got:
            writer.queue.task_done()
        per_call.append(time.thread_time() - cpu)
        for record in range(batch):
            writer.queue.put_nowait(record)
        cpu = time.thread_time()
        got = []
        writer._drain(got)
        writer._done(len(got))
        drained.append(time.thread_time() - cpu)
    return statistics.median(per_call) * 1e6 / batch, statistics.median(drained) * 1e6 / batch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=750)
    parser.add_argument("--batches", type=int, default=12)
    args = parser.parse_args()
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from requestlogs import sink

    call_command("migrate", verbosity=0)
    sink.writer._relax_sqlite(connection)  # what the writer thread's connection runs with
    idle = store_cpu(args.batch, args.batches, busy=False)
    busy = store_cpu(args.batch, args.batches, busy=True)
    print(
        f"save_rows, {args.batch} rows a batch: {idle:.1f} us/row alone, {busy:.1f} us/row beside a busy thread"
    )
    if hasattr(sink.writer, "_drain"):
        one, drained = queue_cpu(args.batch)
        print(
            f"queue, writer side: {one:.2f} us/record one call each, {drained:.2f} us/record drained at once"
        )


if __name__ == "__main__":
    main()
