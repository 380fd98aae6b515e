"""REST API routes (Django REST framework, staff only). Each app adds its own routes here."""

from django.urls import path

from transforms.api import RegistryView

urlpatterns = [
    path("transforms/registry", RegistryView.as_view(), name="transform-registry"),
]
