from django.apps import AppConfig


class CapturesConfig(AppConfig):
    name = "captures"
    verbose_name = "Request captures"
