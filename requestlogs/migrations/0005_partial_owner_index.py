"""The owner index covers only rows with an owner (issue 17): rows of keys without one are
never looked up by owner, and each index costs every insert. ``owner_id = ?`` and
``owner_id IN (...)`` imply ``owner_id IS NOT NULL``, so both databases still use it."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("keys", "0004_limits_and_ip_allow"),
        ("requestlogs", "0004_partial_status_index"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="requestlog",
            name="reqlog_owner_created",
        ),
        migrations.AddIndex(
            model_name="requestlog",
            index=models.Index(
                condition=models.Q(("owner__isnull", False)),
                fields=["owner", "-created_at"],
                name="reqlog_owner_created",
            ),
        ),
    ]
