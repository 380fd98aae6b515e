"""Upstream topology: providers, their channels, and the models each channel serves."""

from __future__ import annotations

import re
from decimal import Decimal
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from gateway import crypto
from gateway.dbtext import StorableValues


class Protocol(models.TextChoices):
    """The wire protocol an upstream channel speaks."""

    CHAT_COMPLETION = "chat_completion", "OpenAI Chat Completions"
    RESPONSES = "responses", "OpenAI Responses"
    MESSAGES = "messages", "Anthropic Messages"
    GEMINI = "gemini", "Google Gemini"
    OPENAI_IMAGE = "openai_image", "OpenAI Images API"


class TriState(models.TextChoices):
    """A per-provider override of a global boolean: stored as text, spelled ``true``/``false``/``null``
    (inherit) in the config file and accepted in either spelling everywhere (see ``parse``)."""

    INHERIT = "inherit", "Inherit global setting"
    TRUE = "true", "Always"
    FALSE = "false", "Never"

    @classmethod
    def parse(cls, value: object) -> object:
        """``True``/``False``/``None`` to their stored spelling; anything else unchanged (so a bad
        value reaches the model's choice validation and its usual message)."""
        if value is None:
            return cls.INHERIT.value
        if isinstance(value, bool):
            return cls.TRUE.value if value else cls.FALSE.value
        return value

    @classmethod
    def as_bool(cls, value: str) -> bool | None:
        """The stored spelling as a bool; None means inherit."""
        return {cls.TRUE.value: True, cls.FALSE.value: False}.get(value)


class AffinityMode(models.TextChoices):
    """Sticky routing per provider (gateway/proxy/affinity.py)."""

    OFF = "off", "Off"
    STICKY = "sticky", "Sticky"
    PREFER_HIGHER_PRIORITY = "prefer_higher_priority", "Prefer higher priority"


PROTOCOL_CHOICES = Protocol.choices
TRISTATE_CHOICES = TriState.choices

FORBIDDEN_HEADERS = frozenset(
    {
        "authorization",
        "x-api-key",
        "x-goog-api-key",
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "upgrade",
        "expect",
        "te",
        "trailer",
        "proxy-authorization",
        "proxy-connection",
    }
)
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}$")


_SECRET_PARAM = re.compile(
    r"(?i)^(?:api[-_]?key|key|token|access[-_]?token|secret|password|passwd|sig|signature|"
    r"auth|authorization|code)$"
)


def split_url_credentials(url: str) -> tuple[str, str]:
    """(``url`` without its ``user:password@`` part, the secret that part carried: the password,
    else the user name, percent-decoded; "" for none). The validator below refuses any URL this
    would change; migration 0006 uses it to clean rows saved before the validator refused them
    (issue 13), moving the secret into the channel's encrypted key field."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, ""
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=hostport)), unquote(password or user)


def secret_query_params(url: str) -> list[str]:
    """The names of ``url``'s query parameters that look like a key or token."""
    query = urlsplit(url).query
    return [name for name, _v in parse_qsl(query, keep_blank_values=True) if _SECRET_PARAM.match(name)]


def validate_base_url(value: str) -> None:
    """An absolute http(s) URL with a host and no credentials: a user name, password or
    secret-looking query parameter would be stored and shown in clear (issue 13); the channel's
    key belongs in its encrypted API key field (extra headers carry anything else)."""
    try:
        parts = urlsplit(value)
        hostname = parts.hostname
    except ValueError:
        raise ValidationError("Base URL is not a valid URL.") from None
    if parts.scheme not in ("http", "https") or not hostname:
        raise ValidationError("Base URL must be an absolute http(s) URL with a host.")
    if split_url_credentials(value)[0] != value:
        raise ValidationError(
            "Base URL must not contain credentials (user:password@); put the key in the "
            "channel's API key field."
        )
    if secret_query_params(value):
        raise ValidationError(
            "Base URL must not carry a key or token in its query string; put the key in the "
            "channel's API key field."
        )


def _guarded_base_url_problem(url: str) -> str | None:
    """With the global ``guard_channel_urls`` on, a base URL whose host is (or resolves to) a
    loopback, private, link-local or metadata address is refused with the reason."""
    import ipaddress
    import socket

    from gateway.fetch import literal_address, refusal_reason
    from gateway.models import GlobalSettings

    gs = GlobalSettings.objects.filter(pk=1).first()
    if gs is None or not gs.guard_channel_urls:
        return None
    host = urlsplit(url).hostname or ""
    addr = literal_address(host)
    addrs = [addr] if addr is not None else []
    if addr is None:
        try:
            addrs = [
                ipaddress.ip_address(info[4][0].split("%")[0]) for info in socket.getaddrinfo(host, None)
            ]
        except (OSError, ValueError):
            return None  # unresolvable now; the resolver checks again on every connection
    for a in addrs:
        reason = refusal_reason(a)
        if reason:
            return f"guard_channel_urls is on and {host} is a {reason} ({a})."
    return None


def validate_extra_headers(value) -> None:
    if value in (None, ""):
        return
    if not isinstance(value, dict):
        raise ValidationError("Extra headers must be an object of header name to value.")
    if len(value) > 16:
        raise ValidationError("At most 16 extra headers.")
    seen: set[str] = set()
    for name, val in value.items():
        lower = str(name).lower()
        if not _TOKEN.match(str(name)):
            raise ValidationError(f"Invalid header name: {name!r}.")
        if lower in FORBIDDEN_HEADERS:
            raise ValidationError(
                f"Header {name!r} is hop-by-hop or carries authentication; it cannot be set here."
            )
        if lower in seen:
            raise ValidationError(f"Header {name!r} appears twice.")
        seen.add(lower)
        if not isinstance(val, str) or "\r" in val or "\n" in val or len(val) > 4096:
            raise ValidationError(
                f"Header {name!r}: value must be a string of at most 4096 characters without line breaks."
            )


PRICE_KEYS = ("input", "output", "cache_read", "cache_write", "reasoning")
_PRICE_RE = re.compile(r"^\d{1,9}(\.\d{1,12})?$")


def _price_value(key: str, value: object) -> Decimal:
    """One price as an exact Decimal: a decimal string (or an integer); floats are refused
    unless they print as a plain decimal (YAML's unquoted 3.00 arrives as a float)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValidationError(f'price.{key}: must be a decimal string such as "3.00".')
    text = repr(value) if isinstance(value, float) else str(value).strip()
    if not _PRICE_RE.match(text):
        raise ValidationError(
            f"price.{key}: must be a non-negative decimal (at most 12 decimals), not {value!r}."
        )
    return Decimal(text)


def canonical_price(value: dict) -> dict[str, str]:
    """The stored form: each given price as a canonical decimal string (no exponent)."""
    return {k: format(_price_value(k, value[k]), "f") for k in PRICE_KEYS if value.get(k) is not None}


def validate_price(value) -> None:
    if value in (None, "", {}):
        return
    if not isinstance(value, dict):
        raise ValidationError("Price must be a mapping of input/output/cache_read/cache_write/reasoning.")
    unknown = sorted(set(value) - set(PRICE_KEYS))
    if unknown:
        raise ValidationError(f"Unknown price keys: {', '.join(unknown)} (expected {', '.join(PRICE_KEYS)}).")
    for k in PRICE_KEYS:
        if value.get(k) is not None:
            _price_value(k, value[k])


class Provider(StorableValues, models.Model):
    name = models.CharField(max_length=100, unique=True)
    enabled = models.BooleanField(default=True)
    priority = models.IntegerField(default=0, help_text="Lower is tried first.")
    max_retries = models.IntegerField(
        default=-1,
        validators=[MinValueValidator(-1)],
        help_text="Attempts across all of this provider's channels are max_retries + 1; -1 means unlimited.",
    )
    channel_max_retries = models.PositiveIntegerField(
        default=0,
        help_text="Retries on the same channel for retryable errors (connect, timeout, 408, 429, 5xx).",
    )
    channel_retry_interval_ms = models.PositiveIntegerField(default=0)
    request_timeout_seconds = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.1)],
        help_text="Overrides the global request timeout when set.",
    )
    circuit_breaker_enabled = models.BooleanField(default=True)
    affinity_mode = models.CharField(
        max_length=24,
        choices=AffinityMode.choices,
        default=AffinityMode.OFF,
        help_text="Sticky routing: send a conversation back to the channel that served it so the upstream's "
        "prompt cache hits. sticky keeps it there; prefer_higher_priority returns to a recovered "
        "higher-priority provider after the fail-back delay.",
    )
    affinity_failback_seconds = models.PositiveIntegerField(
        default=300,
        help_text="prefer_higher_priority: seconds after binding before normal priority order wins again.",
    )
    # Breaker thresholds for this provider's channels; empty: the global defaults
    # (GATEWAY_BREAKER_FAILURES, _WINDOW_SECONDS, _COOLDOWN_SECONDS).
    breaker_failure_threshold = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Failures within the window that open a channel's breaker; empty: the global default.",
    )
    breaker_window_seconds = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.1)],
        help_text="The breaker's failure-counting window; empty: the global default.",
    )
    breaker_cooldown_seconds = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.1)],
        help_text="How long an opened breaker keeps a channel out; empty: the global default.",
    )
    multiplier = models.DecimalField(
        max_digits=18,
        decimal_places=9,
        default=Decimal("1"),
        validators=[MinValueValidator(Decimal("0.000000001"))],
        help_text="Scales the cost of every request this provider serves (with the channel model's multiplier).",
    )
    strip_cross_protocol_nested = models.CharField(
        max_length=8,
        choices=TriState.choices,
        default=TriState.INHERIT,
        help_text="Drop nested unknown fields on cross-protocol hops.",
    )
    extra_fields_whitelist = models.JSONField(
        null=True,
        blank=True,
        help_text='Top-level unknown fields let through in addition to the built-in list; ["*"] lets all through.',
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["priority", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def strip_nested_override(self) -> bool | None:
        """``strip_cross_protocol_nested`` as a bool; None to inherit the global setting."""
        return TriState.as_bool(self.strip_cross_protocol_nested)

    def clean(self) -> None:
        self.name = (self.name or "").strip()
        if not self.name:
            raise ValidationError({"name": "Name must not be empty."})
        wl = self.extra_fields_whitelist
        if wl is not None and (not isinstance(wl, list) or not all(isinstance(x, str) and x for x in wl)):
            raise ValidationError({"extra_fields_whitelist": "Must be a list of non-empty field names."})


class Channel(StorableValues, models.Model):
    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="channels")
    name = models.CharField(max_length=100)
    protocol = models.CharField(max_length=20, choices=Protocol.choices)
    base_url = models.CharField(max_length=500, validators=[validate_base_url])
    api_key_encrypted = models.TextField(blank=True, default="", editable=False)
    weight = models.PositiveIntegerField(default=1, help_text="0 excludes the channel from routing.")
    enabled = models.BooleanField(default=True)
    extra_headers = models.JSONField(null=True, blank=True, validators=[validate_extra_headers])
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["provider", "name"]
        constraints = [
            models.UniqueConstraint(fields=["provider", "name"], name="channel_unique_name_per_provider")
        ]

    def __str__(self) -> str:
        return f"{self.provider.name}/{self.name}" if self.provider_id else self.name

    def clean(self) -> None:
        self.name = (self.name or "").strip()
        self.base_url = (self.base_url or "").strip()
        if not self.name:
            raise ValidationError({"name": "Name must not be empty."})
        reason = _guarded_base_url_problem(self.base_url)
        if reason:
            raise ValidationError({"base_url": reason})

    def set_api_key(self, plaintext: str) -> None:
        self.api_key_encrypted = crypto.encrypt(plaintext)

    def get_api_key(self) -> str:
        return crypto.decrypt(self.api_key_encrypted)

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)


class ChannelModel(StorableValues, models.Model):
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="models")
    model = models.CharField(max_length=200, db_index=True, help_text="The logical model clients ask for.")
    upstream_model = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="The model name sent upstream; empty sends the logical name.",
    )
    multiplier = models.DecimalField(
        max_digits=18,
        decimal_places=9,
        default=Decimal("1"),
        validators=[MinValueValidator(Decimal("0.000000001"))],
        help_text="Scales this model's cost (with the provider's multiplier).",
    )
    price = models.JSONField(
        null=True,
        blank=True,
        validators=[validate_price],
        help_text='USD per million tokens, as decimal strings: {"input": "3.00", "output": "15.00", '
        '"cache_read": "0.30", "cache_write": "3.75", "reasoning": "15.00"}; a missing cache or '
        "reasoning price falls back to input or output. Empty: requests are not priced.",
    )

    class Meta:
        ordering = ["model"]
        constraints = [
            models.UniqueConstraint(fields=["channel", "model"], name="channelmodel_unique_per_channel"),
            models.CheckConstraint(
                condition=models.Q(multiplier__gt=0), name="channelmodel_multiplier_positive"
            ),
        ]

    def __str__(self) -> str:
        return self.model if not self.upstream_model else f"{self.model} -> {self.upstream_model}"

    def clean(self) -> None:
        self.model = (self.model or "").strip()
        if not self.model:
            raise ValidationError({"model": "Model name must not be empty."})
        if self.price in ({}, ""):
            self.price = None
        elif isinstance(self.price, dict):
            try:
                self.price = canonical_price(self.price)
            except ValidationError:
                pass  # reported by the field's validator
