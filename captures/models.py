"""One stored capture: searchable metadata columns plus the compressed dump.

The dump lives in the row (``payload``, zlib-compressed compact JSON) rather than in files: with
several gateway machines and a pool of Celery workers, a database column is the one store every
writer and every viewer already shares (files would need a shared filesystem), a row and its dump
are deleted in one statement (no orphan files to sweep), and a dump is bounded to 16 MiB before
compression. List queries never load the payload (``Capture.objects.listing()`` defers it).
"""

from __future__ import annotations

from django.db import models

from captures.dump import decompress


class CaptureQuerySet(models.QuerySet):
    def listing(self) -> CaptureQuerySet:
        return self.defer("payload")

    def visible_to(self, user) -> CaptureQuerySet:
        """Staff see every capture; other users only those of their own keys."""
        if user.is_staff or user.is_superuser:
            return self
        return self.filter(owner_id=user.pk)


class Capture(models.Model):
    request_id = models.CharField(
        max_length=256, db_index=True, help_text="The gateway's own id for the request."
    )
    client_request_id = models.CharField(
        max_length=256,
        blank=True,
        default="",
        db_index=True,
        help_text="The client's x-request-id, as sent (data, not identity).",
    )
    created_at = models.DateTimeField(db_index=True)
    api_key = models.ForeignKey(
        "keys.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="captures"
    )
    api_key_name = models.CharField(max_length=256, blank=True, default="")
    owner_id = models.BigIntegerField(
        null=True,
        blank=True,
        db_index=True,
        help_text="The key owner's user id, copied when the capture was written.",
    )
    client_protocol = models.CharField(max_length=32)
    stream = models.BooleanField(default=False)
    logical_model = models.CharField(max_length=256, blank=True, default="", db_index=True)
    status = models.PositiveSmallIntegerField(default=0)
    is_error = models.BooleanField(default=False)
    attempt_count = models.PositiveSmallIntegerField(default=0)
    truncated = models.BooleanField(default=False)
    raw_bytes = models.PositiveIntegerField(default=0, help_text="Size of the dump's JSON.")
    size_bytes = models.PositiveIntegerField(default=0, help_text="Stored (compressed) size.")
    payload = models.BinaryField()

    objects = CaptureQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner_id", "request_id"], name="capture_owner_request")]

    def __str__(self) -> str:
        return f"{self.request_id} ({self.client_protocol}, {self.status})"

    def dump_bytes(self) -> bytes:
        return decompress(self.payload)
