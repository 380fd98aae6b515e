"""REST API routes (Django REST framework, staff only: session or token auth). Owned by the
foundation; others may append a route with a minimal edit."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from captures.api import CaptureDetailView, CaptureListView
from gateway.api import SettingsView
from gateway.api_root import ApiRootView
from gateway.playground_views import PlaygroundView
from keys.api import ApiKeyViewSet
from providers.api import ProviderViewSet
from requestlogs.api import RequestLogDetailView, RequestLogListView
from transforms.api import RegistryView, TransformRuleViewSet

router = DefaultRouter(trailing_slash="/")
router.include_root_view = False  # ApiRootView lists every endpoint, not only the router's
router.register("providers", ProviderViewSet, basename="provider")
router.register("api-keys", ApiKeyViewSet, basename="apikey")
router.register("transforms/rules", TransformRuleViewSet, basename="transformrule")

urlpatterns = [
    path("", ApiRootView.as_view(), name="api-root"),
    path("transforms/registry/", RegistryView.as_view(), name="transform-registry"),
    # the documented address without the slash keeps working (every other endpoint ends in one)
    path("transforms/registry", RegistryView.as_view()),
    path("settings/", SettingsView.as_view(), name="settings"),
    path("playground/", PlaygroundView.as_view(), name="playground"),
    path("captures/", CaptureListView.as_view(), name="capture-list"),
    path("captures/<path:request_id>/", CaptureDetailView.as_view(), name="capture-detail"),
    path("request-logs/", RequestLogListView.as_view(), name="requestlog-list"),
    path("request-logs/<path:request_id>/", RequestLogDetailView.as_view(), name="requestlog-detail"),
    path("", include(router.urls)),
]
