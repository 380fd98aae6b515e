"""Channels saved before ``validate_base_url`` refused credentials may still hold
``user:password@`` in their base_url, stored and shown in clear (issue 13). Move that secret into
the encrypted key field, as an operator would: ``providers.models.split_url_credentials`` takes
the password (else the user name) out of the URL. A channel that already has a key keeps it; its
URL only loses the credentials. Each change is logged (never the secret). A secret-looking query
parameter is only reported: moving it would change how the upstream is authenticated."""

import logging
import secrets
from django.db import migrations

from gateway import crypto
from providers.models import secret_query_params, split_url_credentials

log = logging.getLogger("gateway.security")


def _report_query_secrets(channel) -> None:
    if secret_query_params(channel.base_url):
        log.warning(
            "channel %s (id %s): its base_url carries a key or token in the query string; "
            "move it into the channel's API key field",
            channel.name,
            channel.pk,
        )


def move_credentials(apps, schema_editor) -> None:
    Channel = apps.get_model("providers", "Channel")
    changed = 0
    for channel in Channel.objects.using(schema_editor.connection.alias).order_by("pk"):
        try:
            clean, secret = split_url_credentials(channel.base_url)
        except ValueError:  # not a URL at all: left for the operator, whose next save is refused
            log.warning("channel %s (id %s): its base_url is not a valid URL", channel.name, channel.pk)
            continue
        if clean != channel.base_url:
            if channel.api_key_encrypted:
                what = "kept its existing API key"
            elif secret:
                channel.api_key_encrypted = crypto.encrypt(secret)
                what = "moved them into its encrypted API key"
            else:
                what = "they were empty"
            log.warning(
                "channel %s (id %s): removed credentials from its base_url; %s",
                channel.name,
                channel.pk,
                what,
            )
            channel.base_url = clean
            channel.save(update_fields=["base_url", "api_key_encrypted"])
            changed += 1
        _report_query_secrets(channel)
    if changed:  # running workers reload their snapshot (they poll the database's version too)
        ConfigVersion = apps.get_model("gateway", "ConfigVersion")
        ConfigVersion.objects.using(schema_editor.connection.alias).update_or_create(
            pk=1, defaults={"version": secrets.randbits(62) + 1}
        )


class Migration(migrations.Migration):
    dependencies = [
        ("providers", "0005_breaker_thresholds"),
        ("gateway", "0001_initial"),
    ]

    operations = [migrations.RunPython(move_credentials, migrations.RunPython.noop, elidable=True)]
