"""Client API keys: stored as a keyed hash with a short visible prefix."""

from __future__ import annotations

import ipaddress
import secrets
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from gateway import crypto
from gateway.dbtext import StorableValues


class CaptureMode(models.TextChoices):
    """Which of a key's requests are captured (when the global capture switch is on)."""

    OFF = "off", "Off"
    ALL = "all", "All requests"
    ABNORMAL = "abnormal", "Only abnormal requests"


CAPTURE_CHOICES = CaptureMode.choices
PREFIX_LEN = 12


def generate_secret() -> str:
    return "sk-gw-" + secrets.token_urlsafe(32)


def validate_globs(value) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(g, str) and g for g in value):
        raise ValidationError("Must be a list of non-empty glob strings.")


LIMIT_NAMES = ("rpm", "tpm", "concurrency")
SPEND_NAMES = ("daily_spend", "total_spend")  # USD, decimal strings


def validate_limits(value) -> None:
    """``{"rpm": 60, "tpm": 100000, "concurrency": 8, "daily_spend": "5.00", "total_spend": "100.00"}``:
    each optional; counts are positive integers, spend caps positive USD amounts (decimal strings)."""
    if value in (None, ""):
        return
    if not isinstance(value, dict):
        raise ValidationError('Must be an object such as {"rpm": 60, "tpm": 100000, "concurrency": 8}.')
    unknown = sorted(set(value) - set(LIMIT_NAMES) - set(SPEND_NAMES))
    if unknown:
        raise ValidationError(
            f"Unknown limit(s) {', '.join(unknown)}; known: {', '.join(LIMIT_NAMES + SPEND_NAMES)}."
        )
    for name, n in value.items():
        if n is None:
            continue
        if name in SPEND_NAMES:
            try:
                usd = Decimal(str(n)) if not isinstance(n, bool | float) else None
            except InvalidOperation:
                usd = None
            if usd is None or not usd.is_finite() or usd <= 0 or usd > 10**9 or usd.as_tuple().exponent < -9:
                raise ValidationError(
                    f'{name} must be a positive USD amount as a decimal string, such as "5.00".'
                )
        elif not isinstance(n, int) or isinstance(n, bool) or n < 1 or n > 10**12:
            raise ValidationError(f"{name} must be a positive integer.")


def validate_ip_allow(value) -> None:
    """IP addresses or CIDR blocks (``10.0.0.0/8``, ``2001:db8::/32``), at most 256."""
    if value in (None, ""):
        return
    if not isinstance(value, list) or len(value) > 256:
        raise ValidationError("Must be a list of at most 256 IP addresses or CIDR blocks.")
    for entry in value:
        try:
            ipaddress.ip_network(str(entry), strict=False)
        except ValueError as exc:
            raise ValidationError(f"{entry!r} is not an IP address or CIDR block.") from exc


def validate_redirects(value) -> None:
    """The shared redirect rule shape (gateway.redirects): same rules as the global redirects."""
    from gateway.redirects import validate_redirects as validate

    validate(value)


class ApiKey(StorableValues, models.Model):
    name = models.CharField(
        max_length=100, unique=True, help_text="Unique: the config file and dumps match keys by name."
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys", null=True, blank=True
    )
    prefix = models.CharField(max_length=PREFIX_LEN, editable=False, db_index=True)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    enabled = models.BooleanField(default=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    allowed_models = models.JSONField(
        null=True,
        blank=True,
        validators=[validate_globs],
        help_text="Globs of logical models this key may use (* any run, ? one character); empty allows all.",
    )
    model_redirects = models.JSONField(
        null=True,
        blank=True,
        validators=[validate_redirects],
        help_text='Ordered [{"pattern": regex, "replace": model}]; the first full match rewrites the model.',
    )
    capture_mode = models.CharField(max_length=10, choices=CaptureMode.choices, default=CaptureMode.OFF)
    limits = models.JSONField(
        null=True,
        blank=True,
        validators=[validate_limits],
        help_text='Requests per minute, tokens per minute and concurrent requests: {"rpm": 60, "tpm": 100000, '
        '"concurrency": 8}; each optional. Answered with 429 and Retry-After.',
    )
    ip_allow = models.JSONField(
        null=True,
        blank=True,
        validators=[validate_ip_allow],
        help_text="IP addresses or CIDR blocks this key may be used from; empty allows every address.",
    )
    reasoning_envelopes = models.BooleanField(
        default=False,
        help_text="Wrap encrypted reasoning sent to this key's clients with the provider and model it "
        "came from (mz2. envelopes), so a conversation that switches providers never sends "
        "one provider's ciphertext to another.",
    )
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def clean(self) -> None:
        self.name = (self.name or "").strip()
        if not self.name:
            raise ValidationError({"name": "Name must not be empty."})
        if isinstance(self.ip_allow, list):  # canonical and deduplicated: 10.1.2.3/8 -> 10.0.0.0/8
            try:
                nets = {str(ipaddress.ip_network(str(e).strip(), strict=False)) for e in self.ip_allow}
            except ValueError:
                return  # the field validator reports it
            self.ip_allow = sorted(nets) or None
        if isinstance(self.limits, dict):  # spend caps stored as canonical decimal strings
            self.limits = {
                k: (_usd_text(v) if k in SPEND_NAMES else v)
                for k, v in self.limits.items()
                if v not in (None, "")
            } or None

    def set_secret(self, secret: str | None = None) -> str:
        """Store a new secret (generated unless given) and return it: it is shown only once."""
        secret = secret or generate_secret()
        # Never more than half of the secret: a short fixed key (sk-demo-0001) must not be
        # displayed whole as its own "prefix".
        self.prefix = secret[: min(PREFIX_LEN, len(secret) // 2)]
        self.key_hash = crypto.hash_api_key(secret)
        return secret


def _usd_text(value) -> str:
    try:
        return format(Decimal(str(value)).normalize(), "f") if not isinstance(value, bool | float) else value
    except InvalidOperation:
        return value  # the validator reports it
