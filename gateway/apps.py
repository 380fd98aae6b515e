from django.apps import AppConfig


class GatewayConfig(AppConfig):
    name = "gateway"
    verbose_name = "Gateway"

    def ready(self) -> None:
        # The global-chain proxy model lives in transforms.admin; make sure it is registered
        # before collecting the models whose saves must bump the config version.
        import transforms.admin  # noqa: F401
        from gateway import signals

        signals.connect()
