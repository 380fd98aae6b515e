"""``python manage.py mockupstream --host 127.0.0.1 --port 9100``: serve the bundled mock upstream.

The mock itself needs no Django; this command only gives it a familiar entry point (``make run``).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Serve the deterministic mock upstream (Chat, Responses, Messages, Gemini) with uvicorn."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=9100)
        parser.add_argument(
            "--arg-chunk",
            type=int,
            default=3,
            help="Characters per streamed tool-argument fragment (default 3).",
        )
        parser.add_argument("--log-level", default="warning")

    def handle(self, *args, **options) -> None:
        from gateway.mock_upstream.app import serve

        self.stdout.write(f"Mock upstream on http://{options['host']}:{options['port']}")
        self.stdout.flush()
        serve(
            options["host"], options["port"], arg_chunk=options["arg_chunk"], log_level=options["log_level"]
        )
