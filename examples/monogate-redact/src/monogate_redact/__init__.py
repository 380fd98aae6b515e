"""Example Monogate transform plug-in (see README.md). The gateway finds the transform through the
``monogate.transforms`` entry point declared in pyproject.toml, not through this package's name."""

from monogate_redact.transform import RedactPatterns

__all__ = ["RedactPatterns"]
