"""The production launcher: N uvicorn workers, each with its own ``SO_REUSEPORT`` listening socket
(issue 20), so the kernel spreads new connections evenly over the workers.

``uvicorn --workers N`` lets N processes accept from one shared socket: whichever worker wakes
first takes the connection, and 64 connections opened at once were measured landing 61 / 3 or
1 / 63 (bench/TAIL.md), one core doing the work of two. With one ``SO_REUSEPORT`` socket per worker
the kernel hashes each connection to a socket, and so to a worker. Everything else is uvicorn,
configured as ``make run`` always did (uvloop, the guarded httptools protocol of
``gateway.serving``, lifespan on).

    python -m gateway.launch --host 127.0.0.1 --port 8000 --workers 2 [--timeout-graceful-shutdown 30]

The master process imports nothing of the gateway: it starts the workers, restarts one that
dies, and passes SIGINT/SIGTERM on (each worker then drains its in-flight requests and streams,
as uvicorn does). The transform checks (``transforms.checks.log_problems``) run once per server, in
a short-lived process started beside the workers, not in every worker: they run every transform's
examples, which loads Pillow among others (~4 MB of RSS per worker, for the worker's lifetime).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time

CHECKS_ENV = "GATEWAY_SKIP_START_CHECKS"  # set for every worker: gateway.asgi reads it
# Set for every worker: the admin's autodiscovery waits for the first request Django serves
# (gateway.admin_site; issue 20: a worker that only proxies never loads the admin modules).
DEFER_ADMIN_ENV = "GATEWAY_DEFER_ADMIN"
RESTART_PAUSE = 1.0
STARTUP_SECONDS = 15.0  # a worker that exits this soon after its start failed to start: stop the server


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m gateway.launch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--app", default="gateway.asgi:application")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument(
        "--http",
        default="gateway.serving:GuardedHttpToolsProtocol",
        help="uvicorn's --http: the guarded protocol (timeouts, connection cap) by default",
    )
    p.add_argument("--timeout-keep-alive", type=int, default=5)
    p.add_argument("--timeout-graceful-shutdown", type=int, default=30)
    p.add_argument("--log-level", default="info")
    p.add_argument(
        "--access-log", action="store_true", help="uvicorn's access log (off: the gateway logs its own)"
    )
    p.add_argument("--backlog", type=int, default=2048)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--checks", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def reuseport_socket(host: str, port: int, backlog: int) -> socket.socket:
    """A listening socket that other processes can bind to the same address: the kernel balances."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


def raise_nofile(want: int = 65536) -> None:
    """The soft file-descriptor limit up to the hard one (at most ``want``): a worker holds two
    sockets per stream (client and upstream), and a soft limit of 1,024 would refuse the 513th."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def run_worker(args: argparse.Namespace) -> None:
    """One worker: its own socket, one uvicorn server on it (uvloop, lifespan on).

    ``import uvicorn`` imports its reloader, and with it watchfiles (a Rust extension, ~1.2 MB of
    resident memory per worker) when installed; a worker never reloads, so the import is refused
    here and uvicorn falls back to its stat-based reloader class, which it never instantiates."""
    sys.modules.setdefault("watchfiles", None)  # type: ignore[arg-type]
    import uvicorn

    raise_nofile()
    sock = reuseport_socket(args.host, args.port, args.backlog)
    config = uvicorn.Config(
        args.app,
        loop="uvloop",
        http=args.http,
        lifespan="on",
        log_level=args.log_level,
        access_log=args.access_log,
        # X-Forwarded-For is read by the gateway alone (``limits.client_ip``), from the proxies
        # GATEWAY_TRUSTED_PROXY_CIDRS names; uvicorn's own rewrite trusts loopback whatever that says.
        proxy_headers=False,
        timeout_keep_alive=args.timeout_keep_alive,
        timeout_graceful_shutdown=args.timeout_graceful_shutdown,
        backlog=args.backlog,
    )
    uvicorn.Server(config).run(sockets=[sock])


def run_checks() -> None:
    """The transform checks, logged (broken transforms and plug-ins); the server runs regardless."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
    import django

    django.setup()
    from transforms.checks import log_problems

    log_problems()


class Master:
    """Starts the workers, restarts one that exits while the server runs, stops them all on a signal."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workers: list[subprocess.Popen | None] = [None] * max(1, args.workers)
        self.started: list[float] = [0.0] * len(self.workers)
        self.stopping = False

    def spawn(self, index: int) -> None:
        argv = [sys.executable, "-m", "gateway.launch", "--worker"] + _passthrough(self.args)
        self.workers[index] = subprocess.Popen(
            argv, env={**os.environ, CHECKS_ENV: "1", DEFER_ADMIN_ENV: "1"}
        )
        self.started[index] = time.monotonic()

    def stop(self, signum: int, _frame: object = None) -> None:
        """Always SIGTERM: on Ctrl-C the workers got SIGINT from the terminal already, and a second
        SIGINT would make uvicorn skip the graceful drain; a repeated SIGTERM does not."""
        self.stopping = True
        for proc in self.workers:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    def run(self) -> int:
        # Refuse early, with a clear message, when something else holds the port without SO_REUSEPORT.
        reuseport_socket(self.args.host, self.args.port, 1).close()
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        checks = subprocess.Popen([sys.executable, "-m", "gateway.launch", "--checks"])
        for i in range(len(self.workers)):
            self.spawn(i)
        while not self.stopping:
            time.sleep(0.5)
            checks.poll()  # reaps it once done
            for i, proc in enumerate(self.workers):
                if proc is None or proc.poll() is None or self.stopping:
                    continue
                if time.monotonic() - self.started[i] < STARTUP_SECONDS:
                    print(
                        f"gateway.launch: worker {proc.pid} failed to start (exit {proc.returncode}); stopping",
                        file=sys.stderr,
                        flush=True,
                    )
                    self.stop(signal.SIGTERM)
                    break
                print(
                    f"gateway.launch: worker {proc.pid} exited with {proc.returncode}; restarting",
                    file=sys.stderr,
                    flush=True,
                )
                time.sleep(RESTART_PAUSE)
                self.spawn(i)
        if checks.poll() is None:
            checks.terminate()
        checks.wait()
        codes = [proc.wait() for proc in self.workers if proc is not None]
        return max((c for c in codes if c > 0), default=0)


def _passthrough(args: argparse.Namespace) -> list[str]:
    out = [
        "--app",
        args.app,
        "--host",
        args.host,
        "--port",
        str(args.port),
        "--http",
        args.http,
        "--timeout-keep-alive",
        str(args.timeout_keep_alive),
        "--timeout-graceful-shutdown",
        str(args.timeout_graceful_shutdown),
        "--log-level",
        args.log_level,
        "--backlog",
        str(args.backlog),
    ]
    return out + (["--access-log"] if args.access_log else [])


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.checks:
        run_checks()
        return
    if args.worker:
        run_worker(args)
        return
    sys.exit(Master(args).run())


if __name__ == "__main__":
    main()
