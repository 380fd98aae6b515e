"""Django settings. Everything an operator sets comes from the environment, read here only.

Django-level variables (read below, where Django needs them): ``GATEWAY_DATA_DIR`` (data/,
SQLite, spool, static), ``DEBUG`` (off), ``SECRET_KEY`` (else data/secret_key, generated),
``GATEWAY_REQUIRE_SECRET_KEY`` (off: refuse to start without SECRET_KEY when on),
``ALLOWED_HOSTS``, ``CSRF_TRUSTED_ORIGINS``, ``PORT`` (8000), ``DATABASE_URL`` (SQLite in
data/), ``DB_CONN_MAX_AGE`` (60), ``GATEWAY_TEST_DB`` (tests only), ``REDIS_URL`` (none),
``LOG_LEVEL`` (WARNING), ``GATEWAY_LOG_LEVEL`` (INFO), ``GATEWAY_DEFER_ADMIN`` (off; gateway.launch
sets it for its workers). The gateway's own tuning knobs are
``GATEWAY_KNOBS`` below, read by code through ``gateway.conf.gateway_settings``.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("GATEWAY_DATA_DIR", BASE_DIR / "data"))
DATA_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)


def _private_file(path: Path) -> None:
    """Create ``path`` (if missing) readable by its owner only, and tighten an existing one: the
    SQLite database holds encrypted channel keys, key hashes and captures (issue 13). SQLite
    creates its -wal/-shm files with the database file's mode."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)
        os.chmod(path, 0o600)
    except OSError:
        pass


def _bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = _bool("DEBUG", False)
# Set by gateway.launch for its serving workers: the admin's autodiscovery waits for the first
# request Django serves (gateway.admin_site), so a worker that only proxies never loads it.
GATEWAY_DEFER_ADMIN = _bool("GATEWAY_DEFER_ADMIN", False)


def _secret_key() -> str:
    key = os.environ.get("SECRET_KEY")
    if key:
        return key
    key_file = DATA_DIR / "secret_key"
    if key_file.exists():
        return key_file.read_text().strip()
    if not DEBUG and _bool("GATEWAY_REQUIRE_SECRET_KEY", False):
        raise RuntimeError("SECRET_KEY must be set when DEBUG is off in production")
    key = secrets.token_urlsafe(50)
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # private from the start
    with os.fdopen(fd, "w") as fh:
        fh.write(key)
    return key


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver").split(",")
    if h.strip()
]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]
PORT = int(os.environ.get("PORT", "8000"))

# Daphne (Channels' server, on Twisted) only serves ``manage.py runserver`` in development; the
# production servers do not need it, and importing it (its app module installs Twisted's reactor)
# cost every worker ~27 MB of RSS (issue 20: idle RSS). It must come first when it is there.
INSTALLED_APPS = [
    *(["daphne"] if "runserver" in sys.argv[1:2] else []),
    "gateway.admin_site.MonogateAdminConfig",  # django.contrib.admin with our site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "channels",
    "providers",
    "keys",
    "transforms",
    "captures",
    "requestlogs",
    "gateway",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "gateway.security.SecurityHeadersMiddleware",
    "gateway.nul_guard.NulCharacterMiddleware",  # %00 in a path or query: 400, not PostgreSQL's 500
    "gateway.security.LoginRateLimitMiddleware",
    # Static files for admin and viewer under the production ASGI server (the /v1 hot path never
    # reaches Django, so this costs it nothing).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, so its process_exception sees a view's database error first: 503 and a clear message.
    "gateway.dbdown.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "gateway.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # the source tree's templates/, or where the wheel installs them
        "DIRS": [BASE_DIR / "templates", Path(sys.prefix) / "share" / "monogate" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]
WSGI_APPLICATION = "gateway.wsgi.application"
ASGI_APPLICATION = "gateway.asgi.application"

# Production hardening (issue 13; gateway.security). With DEBUG off: cookies only over HTTPS
# (GATEWAY_SECURE_COOKIES=0 for a plain-HTTP set-up such as `make run`), HSTS on HTTPS answers,
# a content security policy on every Django page, and login rate limiting.
SECURE_COOKIES = _bool("GATEWAY_SECURE_COOKIES", not DEBUG)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_COOKIES
SESSION_COOKIE_HTTPONLY = True
SECURE_HSTS_SECONDS = 0 if DEBUG else int(os.environ.get("GATEWAY_HSTS_SECONDS", "31536000"))
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if os.environ.get("GATEWAY_TRUST_X_FORWARDED_PROTO") == "1":  # behind a TLS-terminating proxy
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CONTENT_SECURITY_POLICY = os.environ.get("GATEWAY_CONTENT_SECURITY_POLICY") or (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'"
)
LOGIN_RATE_LIMIT = 0 if DEBUG else int(os.environ.get("GATEWAY_LOGIN_RATE_LIMIT", "10"))
LOGIN_RATE_WINDOW = int(os.environ.get("GATEWAY_LOGIN_RATE_WINDOW", "300"))

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{DATA_DIR / 'gateway.sqlite3'}"),
        conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "60")),
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    if DATABASES["default"].get("NAME") and DATABASES["default"]["NAME"] != ":memory:":
        _private_file(Path(DATABASES["default"]["NAME"]))
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"].update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
    # One file per test process, so parallel runs never share a database; e2e tests hand this
    # path to the server they start.
    DATABASES["default"]["TEST"] = {
        "NAME": os.environ.get("GATEWAY_TEST_DB") or str(DATA_DIR / f"test-{os.getpid()}.sqlite3")
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns at start-up until collectstatic has made it
WHITENOISE_USE_FINDERS = True  # serve app static files even before collectstatic has run
LOGIN_URL = "/admin/login/"

REDIS_URL = os.environ.get("REDIS_URL", "")

REST_FRAMEWORK = {
    # Token first: an unauthenticated call then gets 401 with ``WWW-Authenticate: Token`` (with
    # session auth first DRF answers 403, which tells a script nothing about how to log in).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "gateway.api_errors.exception_handler",
}

# Celery: with REDIS_URL, captures are written by a Celery worker; without it, in-process.
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# The worker reconnects to a returning broker within a second, however long it was away
# (gateway/celery_consumer.py).
CELERY_WORKER_CONSUMER = "gateway.celery_consumer:QuickReconnectConsumer"
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# Publishing from the gateway fails fast when the broker is unreachable or silent (issue 13: a
# publish to a dead broker blocked ~6 s and the capture queue overflowed); the capture writer
# spools instead. ``GATEWAY_CAPTURE_BROKER_TIMEOUT`` seconds for connect and for each send.
_BROKER_TIMEOUT = float(os.environ.get("GATEWAY_CAPTURE_BROKER_TIMEOUT") or 1.0)
CELERY_BROKER_CONNECTION_TIMEOUT = _BROKER_TIMEOUT
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": _BROKER_TIMEOUT,
    "socket_timeout": _BROKER_TIMEOUT,
    "max_retries": 0,
    "connect_retries_timeout": _BROKER_TIMEOUT,
}
CELERY_BEAT_SCHEDULE = {
    "captures-retention": {"task": "captures.tasks.enforce_retention", "schedule": 3600.0},
    "request-logs-retention": {"task": "requestlogs.tasks.enforce_retention", "schedule": 3600.0},
}


# Gateway knobs: every GATEWAY_* environment variable the gateway reads, declared once here with
# its default and meaning. Code reads them through ``gateway.conf.gateway_settings`` (in the spirit
# of DRF's ``api_settings``), never from ``os.environ``. The environment variable of a knob is its
# name with a ``GATEWAY_`` prefix (``BREAKER_FAILURES`` <- ``GATEWAY_BREAKER_FAILURES``).
def flag(raw: object) -> bool:
    """A boolean knob: ``1``/``true``/``yes``/``on`` (any case) or a real bool."""
    return raw if isinstance(raw, bool) else str(raw).strip().lower() in {"1", "true", "yes", "on"}


GATEWAY_KNOBS: dict[str, tuple[type, object, str]] = {
    # name: (type, default, what it does)
    "MAX_BODY_BYTES": (int, 50 * 1024 * 1024, "Largest client request body accepted on /v1/*, in bytes."),
    "LARGE_BODY_BYTES": (int, 1024 * 1024, "A declared request body above this size counts as large."),
    "LARGE_BODY_CONCURRENCY": (
        int,
        4,
        "Large request bodies read and served at once per worker; others wait (0: no bound).",
    ),
    "LARGE_BODY_WAIT_SECONDS": (float, 30.0, "How long a large request waits for its turn before a 503."),
    "OFFLOAD_JSON_BYTES": (
        int,
        2 * 1024 * 1024,
        "Client JSON bodies above this size that carry base64 data (inline images) are parsed in the "
        "image pool, off the event loop (0: never).",
    ),
    "CONFIG_POLL_SECONDS": (
        float,
        0.5,
        "How often each worker polls the config version (off the request path).",
    ),
    "KEEPALIVE_SECONDS": (float, 15.0, "Keep-alive comment interval on idle client streams."),
    "UPSTREAM_IDLE_TIMEOUT": (float, 120.0, "Ceiling on the per-read upstream idle timeout, in seconds."),
    # Upstream stream limits (issue 13), seconds; 0 disables the knob's own value.
    "STREAM_FIRST_BYTE_TIMEOUT": (
        float,
        0.0,
        "Longest wait for a stream's first content event (0: the provider's request timeout).",
    ),
    "STREAM_IDLE_TIMEOUT": (
        float,
        0.0,
        "Longest gap between upstream stream events; keep-alives do not "
        "count (0: the global upstream idle timeout).",
    ),
    "INSTANCE_ID": (
        str,
        "",
        "Loop guard id sent upstream in x-monogate-hop; default derived from SECRET_KEY "
        "(shared by every worker and instance of a deployment).",
    ),
    "UPSTREAM_CLIENT": (
        str,
        "h1",
        "The upstream HTTP client: h1 (the gateway's lean HTTP/1.1 client) or aiohttp.",
    ),
    "UPSTREAM_SSRF_GUARD": (
        int,
        0,
        "1: channel URLs may not reach loopback, private or link-local addresses "
        "(checked on every resolved address).",
    ),
    # Client connections (gateway.serving, the uvicorn protocol make run and the e2e tests use).
    "CLIENT_HEADER_TIMEOUT": (float, 10.0, "Seconds a client has to send a request head (0: no limit)."),
    "CLIENT_BODY_TIMEOUT": (
        float,
        60.0,
        "Seconds a client has to send a request body after its head (0: no limit).",
    ),
    "CLIENT_MAX_CONNECTIONS": (
        int,
        1000,
        "Open client connections per worker; more are closed at once and logged (0: no cap).",
    ),
    "STREAM_MAX_SECONDS": (float, 1800.0, "Longest an upstream stream may last (0: no cap)."),
    # Passive circuit breaker per channel (proxy): failures within the window open it for the cooldown.
    "BREAKER_FAILURES": (int, 3, "Failures within the window that open a channel's breaker."),
    "BREAKER_WINDOW_SECONDS": (float, 30.0, "The breaker's failure-counting window."),
    "BREAKER_COOLDOWN_SECONDS": (float, 60.0, "How long an opened breaker keeps its channel out."),
    "BREAKER_RATE_LIMIT_COOLDOWN_SECONDS": (float, 15.0, "Cooldown after an upstream 429."),
    "HEALTH_PROBE_SECONDS": (
        float,
        0.0,
        "Active channel health probes every N seconds (Celery beat, needs "
        "REDIS_URL); a failed probe opens the channel's breaker. 0: off.",
    ),
    "TRUSTED_PROXY_CIDRS": (
        str,
        "127.0.0.0/8,::1/128",
        "Comma-separated proxies whose X-Forwarded-For names the client (API keys' IP "
        "allow-lists, the request log's client IP, /metrics access, the admin login limit); "
        "`none` trusts nobody (an empty value takes this default).",
    ),
    # Graceful shutdown (SIGTERM): uvicorn lets in-flight requests and streams finish for up to
    # SHUTDOWN_GRACE_SECONDS (the Makefile and README pass it as --timeout-graceful-shutdown), then
    # the lifespan shutdown flushes the capture queue for up to CAPTURE_FLUSH_SECONDS.
    "SHUTDOWN_GRACE_SECONDS": (
        float,
        30.0,
        "On SIGTERM, how long in-flight requests and streams may still run.",
    ),
    "CAPTURE_FLUSH_SECONDS": (
        float,
        10.0,
        "On shutdown, how long the capture (and request-log) queue may take to drain before "
        "what is left is spooled to disk.",
    ),
    # The garbage collector in each worker (gateway.proxy.app, bench/TAIL.md).
    "GC_GEN0_THRESHOLD": (
        int,
        7000,
        "Net container allocations between two young-generation collections in a worker "
        "(Python's default is 700); 0 keeps Python's own.",
    ),
    # Capture writer (captures.sink) and capture bounds (captures.bounds).
    "CAPTURE_QUEUE_MAX": (int, 1000, "Captures queued in memory per process before spooling to disk."),
    "CAPTURE_WRITER_SHARE": (
        float,
        0.1,
        "While its worker is busy, the share of a core the capture writer thread "
        "may take (the rest of the captures are shed and counted); 1 removes the limit.",
    ),
    "CAPTURE_SPOOL_MAX_MB": (float, 256.0, "Disk budget of the capture spool, in MiB."),
    "CAPTURE_RETRY_SECONDS": (float, 2.0, "Pause before the writer retries a failed capture write."),
    "CAPTURE_BROKER_TIMEOUT": (
        float,
        1.0,
        "Connect and send timeout of a capture publish to the broker, in seconds.",
    ),
    "CAPTURE_BROKER_COOLDOWN_SECONDS": (
        float,
        5.0,
        "After a broker or database outage, captures go straight to "
        "the spool for this long before delivery is tried again.",
    ),
    "CAPTURE_DEAD_LETTER_AFTER": (
        int,
        6,
        "Failed writes of one spooled capture (with backoff) before it is moved to the spool's dead/ folder.",
    ),
    "CAPTURE_MAX_ATTEMPTS": (int, 16, "Upstream attempts recorded per capture (at least 1)."),
    "CAPTURE_MAX_FRAMES": (int, 4096, "Stream frames recorded per capture (at least 0)."),
    "CAPTURE_MAX_FRAME_BYTES": (int, 256 * 1024, "Bytes kept of one recorded frame (at least 64)."),
    "CAPTURE_MAX_BYTES": (int, 16 * 1024 * 1024, "Bytes recorded per capture in all (at least 8 KiB)."),
    # Request logs (requestlogs): one row per /v1 answer, written off the request path.
    "REQUEST_LOGS": (bool, True, "Write a request-log row for every /v1 answer (on by default)."),
    "REQUEST_LOG_QUEUE_MAX": (
        int,
        10000,
        "Request-log rows queued in memory per process before spooling to disk.",
    ),
    "REQUEST_LOG_SPOOL_MAX_MB": (float, 256.0, "Disk budget of the request-log spool, in MiB."),
    "REQUEST_LOG_RETRY_SECONDS": (float, 2.0, "Pause before the writer retries a failed request-log write."),
    "REQUEST_LOG_KEYLESS_PER_SECOND": (
        float,
        20.0,
        "Per worker: rows and access lines per second for answers to "
        "requests without a valid API key (401, unknown paths); the rest are only "
        "counted (gateway_request_log_shed_total). 0: none; negative: all.",
    ),
    "REQUEST_LOG_RETENTION_DAYS": (
        int,
        90,
        "Request-log rows older than this are deleted (hourly, and purgerequestlogs).",
    ),
    # Observability (gateway.observe): /metrics access and the per-request log line.
    "METRICS_TOKEN": (
        str,
        "",
        "Bearer token that lets a scraper outside METRICS_ALLOW_CIDRS read /metrics; "
        "empty: no token accepted.",
    ),
    "METRICS_ALLOW_CIDRS": (
        str,
        "127.0.0.0/8,::1/128",
        "Comma-separated peer addresses that may read /metrics without the token.",
    ),
    "ACCESS_LOG_LEVEL": (
        str,
        "INFO",
        "Level of the one log line per /v1 request (logger gateway.access); DEBUG turns it off.",
    ),
    "LOG_FORMAT": (
        str,
        "text",
        "Console log format: text (readable access lines) or json (one JSON object per line).",
    ),
    # Secrets at rest (gateway.crypto); empty: derive from SECRET_KEY.
    "SECRETS_KEY": (
        str,
        "",
        "Master key for channel-key encryption and client-key hashes; default SECRET_KEY.",
    ),
    # Outbound fetches (gateway.fetch) and image work (gateway.images).
    "FETCH_ALLOW_PRIVATE": (
        flag,
        False,
        "Let the outbound fetcher reach loopback/private/link-local addresses for "  # type: ignore[dict-item]
        "the whole process (the global setting fetch_allow_private does it per config).",
    ),
    "IMAGE_POOL": (str, "process", "Where image work runs off the event loop: process (default) or thread."),
    "IMAGE_NICE": (
        int,
        10,
        "Niceness added to the image pool's worker processes, so the event loops win the CPU (0: none).",
    ),
    "IMAGE_WORKERS": (
        int,
        0,
        "Threads decoding/re-encoding images off the event loop; 0: CPUs - 1 (at least 1).",
    ),
    "IMAGE_MAX_ENCODED_BYTES": (
        int,
        20_971_520,
        "Largest image (decoded bytes) the compression pipeline touches.",
    ),
    "IMAGE_MAX_PIXELS": (
        int,
        40_000_000,
        "Largest image (width x height) decoded; larger ones are left (bombs).",
    ),
    "IMAGE_CACHE_MAX_BYTES": (
        int,
        64 * 1024 * 1024,
        "In-memory cache of compressed images, in base64 bytes.",
    ),
    "IMAGE_CACHE_MAX_ENTRY_BYTES": (int, 8 * 1024 * 1024, "Largest compressed image kept in that cache."),
}


def _knob(name: str, kind: type, default: object) -> object:
    raw = os.environ.get(f"GATEWAY_{name}")
    if raw is None or raw == "":
        return default
    if kind is bool:  # bool("0") is True: spell it out
        if raw.strip().lower() in {"1", "true", "yes", "on"}:
            return True
        if raw.strip().lower() in {"0", "false", "no", "off"}:
            return False
        raise RuntimeError(f"GATEWAY_{name}={raw!r}: expected true or false")
    try:
        return kind(raw)
    except ValueError as exc:
        raise RuntimeError(f"GATEWAY_{name}={raw!r}: expected {kind.__name__}") from exc


GATEWAY = {name: _knob(name, kind, default) for name, (kind, default, _doc) in GATEWAY_KNOBS.items()}

if GATEWAY["LOG_FORMAT"] not in ("text", "json"):
    raise RuntimeError(f"GATEWAY_LOG_FORMAT={GATEWAY['LOG_FORMAT']!r}: expected text or json")


def health_probe_schedule(redis_url: str, seconds: float) -> dict[str, dict[str, object]]:
    """The beat entry for channel health probes (providers.health): only with Redis and N > 0."""
    if not redis_url or seconds <= 0:
        return {}
    return {"channel-health-probes": {"task": "providers.tasks.probe_channels", "schedule": seconds}}


CELERY_BEAT_SCHEDULE.update(health_probe_schedule(REDIS_URL, float(GATEWAY["HEALTH_PROBE_SECONDS"])))  # type: ignore[arg-type]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"()": "gateway.observe.accesslog.TextFormatter"},
        "json": {"()": "gateway.observe.accesslog.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": GATEWAY["LOG_FORMAT"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    # gateway.access: one line per /v1 request at ACCESS_LOG_LEVEL (gateway.observe.accesslog)
    "loggers": {"gateway": {"level": os.environ.get("GATEWAY_LOG_LEVEL", "INFO")}},
}

# The live tail's channel layer (gateway.observe.live): Redis shares it between workers and
# instances; in memory, a viewer sees only the worker its WebSocket landed on.
CHANNEL_LAYERS = {
    "default": (
        {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [REDIS_URL]}}
        if REDIS_URL
        else {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    )
}
