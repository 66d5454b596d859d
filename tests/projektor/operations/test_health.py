"""/healthz and /readyz: JSON, cheap, never throttled; readiness names the failing check."""

import pytest
from django.core.cache import caches
from django.db.migrations.recorder import MigrationRecorder
from django.http import JsonResponse
from django.test import Client
from prometheus_client import REGISTRY

from projektor.operations import health


def test_healthz_answers_without_touching_the_database():
    # No database access is allowed in this test: a query would fail it.
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_healthz_answers_from_its_middleware_as_the_view_did(rf):
    # The view and the middleware's shortcut write the same answer, byte for byte.
    labels = {"method": "GET", "route": "healthz", "status": "200"}
    before = REGISTRY.get_sample_value("projektor_http_requests_total", labels) or 0
    served = Client().get("/healthz")
    assert REGISTRY.get_sample_value("projektor_http_requests_total", labels) == before + 1
    assert served.content == JsonResponse({"status": "ok"}).content
    assert served["Content-Type"] == "application/json"
    assert served["Content-Length"] == str(len(served.content))
    assert served["X-Content-Type-Options"] == "nosniff"  # the security headers stay
    match = served.wsgi_request.resolver_match
    assert match is not None and match.view_name == "healthz"
    assert health.healthz(rf.get("/healthz")).content == served.content


def test_the_probes_refuse_a_foreign_host_in_json_and_healthz_other_methods():
    client = Client()
    for probe in ("/healthz", "/readyz"):
        refused = client.get(probe, headers={"Host": "evil.example"})
        assert refused.status_code == 400
        assert refused["Content-Type"] == "application/json"
        assert "ALLOWED_HOSTS" in refused.json()["detail"]
    assert client.post("/healthz").status_code == 405
    assert client.head("/healthz").status_code == 405  # require_GET, as before
    assert client.get("/healthz/").status_code == 404


@pytest.mark.django_db
def test_readyz_reports_every_check_ok(django_assert_max_num_queries):
    client = Client()
    client.get("/readyz")  # the migrations on disk are read once per process
    with django_assert_max_num_queries(4):  # SELECT 1, django_migrations, one get per cache
        response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "checks": {"database": "ok", "migrations": "ok", "cache": "ok"},
    }


@pytest.mark.django_db
def test_readyz_names_a_migration_that_is_not_applied():
    last = MigrationRecorder.Migration.objects.filter(app="coordination").order_by("-id").first()
    assert last is not None
    last.delete()
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response["Retry-After"].isdigit()
    body = response.json()
    assert body["code"] == "unavailable" and body["failing"] == ["migrations"]
    assert f"coordination.{last.name}" in body["checks"]["migrations"]
    assert "manage.py migrate" in body["checks"]["migrations"]
    assert body["checks"]["database"] == body["checks"]["cache"] == "ok"


@pytest.mark.django_db
def test_readyz_names_a_cache_that_does_not_answer(monkeypatch):
    def refuse(*args, **kwargs):
        raise ConnectionError("Connection refused")

    monkeypatch.setattr(caches["default"], "get", refuse)
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["failing"] == ["cache"]
    assert body["checks"]["cache"] == "default: ConnectionError: Connection refused"


@pytest.mark.django_db
def test_health_and_readiness_are_never_throttled(settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"key": "1/min", "anon": "1/min"},
    }
    client = Client()
    statuses = {client.get(url).status_code for url in ("/healthz", "/readyz") * 5}
    assert statuses == {200}
    # The API's own limit holds: the first call is served, the next two refused.
    schema = [client.get("/api/v1/schema/").status_code for _ in range(3)]
    assert schema == [200, 429, 429]


def test_a_squashed_migration_counts_as_applied_when_all_it_replaces_are(monkeypatch):
    monkeypatch.setattr(
        health,
        "migrations_on_disk",
        lambda: {("app", "0001_squashed"): (("app", "0001_a"), ("app", "0002_b"))},
    )

    class Applied:
        @staticmethod
        def values_list(*fields):
            return [("app", "0001_a"), ("app", "0002_b")]

    monkeypatch.setattr(health.MigrationRecorder.Migration, "objects", Applied)
    assert health.missing_migrations() == []
