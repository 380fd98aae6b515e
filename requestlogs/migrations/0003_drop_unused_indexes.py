"""Drop the single-column indexes of the two foreign keys: the composite indexes that start with
them ((api_key, -created_at), (owner, -created_at)) serve every lookup by key or owner, and each
index costs every insert (issue 17: request logging's CPU without Redis). Also the index on
``logical_model``: the model is only searched by substring (``icontains``), which it cannot serve.

``AlterField`` would do it on PostgreSQL, but on SQLite it rebuilds the whole table (every row
copied, on what is the biggest table), so the database side drops the indexes by name instead
and only the state records ``db_index=False``."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

COLUMNS = ("api_key_id", "owner_id")


def _single_column_indexes(schema_editor, model, column):
    with schema_editor.connection.cursor() as cursor:
        found = schema_editor.connection.introspection.get_constraints(cursor, model._meta.db_table)
    return [
        name
        for name, info in found.items()
        if info["index"] and not info["unique"] and not info["primary_key"] and info["columns"] == [column]
    ]


def drop(apps, schema_editor):
    model = apps.get_model("requestlogs", "RequestLog")
    for column in COLUMNS:
        for name in _single_column_indexes(schema_editor, model, column):
            schema_editor.execute(schema_editor._delete_index_sql(model, name))


def restore(apps, schema_editor):
    model = apps.get_model("requestlogs", "RequestLog")
    for column in COLUMNS:
        if not _single_column_indexes(schema_editor, model, column):
            field = model._meta.get_field(column.removesuffix("_id"))
            schema_editor.execute(schema_editor._create_index_sql(model, fields=[field]))


class Migration(migrations.Migration):
    dependencies = [
        ("keys", "0004_limits_and_ip_allow"),
        ("requestlogs", "0002_requestlog_endpoint"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop, restore)],
            state_operations=[
                migrations.AlterField(
                    model_name="requestlog",
                    name="api_key",
                    field=models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="keys.apikey",
                    ),
                ),
                migrations.AlterField(
                    model_name="requestlog",
                    name="owner",
                    field=models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        help_text="The key's owner when the row was written.",
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
        migrations.RemoveIndex(model_name="requestlog", name="reqlog_model"),
    ]
