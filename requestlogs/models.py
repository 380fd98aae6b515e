"""One row per answer on ``/v1/*``: who asked, where it went, what it used and cost,
and how it ended. Built in memory by ``requestlogs.recorder`` and written once, at the request's
terminal state, off the request path (``requestlogs.sink``).

Why a separate app rather than ``captures``: captures are opt-in full dumps with their own size
budget and viewer; request logs are every request, small, kept for months, and read as tables
and sums. Different retention, different write volume, separate migrations.

References are copied, not enforced: ``api_key`` and ``owner`` are foreign keys without a
database constraint (``DO_NOTHING``), so deleting a key or a user leaves its history intact (and
deleting a key with a million rows does not rewrite them); the key's name, the provider's and the
channel's names are copied at write time. Every index costs each of the many inserts (about a
tenth of a row's insert each on SQLite), so the two foreign keys have none of their own: the
composite indexes that start with them serve their lookups; and the model is only ever searched
by substring (``icontains``), which no b-tree index serves, so it has none.

Cost is stored as an integer number of nano-dollars (``cost_nano``): sums are exact integer
arithmetic on SQLite and PostgreSQL alike (a SQLite "decimal" column is a float). ``cost`` gives
the exact ``Decimal``.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models

NANO = Decimal("0.000000001")


class Status(models.TextChoices):
    SUCCESS = "success", "Success"
    ERROR = "error", "Error"
    CLIENT_GONE = "client_gone", "Client gone"


class RequestLogQuerySet(models.QuerySet):
    def visible_to(self, user) -> RequestLogQuerySet:
        """Staff see every row; other users only the rows of their own keys."""
        if user.is_staff or user.is_superuser:
            return self
        return self.filter(owner_id=user.pk)


class RequestLog(models.Model):
    # -- identity
    request_id = models.CharField(
        max_length=64,
        unique=True,
        help_text="The gateway's own id for the request (stable: makes writes idempotent).",
    )
    x_request_id = models.CharField(
        max_length=256,
        blank=True,
        default="",
        help_text="The x-request-id echoed to the client (the client's own when it sent one); captures use it.",
    )
    client_request_id = models.CharField(
        max_length=256,
        blank=True,
        default="",
        help_text="The client's x-request-id header, when it sent one.",
    )
    created_at = models.DateTimeField(help_text="When processing started.")
    api_key = models.ForeignKey(
        "keys.ApiKey",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,  # the (api_key, created_at) index serves every lookup by key
        related_name="+",
    )
    api_key_name = models.CharField(max_length=256, blank=True, default="")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,  # the (owner, created_at) index serves every lookup by owner
        related_name="+",
        help_text="The key's owner when the row was written.",
    )
    client_protocol = models.CharField(max_length=32, blank=True, default="")
    endpoint = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="The endpoint answered (/v1/chat/completions, /v1/models/{id}, 'other' for an unknown path).",
    )
    stream = models.BooleanField(default=False)
    client_ip = models.GenericIPAddressField(null=True, blank=True)
    # -- routing
    logical_model = models.CharField(max_length=256, blank=True, default="")
    upstream_model = models.CharField(max_length=256, blank=True, default="")
    provider = models.CharField(
        max_length=100, blank=True, default="", help_text="The provider that served (name)."
    )
    channel = models.CharField(
        max_length=100, blank=True, default="", help_text="The channel that served (name)."
    )
    provider_ref = models.BigIntegerField(null=True, blank=True, help_text="The serving provider's id.")
    channel_ref = models.BigIntegerField(null=True, blank=True, help_text="The serving channel's id.")
    attempts = models.JSONField(
        default=list,
        blank=True,
        help_text="Every upstream attempt in order: provider, channel, status, error, duration.",
    )
    affinity = models.BooleanField(default=False, help_text="Whether an affinity binding chose the channel.")
    # -- usage and cost
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0)
    cache_write_tokens = models.PositiveBigIntegerField(default=0)
    reasoning_tokens = models.PositiveBigIntegerField(default=0)
    cost_nano = models.BigIntegerField(
        null=True, blank=True, help_text="Cost in nano-USD (10^-9); empty when the model has no price."
    )
    cost_estimated = models.BooleanField(
        default=False, help_text="Usage was estimated (the upstream reported none)."
    )
    # -- outcome and timing
    status = models.CharField(max_length=16, choices=Status.choices)
    http_status = models.PositiveSmallIntegerField(default=0, help_text="The HTTP status the client got.")
    error_code = models.CharField(max_length=100, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    duration_ms = models.FloatField(default=0.0)
    ttfb_ms = models.FloatField(
        null=True, blank=True, help_text="First byte sent to the client, from the start."
    )
    has_capture = models.BooleanField(default=False, help_text="A capture was recorded for this request.")

    objects = RequestLogQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="reqlog_created"),
            # Only rows with an owner: a key without one (an operator's own, most keys of a
            # single-operator gateway) would add a NULL entry nobody looks up, and each index
            # costs every insert (~9 % of the writer's instructions per row for this one).
            # ``owner_id = ?`` and ``owner_id IN (...)`` imply the condition, so SQLite and
            # PostgreSQL still answer the owner filters from it.
            models.Index(
                fields=["owner", "-created_at"],
                name="reqlog_owner_created",
                condition=models.Q(owner__isnull=False),
            ),
            models.Index(fields=["api_key", "-created_at"], name="reqlog_key_created"),
            # Only the rows that did not succeed: the status filter is for finding failures, and
            # a success is what most rows are (the newest-first scan of ``reqlog_created`` finds
            # them at once), so successful inserts skip this index's work (issue 17).
            models.Index(
                fields=["status", "-created_at"],
                name="reqlog_unsuccessful",
                condition=~models.Q(status="success"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.request_id} {self.logical_model} {self.status}"

    @property
    def cost(self) -> Decimal | None:
        return None if self.cost_nano is None else Decimal(self.cost_nano) * NANO

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens
