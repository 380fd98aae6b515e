"""Production hardening for the Django side (admin, viewer, REST API; issue 13). The /v1 hot
path never reaches Django, so none of this costs it anything.

- ``SecurityHeadersMiddleware``: a Content-Security-Policy on every Django response (the admin
  and the viewer render operator- and client-supplied text; the policy keeps a slipped-through
  injection from loading or sending anything elsewhere). Inline scripts stay allowed: the viewer
  and the key page ship small inline scripts.
- ``LoginRateLimitMiddleware``: at most ``LOGIN_RATE_LIMIT`` failed logins from one address per
  ``LOGIN_RATE_WINDOW`` seconds; further login POSTs from it get 429 until the window passes.
  Counted in Redis with ``REDIS_URL``, else in the database, so every worker and instance shares
  one count (``gateway.login_limit``); while that store is unreachable, per process (logged).

Settings (``gateway.settings``): ``CONTENT_SECURITY_POLICY``, ``LOGIN_RATE_LIMIT`` (0: off; off
when DEBUG), ``LOGIN_RATE_WINDOW``.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse

from gateway.login_limit import DbLimiter, Limiter, LimiterUnavailable, LocalLimiter, RedisLimiter

log = logging.getLogger("gateway.security")
MAX_TRACKED = 10_000  # addresses the per-process fallback remembers at most (oldest forgotten first)
_local = LocalLimiter(MAX_TRACKED)
_db = DbLimiter()
_redis: dict[str, RedisLimiter] = {}
_state = {"down": False}
_lock = threading.Lock()
_OUTCOME = "_gateway_login_outcome"


def _client_ip(request: HttpRequest | None) -> str:
    """The address the login limit counts: behind a trusted proxy (``GATEWAY_TRUSTED_PROXY_CIDRS``)
    the client its X-Forwarded-For names, as for API keys, else the peer (``REMOTE_ADDR``)."""
    if request is None:
        return "?"
    from gateway.proxy.limits import forwarded_client
    from gateway.wiring import trusted_proxies

    meta = request.META
    forwarded = meta.get("HTTP_X_FORWARDED_FOR") or meta.get("HTTP_X_REAL_IP") or ""
    return forwarded_client(str(meta.get("REMOTE_ADDR") or ""), str(forwarded), trusted_proxies()) or "?"


def _shared() -> Limiter:
    """Redis with ``REDIS_URL`` (one client per URL, made on first use), else the database."""
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return _db
    with _lock:
        if url not in _redis:
            _redis[url] = RedisLimiter.from_url(url)
        return _redis[url]


def _store_health(down: bool, error: Exception | None = None) -> None:
    """Log each change between the shared store and the per-process fallback, once."""
    if down and not _state["down"]:
        log.warning("login rate limit: shared store unreachable (%s); counting per process", error)
    elif not down and _state["down"]:
        log.warning("login rate limit: shared store reachable again; counting across workers")
    _state["down"] = down


def _acquire(key: str, limit: int, window: int) -> tuple[Limiter, bool, int]:
    """Take a slot in the shared store, or in this process's fallback when the store fails."""
    store = _shared()
    try:
        admitted, retry_after = store.acquire(key, limit, window)
    except LimiterUnavailable as exc:
        _store_health(True, exc)
        admitted, retry_after = _local.acquire(key, limit, window)
        return _local, admitted, retry_after
    _store_health(False)
    return store, admitted, retry_after


def _settle(store: Limiter, key: str, outcome: str | None) -> None:
    """A failed login keeps its slot; a success clears the count; anything else gives it back."""
    if outcome == "failed":
        return
    try:
        store.clear(key) if outcome == "ok" else store.release(key)
    except LimiterUnavailable as exc:
        _store_health(True, exc)


@receiver(user_login_failed, dispatch_uid="gateway-login-failed")
def _on_failed(sender, credentials=None, request=None, **kwargs) -> None:
    if request is not None:
        setattr(request, _OUTCOME, "failed")


@receiver(user_logged_in, dispatch_uid="gateway-login-ok")
def _on_login(sender, request=None, user=None, **kwargs) -> None:
    if request is not None:
        setattr(request, _OUTCOME, "ok")


def reset() -> None:
    """Forget every counted failure: this process's, the database's and Redis's (tests)."""
    from gateway.models import LoginThrottle

    _local.reset()
    LoginThrottle.objects.all().delete()
    url = getattr(settings, "REDIS_URL", "")
    if url:
        from redis.exceptions import RedisError

        limiter = _shared()
        try:
            if isinstance(limiter, RedisLimiter):
                keys = list(limiter.client.scan_iter(match=limiter.prefix + "*"))
                if keys:
                    limiter.client.delete(*keys)
        except RedisError:
            pass  # a test of Redis being down


class LoginRateLimitMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = int(getattr(settings, "LOGIN_RATE_LIMIT", 0))
        if not (limit > 0 and request.method == "POST" and request.path.endswith("/login/")):
            return self.get_response(request)
        key = "ip:" + _client_ip(request)
        window = int(getattr(settings, "LOGIN_RATE_WINDOW", 300))
        store, admitted, retry_after = _acquire(key, limit, window)
        if not admitted:
            response = HttpResponse(
                "Too many failed logins from this address; try again later.\n",
                status=429,
                content_type="text/plain; charset=utf-8",
            )
            response["Retry-After"] = str(retry_after)
            return response
        try:
            response = self.get_response(request)
        finally:
            _settle(store, key, getattr(request, _OUTCOME, None))
        return response


class SecurityHeadersMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy = getattr(settings, "CONTENT_SECURITY_POLICY", "")
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response
