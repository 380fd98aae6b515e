"""``manage.py dumpconfig [-o FILE] [--format yaml|json] [--include-secrets]``."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand

from gateway.configfile import dump, render


class Command(BaseCommand):
    help = ("Write the stored configuration in the loadconfig format. Upstream channel keys are left out "
            "unless --include-secrets; client API key secrets cannot be dumped (only their hashes are stored).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("-o", "--output", help="write to this file instead of standard output")
        parser.add_argument("--format", choices=["yaml", "json"],
                            help="default: from the output file's extension, else yaml")
        parser.add_argument("--include-secrets", action="store_true", help="include upstream channel api_key values")

    def handle(self, *args, **options) -> None:
        output = options.get("output")
        fmt = options.get("format") or ("json" if output and output.lower().endswith(".json") else "yaml")
        text = render(dump(include_secrets=options["include_secrets"]), fmt)
        if output:
            path = Path(output)
            path.write_text(text, encoding="utf-8")
            if options["include_secrets"]:
                path.chmod(0o600)
            self.stderr.write(f"Wrote {output}")
        else:
            self.stdout.write(text, ending="")
