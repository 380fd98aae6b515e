"""The landing page at ``/``: where everything is, for someone who just ran ``make run``.

It shows no configuration (it is public): only the addresses of the admin, the capture viewer,
the REST API and the SDK base URL, and how to point each official SDK at them."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def landing(request: HttpRequest) -> HttpResponse:
    root = request.build_absolute_uri("/").rstrip("/")
    return render(request, "landing.html", {"root": root, "sdk_base": f"{root}/v1"})
