from django.apps import AppConfig


class TransformsConfig(AppConfig):
    name = "transforms"
    verbose_name = "Transforms"
