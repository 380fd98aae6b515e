from django.apps import AppConfig


class RequestLogsConfig(AppConfig):
    name = "requestlogs"
    verbose_name = "Request logs and usage"
