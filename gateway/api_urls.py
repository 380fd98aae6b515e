"""REST API routes (Django REST framework, staff only: session or token auth). Owned by the
foundation; others may append a route with a minimal edit."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from captures.api import CaptureDetailView, CaptureListView
from gateway.api import SettingsView
from keys.api import ApiKeyViewSet
from providers.api import ProviderViewSet
from requestlogs.api import RequestLogDetailView, RequestLogListView
from transforms.api import RegistryView, TransformRuleViewSet

router = DefaultRouter()
router.register("providers", ProviderViewSet, basename="provider")
router.register("api-keys", ApiKeyViewSet, basename="apikey")
router.register("transforms/rules", TransformRuleViewSet, basename="transformrule")

urlpatterns = [
    path("transforms/registry", RegistryView.as_view(), name="transform-registry"),
    path("settings/", SettingsView.as_view(), name="settings"),
    path("captures/", CaptureListView.as_view(), name="capture-list"),
    path("captures/<path:request_id>/", CaptureDetailView.as_view(), name="capture-detail"),
    path("request-logs/", RequestLogListView.as_view(), name="requestlog-list"),
    path("request-logs/<path:request_id>/", RequestLogDetailView.as_view(), name="requestlog-detail"),
    path("", include(router.urls)),
]
