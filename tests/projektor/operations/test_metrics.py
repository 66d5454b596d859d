"""/metrics in one process: access, request metrics, and the fleet against the truth,
in a fixed number of statements whatever its size."""

from datetime import timedelta

import pytest
from django.core.cache import caches
from django.core.cache.backends.db import BaseDatabaseCache
from django.db.models import F
from django.test import Client
from django.utils import timezone
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from coordination.errors import FileConflict, ResourceBusy, WipLimitReached
from coordination.models import (
    AgentSession,
    Event,
    EventType,
    Issue,
    IssueLease,
    Project,
    Resource,
    ResourceWait,
    Webhook,
    WebhookDelivery,
    Workspace,
)
from coordination.services import file_claims, landings, leases, resources
from projektor.operations import metrics
from tests.conftest import expire
from tests.coordination.landing_helpers import queue_work

pytestmark = pytest.mark.django_db

FLEET_STATEMENTS = 12
# SELECT 1, django_migrations, then one get per cache kept in the database.
READINESS_STATEMENTS = 2


def scrape(client: Client | None = None, **headers: str) -> dict[tuple[str, tuple], float]:
    response = (client or Client()).get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def scrape_statements() -> int:
    on_database = sum(isinstance(caches[alias], BaseDatabaseCache) for alias in caches)
    return FLEET_STATEMENTS + READINESS_STATEMENTS + on_database


@pytest.fixture
def fleet(workspace, other_workspace, project, make_issue, make_session):
    """acme: core (cap 3) with a live and a stale lease, ops (cap 1) full, one WIP
    denial, two held claims and a rejected and a forced conflict; globex: nothing."""
    ops = Project.objects.create(workspace=workspace, key="ops", name="Ops", agent_wip_limit=1)
    one, two, dead = make_session("coder-1"), make_session("coder-2"), make_session("coder-3")
    make_session("coder-4")  # live, holding nothing
    a, b = make_issue(title="a"), make_issue(title="b")
    c, d = make_issue(project=ops, title="c"), make_issue(project=ops, title="d")
    leases.claim_issue(workspace=workspace, issue_id=a.pk, session_id=one.pk)
    leases.claim_issue(workspace=workspace, issue_id=b.pk, session_id=dead.pk)
    leases.claim_issue(workspace=workspace, issue_id=c.pk, session_id=two.pk)
    with pytest.raises(WipLimitReached):
        leases.claim_issue(workspace=workspace, issue_id=d.pk, session_id=one.pk)
    file_claims.claim_files(
        workspace=workspace, issue_id=a.pk, paths=["src/a.py", "src/b.py"], session_id=one.pk
    )
    with pytest.raises(FileConflict):
        file_claims.claim_files(
            workspace=workspace, issue_id=c.pk, paths=["src/a.py"], session_id=two.pk
        )
    file_claims.claim_files(
        workspace=workspace, issue_id=c.pk, paths=["src/b.py"], session_id=two.pk, force=True
    )
    expire(dead)
    return workspace


def test_the_fleet_is_the_truth(fleet):
    samples = scrape()
    assert value(samples, "projektor_live_sessions", workspace="acme") == 3
    assert value(samples, "projektor_live_sessions", workspace="globex") == 0
    assert value(samples, "projektor_leases", workspace="acme", project="core", state="live") == 1
    assert value(samples, "projektor_leases", workspace="acme", project="core", state="stale") == 1
    assert value(samples, "projektor_leases", workspace="acme", project="ops", state="live") == 1
    assert value(samples, "projektor_leases", workspace="acme", project="ops", state="stale") == 0
    assert value(samples, "projektor_wip_limit", workspace="acme", project="core") == 3
    assert value(samples, "projektor_wip_limit", workspace="acme", project="ops") == 1
    assert value(samples, "projektor_file_claims", workspace="acme") == 2
    assert value(samples, "projektor_file_claims", workspace="globex") == 0
    conflicts = "projektor_claim_conflicts_total"
    assert value(samples, conflicts, workspace="acme", forced="false") == 1
    assert value(samples, conflicts, workspace="acme", forced="true") == 1
    assert value(samples, conflicts, workspace="globex", forced="false") == 0
    assert value(samples, "projektor_wip_denials_total", workspace="acme") == 1
    assert value(samples, "projektor_wip_denials_total", workspace="globex") == 0
    for check in ("database", "migrations", "cache"):
        assert value(samples, "projektor_ready", check=check) == 1
    for state in ("pending", "delivered", "failed"):
        assert value(samples, "projektor_webhook_deliveries", state=state) == 0


def test_stalled_sessions_and_max_age_releases_are_counted(
    workspace, other_workspace, project, make_issue, make_session, settings
):
    settings.PROJEKTOR_STALL_AFTER_SECONDS = 60
    stuck, moving, dead = make_session("stuck"), make_session("moving"), make_session("dead")
    before = timezone.now() - timedelta(seconds=65)
    AgentSession.objects.filter(pk__in=[stuck.pk, dead.pk]).update(last_progress_at=before)
    expire(dead)
    Project.objects.filter(pk=project.pk).update(max_lease_age_seconds=3600)
    issue = make_issue()
    aged = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=moving.pk).lease
    IssueLease.objects.filter(pk=aged.pk).update(ages_out_at=before)
    samples = scrape()
    assert value(samples, "projektor_leases", workspace="acme", project="core", state="live") == 0
    assert value(samples, "projektor_leases", workspace="acme", project="core", state="stale") == 1
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=stuck.pk)
    samples = scrape()
    assert value(samples, "projektor_stalled_sessions", workspace="acme") == 0  # it claimed
    AgentSession.objects.filter(pk=stuck.pk).update(last_progress_at=before)
    samples = scrape()
    assert value(samples, "projektor_stalled_sessions", workspace="acme") == 1
    assert value(samples, "projektor_stalled_sessions", workspace="globex") == 0
    releases = "projektor_lease_releases_total"
    assert value(samples, releases, workspace="acme", reason="max_age") == 1
    assert value(samples, releases, workspace="acme", reason="expired") == 0
    assert value(samples, releases, workspace="globex", reason="max_age") == 0


def test_resources_in_use_capacity_waiting_and_refusals(workspace, other_workspace, make_session):
    """Invariant 20 (resources are counted): live holds only; the refusals of the last day."""
    resources.create_resource(workspace=workspace, name="db:test", capacity=2)
    resources.create_resource(workspace=workspace, name="ports", capacity=8)
    resources.create_resource(workspace=other_workspace, name="db:test", capacity=3)
    one, two, dead = make_session("coder-1"), make_session("coder-2"), make_session("coder-3")
    resources.acquire(workspace=workspace, name="ports", session_id=one.pk, units=3)
    resources.acquire(workspace=workspace, name="ports", session_id=dead.pk, units=2)
    resources.acquire(workspace=workspace, name="db:test", session_id=one.pk, units=2)
    for session in (two, dead):
        with pytest.raises(ResourceBusy):
            resources.acquire(workspace=workspace, name="db:test", session_id=session.pk)
    yesterday = Event.objects.filter(type=EventType.RESOURCE_REFUSED).order_by("id")[:1]
    Event.objects.filter(pk__in=yesterday).update(occurred_at=F("occurred_at") - timedelta(days=1))
    expire(dead)  # its two ports are not in use, before anyone takes them back
    # A waiting call is a row in the line: in it while its deadline is ahead, its session live.
    db_test = Resource.objects.get(workspace=workspace, name="db:test")
    for session, seconds in ((two, 30), (dead, 30), (one, -1)):
        ResourceWait.objects.create(
            workspace=workspace,
            resource=db_test,
            session=session,
            units=1,
            deadline=timezone.now() + timedelta(seconds=seconds),
        )

    samples = scrape()

    def of(name: str, resource: str, workspace: str = "acme") -> float:
        return value(samples, f"projektor_resource_{name}", workspace=workspace, resource=resource)

    assert (of("capacity", "db:test"), of("capacity", "ports")) == (2, 8)
    assert of("capacity", "db:test", workspace="globex") == 3
    assert (of("units_in_use", "db:test"), of("units_in_use", "ports")) == (2, 3)
    assert of("units_in_use", "db:test", workspace="globex") == 0
    assert (of("waiting", "db:test"), of("waiting", "ports")) == (1, 0)
    assert (of("refusals_24h", "db:test"), of("refusals_24h", "ports")) == (1, 0)
    assert of("refusals_24h", "db:test", workspace="globex") == 0


def test_landing_queues_depth_and_outcomes(
    workspace, other_workspace, project, make_issue, make_session
):
    """Invariant 21 (the default branch is always green): per project, the open entries
    (queued and under test), and the finished ones by outcome, every outcome reported."""
    Project.objects.filter(pk=project.pk).update(agent_wip_limit=20)
    Project.objects.create(workspace=other_workspace, key="web", name="Web")
    tester = make_session("tester")

    def queue(n: int) -> tuple[int, AgentSession]:
        issue, session = make_issue(title=f"issue {n}"), make_session(f"coder-{n}")
        entry = queue_work(issue, session, paths=[f"src/{n}.py"], branch=f"work-{n}")
        return entry.pk, session

    def depth(samples: dict, workspace: str = "acme", project: str = "core") -> float:
        return value(samples, "projektor_landing_queue_depth", workspace=workspace, project=project)

    def outcomes(samples: dict, workspace: str = "acme", project: str = "core") -> dict:
        return {
            outcome: value(
                samples,
                "projektor_landings_total",
                workspace=workspace,
                project=project,
                outcome=outcome,
            )  # fmt: skip
            for outcome in ("landed", "conflict", "check_failed", "stale_fence")
        }

    samples = scrape()
    assert depth(samples) == 0 and depth(samples, "globex", "web") == 0
    assert set(outcomes(samples).values()) == {0}
    ids = [queue(n)[0] for n in range(3)]
    _, stale_session = queue(3)
    samples = scrape()
    assert depth(samples) == 4
    batch = landings.take_batch(
        workspace=workspace, project_key="core", session_id=tester.pk, max_entries=3
    )
    assert [entry.pk for entry in batch.entries] == ids
    assert depth(scrape()) == 4  # under test is still open
    common = {"workspace": workspace, "session_id": tester.pk, "fence": batch.fence}
    landings.land(landing_id=ids[0], commit="def", **common)
    landings.reject(landing_id=ids[1], reason="conflict", detail="src/1.py", **common)
    landings.reject(landing_id=ids[2], reason="check_failed", detail="red", **common)
    expire(stale_session)
    landings.take_batch(workspace=workspace, project_key="core", session_id=tester.pk)
    samples = scrape()
    assert depth(samples) == 0
    assert outcomes(samples) == {"landed": 1, "conflict": 1, "check_failed": 1, "stale_fence": 1}
    assert set(outcomes(samples, "globex", "web").values()) == {0}


def test_webhook_deliveries_are_counted_by_state(workspace):
    webhook = Webhook.objects.create(
        workspace=workspace, url="https://hooks.example.test/", secret="s" * 20
    )
    for n, state in enumerate(["pending", "failed", "failed"]):
        event = Event.objects.create(workspace=workspace, type="message.posted", data={"n": n})
        WebhookDelivery.objects.create(
            workspace=workspace, webhook=webhook, event=event, state=state
        )
    samples = scrape()
    assert value(samples, "projektor_webhook_deliveries", state="pending") == 1
    assert value(samples, "projektor_webhook_deliveries", state="failed") == 2
    assert value(samples, "projektor_webhook_deliveries", state="delivered") == 0


def test_a_scrape_costs_the_same_statements_whatever_the_fleet(
    fleet, make_issue, make_session, django_assert_num_queries
):
    Client().get("/metrics")  # the migrations on disk are read once per process
    with django_assert_num_queries(scrape_statements()):
        scrape()
    for n in range(5):
        extra = Workspace.objects.create(slug=f"extra-{n}", name=f"Extra {n}")
        project = Project.objects.create(workspace=extra, key="p", name="P")
        issue = Issue.objects.create(workspace=extra, project=project, title="x")
        session = make_session(f"agent-{n}", workspace=extra)
        leases.claim_issue(workspace=extra, issue_id=issue.pk, session_id=session.pk)
        file_claims.claim_files(
            workspace=extra,
            issue_id=issue.pk,
            paths=[f"f{k}.py" for k in range(5)],
            session_id=session.pk,
        )
        for name in ("db", "ports"):
            resources.create_resource(workspace=extra, name=name, capacity=2)
            resources.acquire(workspace=extra, name=name, session_id=session.pk)
        lease = IssueLease.objects.get(issue=issue)
        landings.queue_landing(
            workspace=extra,
            issue_id=issue.pk,
            session_id=session.pk,
            branch="work",
            commit="abc",
            fence=lease.fence,
        )
    with django_assert_num_queries(scrape_statements()):
        samples = scrape()
    assert value(samples, "projektor_file_claims", workspace="extra-4") == 5
    assert value(samples, "projektor_landing_queue_depth", workspace="extra-4", project="p") == 1
    in_use = "projektor_resource_units_in_use"
    assert value(samples, in_use, workspace="extra-4", resource="ports") == 1


def test_requests_are_counted_by_route_and_status(api, make_session):
    session = make_session()
    route = "api/v1/sessions/<pk>/heartbeat/"
    labels = {"method": "POST", "route": route, "status": "200"}
    before = REGISTRY.get_sample_value("projektor_http_requests_total", labels) or 0
    observed = REGISTRY.get_sample_value("projektor_http_request_duration_seconds_count", labels)
    for _ in range(3):
        assert api.post(f"/api/v1/sessions/{session.pk}/heartbeat/").status_code == 200
    api.post("/api/v1/sessions/999999/heartbeat/")
    samples = scrape()
    assert value(samples, "projektor_http_requests_total", **labels) == before + 3
    count = "projektor_http_request_duration_seconds_count"
    assert value(samples, count, **labels) == (observed or 0) + 3
    assert value(
        samples, "projektor_http_request_duration_seconds_bucket", le="+Inf", **labels
    ) == ((observed or 0) + 3)
    assert (
        "projektor_http_requests_total",
        tuple(sorted({**labels, "status": "404"}.items())),
    ) in (samples)


def test_throttled_requests_are_counted(api, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"key": "1/min", "anon": "100/min"},
    }
    before = REGISTRY.get_sample_value("projektor_throttled_total")
    statuses = [api.get("/api/v1/workflow/").status_code for _ in range(3)]
    assert statuses == [200, 429, 429]
    assert value(scrape(), "projektor_throttled_total") == before + 2


def test_only_loopback_or_the_token_may_scrape(settings):
    settings.PROJEKTOR_METRICS_TOKEN = "s3cret-token"
    outside = Client(REMOTE_ADDR="203.0.113.9")
    refused = outside.get("/metrics")
    assert refused.status_code == 403
    assert refused.json()["code"] == "forbidden"
    assert outside.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 403
    assert (
        outside.get("/metrics", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
    )
    assert Client(REMOTE_ADDR="::1").get("/metrics").status_code == 200
    settings.PROJEKTOR_METRICS_TOKEN = ""
    assert outside.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 403


def test_behind_a_proxy_loopback_is_the_client_the_proxy_saw(settings):
    settings.PROJEKTOR_NUM_PROXIES = 1
    proxied = Client(REMOTE_ADDR="127.0.0.1")
    assert proxied.get("/metrics", headers={"X-Forwarded-For": "203.0.113.9"}).status_code == 403
    assert proxied.get("/metrics", headers={"X-Forwarded-For": "127.0.0.1"}).status_code == 200


def test_routes_are_patterns_not_urls():
    assert metrics.__name__  # the module loads its metrics once
    from projektor.operations.routes import tidy

    assert tidy("api/v1/^sessions/(?P<pk>[0-9]{1,19})/heartbeat/$") == (
        "api/v1/sessions/<pk>/heartbeat/"
    )
    assert tidy("api/v1/^issues\\.(?P<format>[a-z0-9]+)/?$") == "api/v1/issues.<format>/?"
    assert tidy("workspaces/<slug:slug>/heatmap/") == "workspaces/<slug:slug>/heatmap/"
