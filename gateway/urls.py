from django.contrib import admin
from django.urls import include, path

from gateway.playground_views import playground_page

urlpatterns = [
    path("admin/playground/", admin.site.admin_view(playground_page), name="admin-playground"),
    path("admin/", admin.site.urls),
    path("api/", include("gateway.api_urls")),
    path("captures/", include("captures.urls")),
]
