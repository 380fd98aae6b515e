"""``manage.py purgecaptures``: apply capture retention now (age, then size budget)."""

from django.core.management.base import BaseCommand

from captures import retention


class Command(BaseCommand):
    help = (
        "Delete captures older than the retention days in global settings, then the oldest ones "
        "until the total fits the size budget."
    )

    def handle(self, *args, **options):
        result = retention.enforce()
        self.stdout.write(f"deleted {result.by_age} capture(s) by age and {result.by_size} by size")
