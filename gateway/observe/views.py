"""The live-tail page (``/captures/live/``, staff only): the table fills from the WebSocket at
``/captures/live/ws`` (``gateway.observe.consumer``). An ordinary Django view, off the hot path."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse_lazy


@login_required(login_url=reverse_lazy("captures:login"))
def live_tail(request: HttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        raise PermissionDenied("the live tail is for staff")
    return render(request, "captures/live.html", {"title": "Live tail"})
