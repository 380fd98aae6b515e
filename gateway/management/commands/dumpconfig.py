"""``manage.py dumpconfig [-o FILE] [--format yaml|json] [--include-secrets]``."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.management.base import BaseCommand

from gateway.configfile import dump, render


class Command(BaseCommand):
    help = (
        "Write the stored configuration in the loadconfig format. Upstream channel keys are left out "
        "unless --include-secrets; client API key secrets cannot be dumped (only their hashes are stored)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("-o", "--output", help="write to this file instead of standard output")
        parser.add_argument(
            "--format", choices=["yaml", "json"], help="default: from the output file's extension, else yaml"
        )
        parser.add_argument(
            "--include-secrets", action="store_true", help="include upstream channel api_key values"
        )

    def handle(self, *args, **options) -> None:
        output = options.get("output")
        fmt = options.get("format") or ("json" if output and output.lower().endswith(".json") else "yaml")
        text = render(dump(include_secrets=options["include_secrets"]), fmt)
        if output:
            path = Path(output)
            if options["include_secrets"]:
                # Private from the first byte: never a moment where others can read the keys.
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.fchmod(fd, 0o600)  # an existing file keeps its mode otherwise
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(text)
            else:
                path.write_text(text, encoding="utf-8")
            self.stderr.write(f"Wrote {output}")
        else:
            self.stdout.write(text, ending="")
