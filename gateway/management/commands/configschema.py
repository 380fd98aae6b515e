"""``manage.py configschema [-o FILE] [--check]``: the config file's JSON Schema.

The schema is generated from the models (``gateway.configschema``); ``config/schema.json`` is
the published copy editors point at (``# yaml-language-server: $schema=schema.json``). ``--check``
fails when that copy is stale, for CI and the test suite.
"""

from __future__ import annotations

from pathlib import Path

import orjson
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from gateway.configschema import json_schema

DEFAULT_PATH = Path(settings.BASE_DIR) / "config" / "schema.json"


def render_schema() -> str:
    return orjson.dumps(json_schema(), option=orjson.OPT_INDENT_2).decode() + "\n"


class Command(BaseCommand):
    help = "Print the JSON Schema of the loadconfig/dumpconfig file format (generated from the models)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("-o", "--output", help=f"write to this file (for example {DEFAULT_PATH})")
        parser.add_argument(
            "--check",
            action="store_true",
            help="exit with an error when the file (default config/schema.json) is out of date",
        )

    def handle(self, *args, **options) -> None:
        text = render_schema()
        if options["check"]:
            path = Path(options.get("output") or DEFAULT_PATH)
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                raise CommandError(f"{path} is out of date: run manage.py configschema -o {path}")
            self.stdout.write(f"{path} is current")
        elif options.get("output"):
            Path(options["output"]).write_text(text, encoding="utf-8")
            self.stderr.write(f"Wrote {options['output']}")
        else:
            self.stdout.write(text, ending="")
