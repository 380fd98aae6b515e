"""Gateway-wide settings: one row."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from gateway.dbtext import StorableValues
from gateway.redirects import validate_redirects

MAX_CODEX_MODEL_IDS = 256


def validate_codex_model_ids(value) -> None:
    """A list of distinct non-empty model names of at most 256 characters, at most 256 of them."""
    if value in (None, ""):
        return
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValidationError("Codex model ids must be a list of non-empty model names.")
    if len(value) > MAX_CODEX_MODEL_IDS:
        raise ValidationError(f"At most {MAX_CODEX_MODEL_IDS} Codex model ids.")
    if any(len(v) > 256 for v in value):
        raise ValidationError("A Codex model id is at most 256 characters.")
    if len(set(value)) != len(value):
        raise ValidationError("Codex model ids must be distinct.")


class GlobalSettings(StorableValues, models.Model):
    capture_enabled = models.BooleanField(
        default=True, help_text="Master switch: when off, no request is captured whatever the key says."
    )
    capture_retention_days = models.PositiveIntegerField(default=7)
    capture_max_total_mb = models.PositiveIntegerField(
        default=1024, help_text="Size budget for all captures; the oldest are deleted past it."
    )
    strip_cross_protocol_nested = models.BooleanField(
        default=True, help_text="Drop nested unknown fields when the upstream speaks another protocol."
    )
    request_timeout_seconds = models.FloatField(default=300.0)
    connect_timeout_seconds = models.FloatField(default=10.0)
    upstream_idle_timeout_seconds = models.FloatField(default=120.0)
    fetch_allow_private = models.BooleanField(
        default=False,
        help_text="Let the gateway fetch URLs (image_resolve_urls) from loopback, private, link-local "
        "and metadata addresses. Off: such fetches are refused (SSRF guard).",
    )
    guard_channel_urls = models.BooleanField(
        default=False,
        help_text="Apply the same address guard to channel base URLs: upstream calls to loopback, "
        "private or link-local addresses fail with a clear error. Off by default, since "
        "operators point channels at private hosts on purpose.",
    )
    model_redirects = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_redirects],
        help_text='Ordered [{"pattern": regex, "replace": model}] applied after the key\'s own redirects; the '
        "first full match rewrites the model. At most 32 rules, patterns up to 256 bytes.",
    )
    reasoning_effort_suffixes = models.JSONField(
        default=dict,
        blank=True,
        help_text="Model-name suffixes that select a reasoning effort, added to the built-in -none, -minimal, "
        '-low, -medium, -high, -xhigh and -max; e.g. {"-thinking": "high", "-nothinking": "none"}. '
        "A suffixed name resolves to its base model when the base is served and the suffixed one is not.",
    )
    codex_model_ids = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_codex_model_ids],
        help_text="Model names described to Codex CLI in GET /v1/models (its ModelInfo descriptors, with "
        "conservative capabilities and the freeform apply_patch tool), for names Codex does not "
        "know. Codex asks only when its provider uses command auth (auth = {command = ...}).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "global settings"
        verbose_name_plural = "global settings"

    def __str__(self) -> str:
        return "Global settings"

    def clean(self) -> None:
        errors = {
            name: "Must be greater than 0."
            for name in (
                "request_timeout_seconds",
                "connect_timeout_seconds",
                "upstream_idle_timeout_seconds",
            )
            if getattr(self, name) is not None and getattr(self, name) <= 0
        }
        from gateway.proxy.effort_suffix import validate_suffix_map

        suffix_errors = validate_suffix_map(self.reasoning_effort_suffixes)
        if suffix_errors:
            errors["reasoning_effort_suffixes"] = " ".join(suffix_errors)
        if errors:
            raise ValidationError(errors)

    def save(self, *args, **kwargs):
        self.pk = 1
        super().save(*args, **kwargs)

    @classmethod
    def load(cls) -> GlobalSettings:
        """The row, created if missing: for the admin and the API, which are about to edit it."""
        obj, _ = cls.objects.get_or_create(pk=1)
        return obj

    @classmethod
    def current(cls) -> GlobalSettings:
        """The row or its defaults, never written: creating it would save a config model and so
        bump the config version, reloading every worker's snapshot (the capture writer's
        retention check used to do that on a fresh database)."""
        return cls.objects.filter(pk=1).first() or cls()


class ConfigVersion(models.Model):
    """A counter bumped on every configuration change, for workers without Redis."""

    version = models.BigIntegerField(default=0)


class LoginThrottle(models.Model):
    """Failed logins of one client address in its current window, shared by every worker and
    instance when there is no Redis (``gateway.login_limit.DbLimiter``). Not configuration: saving
    it bumps nothing."""

    key = models.CharField(max_length=200, unique=True)
    window_start = models.FloatField(db_index=True, help_text="Unix time the window opened.")
    count = models.PositiveIntegerField(default=0)
