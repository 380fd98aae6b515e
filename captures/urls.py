"""The capture viewer, mounted at ``/captures/``."""

from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy

from captures import views
from gateway.observe.views import live_tail

app_name = "captures"

urlpatterns = [
    path("", views.capture_list, name="list"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="captures/login.html", next_page=reverse_lazy("captures:list")
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(next_page=reverse_lazy("captures:login")), name="logout"),
    path("live/", live_tail, name="live"),
    path("raw/<path:request_id>", views.capture_raw, name="raw"),
    path("replay/<path:request_id>", views.capture_replay, name="replay"),
    path("<path:request_id>/", views.capture_detail, name="detail"),
]
