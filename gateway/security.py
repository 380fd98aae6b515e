"""Production hardening for the Django side (admin, viewer, REST API; issue 13). The /v1 hot
path never reaches Django, so none of this costs it anything.

- ``SecurityHeadersMiddleware``: a Content-Security-Policy on every Django response (the admin
  and the viewer render operator- and client-supplied text; the policy keeps a slipped-through
  injection from loading or sending anything elsewhere). Inline scripts stay allowed: the viewer
  and the key page ship small inline scripts.
- ``LoginRateLimitMiddleware``: after ``LOGIN_RATE_LIMIT`` failed logins from one address within
  ``LOGIN_RATE_WINDOW`` seconds, further login POSTs from it get 429 until the window passes.
  Counted per worker process (a password guesser spread over N workers gets N times the limit;
  put a shared limit in the load balancer for more).

Settings (``gateway.settings``): ``CONTENT_SECURITY_POLICY``, ``LOGIN_RATE_LIMIT`` (0: off; off
when DEBUG), ``LOGIN_RATE_WINDOW``.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse

_failures: dict[str, deque[float]] = {}
_lock = threading.Lock()
MAX_TRACKED = 10_000  # addresses remembered at most (oldest forgotten first)


def _client_ip(request: HttpRequest | None) -> str:
    if request is None:
        return "?"
    return str(request.META.get("REMOTE_ADDR") or "?")


def _recent(ip: str, now: float) -> deque[float]:
    window = float(getattr(settings, "LOGIN_RATE_WINDOW", 300))
    q = _failures.get(ip)
    if q is None:
        return deque()
    while q and now - q[0] > window:
        q.popleft()
    return q


@receiver(user_login_failed, dispatch_uid="gateway-login-failed")
def _on_failed(sender, credentials=None, request=None, **kwargs) -> None:
    ip = _client_ip(request)
    now = time.monotonic()
    with _lock:
        if ip not in _failures and len(_failures) >= MAX_TRACKED:
            _failures.pop(next(iter(_failures)))
        q = _failures.setdefault(ip, deque())
        q.append(now)
        _recent(ip, now)


@receiver(user_logged_in, dispatch_uid="gateway-login-ok")
def _on_login(sender, request=None, user=None, **kwargs) -> None:
    with _lock:
        _failures.pop(_client_ip(request), None)


def reset() -> None:
    """Forget every counted failure (tests)."""
    with _lock:
        _failures.clear()


class LoginRateLimitMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = int(getattr(settings, "LOGIN_RATE_LIMIT", 0))
        if limit > 0 and request.method == "POST" and request.path.endswith("/login/"):
            with _lock:
                failures = len(_recent(_client_ip(request), time.monotonic()))
            if failures >= limit:
                window = int(getattr(settings, "LOGIN_RATE_WINDOW", 300))
                response = HttpResponse(
                    "Too many failed logins from this address; try again later.\n",
                    status=429,
                    content_type="text/plain; charset=utf-8",
                )
                response["Retry-After"] = str(window)
                return response
        return self.get_response(request)


class SecurityHeadersMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy = getattr(settings, "CONTENT_SECURITY_POLICY", "")
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response
