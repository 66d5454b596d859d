"""Liveness and readiness (docs/api.md, "Operations").

``/healthz`` says the process serves and touches nothing else. ``/readyz`` asks the
database (one ``SELECT 1``), the migrations (one read of ``django_migrations``,
against the migrations on disk, read once per process) and each cache (one ``get``),
so a load balancer can poll it every second. Neither is throttled: they are plain
Django views, outside DRF; ``GET /healthz`` is answered by ``HealthzMiddleware``,
high in the stack, before the URL resolver.
"""

from collections.abc import Callable
from functools import cache

from django.conf import settings
from django.core.cache import caches
from django.db import DatabaseError, connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import ResolverMatch, resolve
from django.views.decorators.http import require_GET

from projektor.middleware import RETRY_AFTER_SECONDS

OK = "ok"
PROBE_KEY = "projektor:readyz"

Migration = tuple[str, str]


HEALTHZ_PATH = "/healthz"
HEALTHZ_BODY = b'{"status": "ok"}'  # what JsonResponse({"status": OK}) writes


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    return healthz_response()


def healthz_response() -> HttpResponse:
    response = HttpResponse(HEALTHZ_BODY, content_type="application/json")
    response["Content-Length"] = str(len(HEALTHZ_BODY))
    return response


class HealthzMiddleware:
    """``GET /healthz`` answered here, below the request log and the security headers:
    a load balancer polls it every second or so, and the URL resolver, CSRF's view hook
    and the rest of the stack have nothing to say about it. The Host is still checked
    (a Host outside ALLOWED_HOSTS is 400, as everywhere), the log line and the metrics
    still name its route, and any other method goes on to the view (405)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.match: ResolverMatch | None = None  # the route, for the log and the metrics

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info != HEALTHZ_PATH or request.method != "GET":
            return self.get_response(request)
        request.get_host()  # raises DisallowedHost for a Host outside ALLOWED_HOSTS
        if self.match is None:
            self.match = resolve(HEALTHZ_PATH)
        request.resolver_match = self.match
        return healthz_response()


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    checks = readiness()
    failing = [name for name, result in checks.items() if result != OK]
    if not failing:
        return JsonResponse({"status": OK, "checks": checks})
    response = JsonResponse(
        {
            "status": "unavailable",
            "code": "unavailable",
            "detail": f"Not ready: {', '.join(failing)}.",
            "failing": failing,
            "checks": checks,
        },
        status=503,
    )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def readiness() -> dict[str, str]:
    """Each check's result: ``"ok"``, or a sentence saying what is wrong."""
    checks = {"database": check_database()}
    if checks["database"] == OK:
        checks["migrations"] = check_migrations()
    else:
        checks["migrations"] = "not checked: the database does not answer"
    checks["cache"] = check_caches()
    return checks


def failure(error: Exception) -> str:
    return f"{type(error).__name__}: {str(error).strip() or 'no detail'}"[:300]


def check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as error:
        return failure(error)
    return OK


@cache
def migrations_on_disk() -> dict[Migration, tuple[Migration, ...]]:
    """Every migration the code has, each with those it replaces (a squash counts as
    applied when they all are). The code does not change under a running process."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    return {
        key: tuple(tuple(replaced) for replaced in loader.graph.nodes[key].replaces)
        for key in loader.graph.nodes
    }


def missing_migrations() -> list[str]:
    applied = set(MigrationRecorder.Migration.objects.values_list("app", "name"))
    return sorted(
        f"{app}.{name}"
        for (app, name), replaces in migrations_on_disk().items()
        if (app, name) not in applied
        and not (replaces and all(replaced in applied for replaced in replaces))
    )


def check_migrations() -> str:
    try:
        missing = missing_migrations()
    except DatabaseError as error:
        return failure(error)
    if not missing:
        return OK
    shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
    return f"{len(missing)} not applied ({shown}): run `python manage.py migrate`"


def check_caches() -> str:
    for alias in settings.CACHES:
        try:
            caches[alias].get(PROBE_KEY)
        except Exception as error:  # noqa: BLE001 - any backend's failure means "not ready"
            return f"{alias}: {failure(error)}"
    return OK
