"""The status index covers only the rows that did not succeed (issue 17): most rows are
successes, and each index costs every insert; a failure lookup repeats the condition
(``requestlogs.filters.by_status``) so SQLite and PostgreSQL both use it."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("keys", "0004_limits_and_ip_allow"),
        ("requestlogs", "0003_drop_unused_indexes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="requestlog",
            name="reqlog_status_created",
        ),
        migrations.AddIndex(
            model_name="requestlog",
            index=models.Index(
                condition=models.Q(("status", "success"), _negated=True),
                fields=["status", "-created_at"],
                name="reqlog_unsuccessful",
            ),
        ),
    ]
