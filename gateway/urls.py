from django.contrib import admin
from django.urls import include, path

from gateway.playground_views import playground_page
from gateway.views import landing

urlpatterns = [
    path("", landing, name="landing"),
    path("admin/playground/", admin.site.admin_view(playground_page), name="admin-playground"),
    path("admin/", admin.site.urls),
    path("api/", include("gateway.api_urls")),
    path("captures/", include("captures.urls")),
]
