from django.apps import AppConfig


class TransformsConfig(AppConfig):
    name = "transforms"
    verbose_name = "Transforms"

    def ready(self) -> None:
        """Fill the default registry once per process: built-ins by autodiscovery, then plug-ins
        from the ``monogate.transforms`` entry points (a failing plug-in is logged and reported by
        the system check, never raised). Registers the system check that validates them all."""
        from transforms import checks  # noqa: F401  (registers the check)
        from transforms.registry import registry

        if not len(registry):
            registry.load()
