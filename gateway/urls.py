from django.contrib import admin
from django.urls import include, path

from gateway.views import landing

urlpatterns = [
    path("", landing, name="landing"),
    path("admin/", admin.site.urls),
    path("api/", include("gateway.api_urls")),
    path("captures/", include("captures.urls")),
]
