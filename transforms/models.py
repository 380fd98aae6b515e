"""Transform rules: ordered chains in three scopes (provider, global, API key)."""

from __future__ import annotations

import json

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import CheckConstraint, JSONField, Q

from gateway.dbtext import StorableValues
from keys.models import ApiKey
from providers.models import Provider


class Scope(models.TextChoices):
    """Which chain a rule belongs to; the owner (provider, API key, none) must match."""

    PROVIDER = "provider", "Provider"
    GLOBAL = "global", "Global"
    API_KEY = "api_key", "API key"


class Phase(models.TextChoices):
    """When a rule runs: on the request going upstream, or on the response coming back."""

    REQUEST = "request", "Request"
    RESPONSE = "response", "Response"


SCOPE_CHOICES = Scope.choices
PHASE_CHOICES = Phase.choices
MODELS_HELP = (
    "Optional list of globs matched against the client's logical model (never the redirected "
    "upstream model): * any run, ? one character, case-sensitive, whole name. Left empty (null): every model; an empty list matches none."
)


class TransformRule(StorableValues, models.Model):
    scope = models.CharField(max_length=10, choices=Scope.choices)
    provider = models.ForeignKey(
        Provider, on_delete=models.CASCADE, null=True, blank=True, related_name="transform_rules"
    )
    api_key = models.ForeignKey(
        ApiKey, on_delete=models.CASCADE, null=True, blank=True, related_name="transform_rules"
    )
    position = models.PositiveIntegerField(default=0, db_index=True)
    transform = models.CharField(max_length=64)
    enabled = models.BooleanField(default=True)
    phase = models.CharField(max_length=10, choices=Phase.choices, default=Phase.REQUEST)
    models = JSONField(null=True, blank=True, help_text=MODELS_HELP)
    config = JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["scope", "provider_id", "api_key_id", "position", "id"]
        constraints = [
            CheckConstraint(
                name="transformrule_scope_owner",
                condition=(
                    Q(scope="provider", provider__isnull=False, api_key__isnull=True)
                    | Q(scope="global", provider__isnull=True, api_key__isnull=True)
                    | Q(scope="api_key", provider__isnull=True, api_key__isnull=False)
                ),
            ),
            CheckConstraint(name="transformrule_phase_valid", condition=Q(phase__in=Phase.values)),
        ]

    def __str__(self) -> str:
        from transforms.registry import registry

        if self.transform not in registry:
            return f"{self.transform} ({self.phase}) — broken: transform not installed"
        return self.summary()

    def summary(self, width: int = 90) -> str:
        """One line an operator can scan down a chain: the transform's English name, phase,
        the models it applies to, its non-default config, and whether it is off."""
        from transforms.registry import registry

        cls = registry.get(self.transform)
        name = cls.name.get("en", self.transform) if cls else self.transform
        models = "all models" if self.models is None else (", ".join(self.models) or "no models")
        defaults = cls.with_defaults({}) if cls else {}
        config = ", ".join(f"{k}={_short(v)}" for k, v in (self.config or {}).items() if defaults.get(k) != v)
        line = " · ".join(p for p in (name, self.phase, models, config) if p)
        if not self.enabled:
            line = f"[off] {line}"
        return line if len(line) <= width else line[: width - 1] + "…"

    def clean(self) -> None:
        from transforms.validation import validate_rule

        errors = validate_rule(
            transform=self.transform,
            scope=self.scope,
            phase=self.phase,
            models=self.models,
            config=self.config,
        )
        if errors:
            raise ValidationError(errors)


class GlobalTransformRule(TransformRule):
    """The global chain as its own admin page (a proxy: same table, rows with ``scope="global"``)."""

    class Meta:
        proxy = True
        verbose_name = "global transform rule"
        verbose_name_plural = "Global transform chain"

    def clean(self) -> None:
        # Rows of this proxy are global rules: fix the scope before validate_rule sees it
        # (the admin form runs full_clean() before save_model could set it).
        self.scope = "global"
        super().clean()


def _short(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"
