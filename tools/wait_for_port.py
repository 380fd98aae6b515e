"""Wait until something listens on HOST:PORT (``make run`` starts the demo's mock upstream in the
background and must not start the gateway before it answers). Exits 1 after the timeout.

    python tools/wait_for_port.py HOST PORT [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import socket
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    end = time.monotonic() + args.timeout
    while True:
        try:
            socket.create_connection((args.host, args.port), timeout=1.0).close()
            return 0
        except OSError:
            if time.monotonic() >= end:
                print(
                    f"nothing listens on {args.host}:{args.port} after {args.timeout:.0f} s", file=sys.stderr
                )
                return 1
            time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
