"""``gateway_settings``: the gateway's knobs, read from ``settings.GATEWAY``.

In the spirit of DRF's ``api_settings``: every knob is declared once, with its default and what it
does, in ``gateway.settings.GATEWAY_KNOBS`` (filled from ``GATEWAY_*`` environment variables);
code reads ``gateway_settings.BREAKER_FAILURES`` instead of the environment or
``settings.GATEWAY[...]``. A project that sets ``GATEWAY`` itself may leave knobs out: they take
their declared default. ``override_settings(GATEWAY=...)`` in tests is honoured (the cache is
dropped on ``setting_changed``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.signals import setting_changed


def _declared() -> dict[str, tuple[type, object, str]]:
    from gateway.settings import GATEWAY_KNOBS

    return GATEWAY_KNOBS


class GatewaySettings:
    """Attribute access to the knobs; an undeclared name is an AttributeError, not a silent None."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._cache[name]
        except KeyError:
            pass
        declared = _declared()
        if name not in declared:
            raise AttributeError(
                f"unknown gateway setting {name!r} (declare it in gateway.settings.GATEWAY_KNOBS)"
            )
        kind, default, _doc = declared[name]
        configured = getattr(settings, "GATEWAY", {}) or {}
        value = kind(configured[name]) if name in configured else default
        self._cache[name] = value
        return value

    def reload(self) -> None:
        self._cache.clear()


gateway_settings = GatewaySettings()


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "GATEWAY":
        gateway_settings.reload()


setting_changed.connect(_on_setting_changed, dispatch_uid="gateway-conf-reload")
