"""``manage.py loadconfig FILE [--prune]``: apply a YAML or JSON configuration file."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from gateway.configfile import ConfigError, load_file


class Command(BaseCommand):
    help = (
        "Create or update providers, channels, models, API keys, transform chains and settings from a "
        "YAML or JSON file, in one transaction. Bad files are reported by field path and write nothing."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="path to a .yaml/.yml or .json file")
        parser.add_argument(
            "--prune",
            action="store_true",
            help="delete providers, channels, models and API keys the file no longer names",
        )
        parser.add_argument(
            "--if-empty",
            action="store_true",
            help="load only when no provider and no API key exists yet (make run uses this so "
            "it never undoes an operator's edits)",
        )

    def handle(self, *args, **options) -> None:
        if options["if_empty"] and _configured():
            self.stdout.write(
                f"Skipped {options['file']}: the database already holds a configuration "
                "(run `make demo` or loadconfig without --if-empty to apply it anyway)"
            )
            return
        try:
            report = load_file(options["file"], prune=options["prune"])
        except ConfigError as exc:
            for line in exc.errors:
                self.stderr.write(line)
            raise CommandError(f"{options['file']}: {len(exc.errors)} error(s); nothing was written") from exc
        self.stdout.write(f"Loaded {options['file']}: {report.summary()}")
        for name in report.keyless_channels:
            self.stdout.write(
                f"Channel {name} has no upstream API key: it sends no credentials until one is "
                "set (fine for local upstreams; a dump without secrets needs them added)"
            )
        for name, secret in report.generated_secrets.items():
            self.stdout.write(f"API key {name!r} created with secret {secret}  (shown once: store it now)")


def _configured() -> bool:
    from keys.models import ApiKey
    from providers.models import Provider

    return Provider.objects.exists() or ApiKey.objects.exists()
