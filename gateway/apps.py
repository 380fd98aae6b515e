from django.apps import AppConfig


class GatewayConfig(AppConfig):
    name = "gateway"
    verbose_name = "Gateway"

    def ready(self) -> None:
        from gateway import signals

        signals.connect()
