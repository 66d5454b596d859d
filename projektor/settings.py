"""Projektor settings, read from the environment.

DATABASE_URL selects the database (SQLite file by default); SECRET_KEY, DEBUG,
ALLOWED_HOSTS and PROJEKTOR_SESSION_TTL_SECONDS are read the same way.
"""

import importlib.util
import os
import re
import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from coordination.api.reference import spectacular as reference
from projektor.operations.logs import FORMATS, logging_config

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off", ""}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean, not {raw!r}")


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    SECRET_KEY = "insecure-development-key-not-for-production"
ALLOWED_HOSTS = [h for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1").split(",") if h]

# PROJEKTOR_HTTPS says the site is served over HTTPS only (TLS in gunicorn, or a proxy
# that terminates it and sends X-Forwarded-Proto, which gunicorn trusts from the
# addresses in FORWARDED_ALLOW_IPS). Then plain http is redirected, cookies are
# https-only and browsers are told to keep to https (HSTS). Off by default, so that
# `make run`, the tests and a plain-http deployment on a trusted network work; a
# production deployment sets it, and `manage.py check --deploy` warns until it does.
PROJEKTOR_HTTPS = env_bool("PROJEKTOR_HTTPS", False)
SECURE_SSL_REDIRECT = PROJEKTOR_HTTPS
SESSION_COOKIE_SECURE = PROJEKTOR_HTTPS
CSRF_COOKIE_SECURE = PROJEKTOR_HTTPS
SECURE_HSTS_SECONDS = (
    int(os.environ.get("PROJEKTOR_HSTS_SECONDS", "31536000")) if PROJEKTOR_HTTPS else 0
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("PROJEKTOR_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("PROJEKTOR_HSTS_PRELOAD", False)
SILENCED_SYSTEM_CHECKS = [
    # W021 asks for the HSTS "preload" directive. Serving it consents to the browsers'
    # preload list for the whole registrable domain, a choice for the domain's owner
    # (at hstspreload.org), which one app on one host cannot make for them: it is
    # opt-in with PROJEKTOR_HSTS_PRELOAD.
    "security.W021",
]

# One TTL for every liveness decision (invariant 1 (liveness)): sessions, and through them
# leases, file claims and worktree locks.
PROJEKTOR_SESSION_TTL_SECONDS = int(os.environ.get("PROJEKTOR_SESSION_TTL_SECONDS", "120"))
if PROJEKTOR_SESSION_TTL_SECONDS < 1:
    raise ImproperlyConfigured("PROJEKTOR_SESSION_TTL_SECONDS must be a positive integer")
# A live session with no progress for this long is stalled (invariant 17 (stalled is derived)): a
# signal to people, never a reclaim.
PROJEKTOR_STALL_AFTER_SECONDS = int(os.environ.get("PROJEKTOR_STALL_AFTER_SECONDS", "1800"))
if PROJEKTOR_STALL_AFTER_SECONDS < 1:
    raise ImproperlyConfigured("PROJEKTOR_STALL_AFTER_SECONDS must be a positive integer")


def env_rate(name: str, default: str) -> str | None:
    """A rate like ``6000/min``, or ``off``: that scope is then not counted at all."""
    rate = os.environ.get(name, default)
    if rate == "off":
        return None
    if not re.fullmatch(r"[0-9]+/(s|sec|second|m|min|minute|h|hour|d|day)", rate):
        raise ImproperlyConfigured(f"{name} must look like 6000/min (s, min, hour, day) or off")
    return rate


# Rate limits (docs/api.md): per API key, and per client address for requests without one.
PROJEKTOR_THROTTLE_KEY = env_rate("PROJEKTOR_THROTTLE_KEY", "6000/min")
PROJEKTOR_THROTTLE_ANON = env_rate("PROJEKTOR_THROTTLE_ANON", "120/min")
PROJEKTOR_NUM_PROXIES = int(os.environ.get("PROJEKTOR_NUM_PROXIES", "0"))


def env_positive(name: str, default: str) -> int:
    raw = os.environ.get(name, default)
    if not raw.isdigit() or int(raw) < 1:
        raise ImproperlyConfigured(f"{name} must be a positive integer, not {raw!r}")
    return int(raw)


# The event log and its webhooks (docs/api.md, Events).
PROJEKTOR_EVENT_RETENTION_DAYS = env_positive("PROJEKTOR_EVENT_RETENTION_DAYS", "30")
# An SSE stream is closed by the server after this long (EventSource reconnects).
PROJEKTOR_EVENT_STREAM_SECONDS = env_positive("PROJEKTOR_EVENT_STREAM_SECONDS", "60")
PROJEKTOR_EVENT_STREAM_KEEPALIVE_SECONDS = env_positive(
    "PROJEKTOR_EVENT_STREAM_KEEPALIVE_SECONDS", "15"
)
PROJEKTOR_WEBHOOK_RETRY_HOURS = env_positive("PROJEKTOR_WEBHOOK_RETRY_HOURS", "24")
PROJEKTOR_WEBHOOK_ALLOW_PRIVATE = env_bool("PROJEKTOR_WEBHOOK_ALLOW_PRIVATE", False)

INSTALLED_APPS = [
    "coordination.apps.ProjektorAdminConfig",  # django.contrib.admin, with our site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "coordination",
    "heatmap",
    "projektor.operations",
]
# The demo (seed_demo, demo_fleet: what make run serves) and the benches (manage.py
# bench, bench_claims, ...) are a checkout's: not in the wheel, so a deployment runs
# without them.
INSTALLED_APPS += [app for app in ("demo", "benchmarks") if importlib.util.find_spec(app)]

MIDDLEWARE = [
    # Outermost: the request id, one log line and the request metrics for every answer.
    "projektor.operations.requests.RequestLogMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # GET /healthz answered here: the probe needs nothing below (operations/health.py).
    "projektor.operations.health.HealthzMiddleware",
    # Under gunicorn, at most PROJEKTOR_ACTIVE_REQUESTS at once; a waiter's sleep does
    # not count (operations/active.py).
    "projektor.operations.active.ActiveRequestsMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # 503 `unavailable` while the database is down; above sessions and auth, which use it.
    "projektor.middleware.DatabaseUnavailableMiddleware",
    "django.middleware.common.CommonMiddleware",
    # From Start to End, for the pages only: a call under /api/, /mcp or a probe's path
    # that carries no session cookie goes past them (projektor/middleware.py).
    "projektor.middleware.PagesOnlyStart",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "projektor.middleware.PagesOnlyEnd",
]

ROOT_URLCONF = "projektor.urls"
WSGI_APPLICATION = "projektor.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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

# Requests of one process that run at once; 0: no limit (operations/active.py). gunicorn
# sets it to its working threads (gunicorn.conf.py).
PROJEKTOR_ACTIVE_REQUESTS = int(os.environ.get("PROJEKTOR_ACTIVE_REQUESTS", "0"))

PREPARE_THRESHOLD = 5  # psycopg's own default: executions before a statement is prepared
# How long an app server's thread keeps its database connection between requests; 0
# closes it after each one (a server that must hold no idle connections). Django's
# development server (``runserver``, as ``make run`` serves) starts a thread per
# connection: a connection kept by a thread that ends is never used again, and they
# piled up (two open files each) until the process ran out of descriptors. There the
# default is 0.
DEVELOPMENT_SERVER = sys.argv[1:2] == ["runserver"]
PROJEKTOR_CONN_MAX_AGE = os.environ.get(
    "PROJEKTOR_CONN_MAX_AGE", "0" if DEVELOPMENT_SERVER else "60"
)
if not PROJEKTOR_CONN_MAX_AGE.isdigit():
    raise ImproperlyConfigured(
        f"PROJEKTOR_CONN_MAX_AGE must be a whole number of seconds, not {PROJEKTOR_CONN_MAX_AGE!r}"
    )
DATABASES = {
    # Health checks: a persistent connection the server dropped (restart, outage) is
    # tested before its first use in a request and replaced, not reused and failed.
    "default": dj_database_url.config(
        default=f"sqlite:///{BASE_DIR / 'projektor.sqlite3'}",
        conn_max_age=int(PROJEKTOR_CONN_MAX_AGE),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers run beside the one writer; IMMEDIATE takes the write lock at
    # BEGIN so two claimers queue (busy timeout) instead of failing on lock upgrade.
    # Connections persist like PostgreSQL's (CONN_MAX_AGE above): opening one and
    # running its PRAGMAs again on every request cost a third of a heartbeat.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend, plus the prepared cursor that the services' SQL runs on.
    DATABASES["default"]["ENGINE"] = "projektor.postgresql"
    # No JIT: it compiles any statement estimated to cost more than ``jit_above_cost``,
    # and over a long history a board or heatmap page's estimate passes that while its
    # run takes milliseconds (one board: 0.56 s compiling, 0.25 s running).
    options = DATABASES["default"].setdefault("OPTIONS", {})
    options["options"] = f"-c jit=off {options.get('options', '')}".strip()
    # Prepared statements: once a connection has run a statement of the services' SQL
    # five times it prepares it, so the server parses and plans the hot paths'
    # statements once per connection, not on every call (projektor/postgresql/base.py).
    # Off for a pooler that cannot keep a session's prepared statements (PgBouncer
    # before 1.21 in transaction mode): the services' SQL then runs on Django's cursors.
    if env_bool("PROJEKTOR_PG_PREPARED_STATEMENTS", True):
        options["prepare_threshold"] = PREPARE_THRESHOLD

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Where collectstatic writes and WhiteNoise serves from (with DEBUG off).
STATIC_ROOT = Path(os.environ.get("PROJEKTOR_STATIC_ROOT", BASE_DIR / "staticfiles"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "heatmap.staticfiles.PlotlyJsFinder",  # plotly.js from the plotly package: no CDN
]
# Managers log in here (members need not be staff); operators may use /admin/ too.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "workspaces"
LOGOUT_REDIRECT_URL = "login"

# A cache every app process sees: the rate-limit counters must hold across them all.
# Redis when REDIS_URL is set; else tables in the database (made by a post_migrate
# hook running createcachetable). "throttle" holds only the rate-limit counters: on
# SQLite in a database file of their own beside the database's, so that counting a
# request never takes the coordination database's one write lock (projektor.counters).
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    _redis = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        # Every API request counts in Redis: an unreachable one costs a second at most.
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    }
    CACHES = {"default": _redis, "throttle": {**_redis, "KEY_PREFIX": "throttle"}}
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "projektor_cache",
        },
        "throttle": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "projektor_throttle",
        },
    }
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        # LOCATION empty: "<database file>-throttle", beside whichever database is in use.
        CACHES["throttle"] = {"BACKEND": "projektor.counters.SQLiteCounterCache", "LOCATION": ""}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "coordination.api.auth.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # The workspace first, then who may do what (invariant 13 (the key is the actor)): every API
    # view.
    "DEFAULT_PERMISSION_CLASSES": [
        "coordination.api.auth.WorkspaceMember",
        "coordination.api.access.KeyAccess",
    ],
    # orjson behind DRF's JSON renderer and parser, byte for byte (coordination/api/renderers.py).
    "DEFAULT_PARSER_CLASSES": ["coordination.api.renderers.FastJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["coordination.api.renderers.FastJSONRenderer"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "coordination.api.renderers.FastContentNegotiation",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "coordination.api.exceptions.exception_handler",
    "UNAUTHENTICATED_USER": None,
    # docs/api.md "Rate limits": per key, else per client address, counted in the shared
    # ``throttle`` cache (coordination/api/throttling.py says how and why).
    "DEFAULT_THROTTLE_CLASSES": [
        "coordination.api.throttling.ApiKeyRateThrottle",
        "coordination.api.throttling.AddressRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {"key": PROJEKTOR_THROTTLE_KEY, "anon": PROJEKTOR_THROTTLE_ANON},
    # The client address is REMOTE_ADDR; behind N proxies, the Nth address from the
    # right of X-Forwarded-For (which the client itself can write to, on the left).
    "NUM_PROXIES": PROJEKTOR_NUM_PROXIES,
}

# The reference at /api/v1/docs/: drf-spectacular's settings are kept beside the code
# that builds it (coordination/api/reference/).
SPECTACULAR_SETTINGS = reference.SPECTACULAR_SETTINGS

# Operations (docs/api.md, "Operations"): /metrics answers loopback addresses, and
# others that send this token as a bearer; the log is one line per record (text or JSON).
PROJEKTOR_METRICS_TOKEN = os.environ.get("PROJEKTOR_METRICS_TOKEN", "")
PROJEKTOR_LOG_FORMAT = os.environ.get("PROJEKTOR_LOG_FORMAT", "text")
if PROJEKTOR_LOG_FORMAT not in FORMATS:
    raise ImproperlyConfigured(f"PROJEKTOR_LOG_FORMAT must be one of {', '.join(FORMATS)}")
PROJEKTOR_LOG_REQUESTS = env_bool("PROJEKTOR_LOG_REQUESTS", True)
LOGGING = logging_config(PROJEKTOR_LOG_FORMAT, requests=PROJEKTOR_LOG_REQUESTS)
