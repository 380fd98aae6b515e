"""``manage.py purgerequestlogs``: apply request-log retention now."""

from django.core.management.base import BaseCommand

from gateway.conf import gateway_settings
from requestlogs import retention


class Command(BaseCommand):
    help = "Delete request-log rows older than GATEWAY_REQUEST_LOG_RETENTION_DAYS (default 90)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--days",
            type=int,
            default=None,
            help=f"Keep this many days instead (default {gateway_settings.REQUEST_LOG_RETENTION_DAYS}).",
        )

    def handle(self, *args, days=None, **options):
        if days is not None and days < 1:
            self.stderr.write("--days must be at least 1")
            return
        deleted = retention.enforce(days=days)
        self.stdout.write(f"deleted {deleted} request-log row(s)")
