"""``seed_demo``: a deterministic month of history, every invariant holding now."""

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db.models import Count, F, Max, Min
from django.utils import timezone
from rest_framework.test import APIClient

from coordination.models import (
    Agent,
    AgentSession,
    ApiKey,
    ClaimConflict,
    Event,
    EventType,
    FileClaim,
    Issue,
    IssueLease,
    Message,
    Project,
    ReleaseReason,
    Resource,
    ResourceHold,
    Run,
    WipCapDenial,
    Workspace,
    Worktree,
    WorktreeLock,
)
from coordination.selectors import resources
from coordination.services import logs, work
from demo import access, anchor, world
from demo.fleet.plan import DemoPlan, Pacing, prepare

pytestmark = pytest.mark.django_db

DAYS = 5
SMALL = ("--agents", "6", "--days", str(DAYS))


def seed_demo(*args: str) -> str:
    out = StringIO()
    call_command("seed_demo", *SMALL, *args, stdout=out)
    return out.getvalue()


def by(model: Any, workspace: Workspace, column: str) -> dict[str, int]:
    rows = model.objects.filter(workspace=workspace).values(column).annotate(n=Count("id"))
    return {row[column]: row["n"] for row in rows.order_by(column)}


def counts() -> dict[str, Any]:
    workspace = Workspace.objects.get(slug="demo")
    tables = (
        Agent,
        AgentSession,
        IssueLease,
        FileClaim,
        ClaimConflict,
        WipCapDenial,
        Message,
        Worktree,
        WorktreeLock,
        Project,
        ResourceHold,
    )
    return {
        **{model.__name__: model.objects.filter(workspace=workspace).count() for model in tables},
        "issues": by(Issue, workspace, "status"),
        "runs": by(Run, workspace, "status"),
        "lease releases": by(IssueLease, workspace, "release_reason"),
        "claim releases": by(FileClaim, workspace, "release_reason"),
        "forced": by(ClaimConflict, workspace, "forced"),
        "hold releases": by(ResourceHold, workspace, "release_reason"),
        "events": by(Event, workspace, "type"),
    }


@pytest.fixture
def demo() -> Workspace:
    seed_demo()
    return Workspace.objects.get(slug="demo")


def test_the_same_seed_tells_the_same_story_and_another_seed_another():
    seed_demo("--seed", "7")
    first = counts()
    logs.delete_workspace(Workspace.objects.get(slug="demo"))
    seed_demo("--seed", "7")
    assert counts() == first
    logs.delete_workspace(Workspace.objects.get(slug="demo"))
    seed_demo("--seed", "8")
    assert counts() != first


def test_every_invariant_holds_at_the_end(demo):
    twice_leased = (
        IssueLease.objects.filter(workspace=demo, released_at__isnull=True)
        .values("issue")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    assert not twice_leased.exists()
    twice_claimed = (
        FileClaim.objects.filter(workspace=demo, released_at__isnull=True)
        .values("path")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    assert not twice_claimed.exists()
    for project in Project.objects.filter(workspace=demo):
        live = IssueLease.objects.live().filter(issue__project=project).count()
        assert live <= project.agent_wip_limit, project.key
    held = WorktreeLock.objects.filter(workspace=demo, released_at__isnull=True)
    assert list(held.values_list("run__status", "run__lock_mode")) == [("running", "exclusive")]


def test_the_history_has_every_kind_of_event(demo):
    lease_reasons = set(
        IssueLease.objects.filter(workspace=demo).values_list("release_reason", flat=True)
    )
    claim_reasons = set(
        FileClaim.objects.filter(workspace=demo).values_list("release_reason", flat=True)
    )
    for reason in (ReleaseReason.EXPIRED, ReleaseReason.AGENT_ENDED):
        assert reason in lease_reasons and reason in claim_reasons, reason
    assert ReleaseReason.OVERRIDDEN in claim_reasons
    assert ReleaseReason.WORKTREE_UNRESOLVED in lease_reasons
    assert set(by(ClaimConflict, demo, "forced")) == {False, True}
    assert WipCapDenial.objects.filter(workspace=demo).exists()
    runs = by(Run, demo, "status")
    for status in ("succeeded", "failed", "cancelled", "skipped", "running"):
        assert runs.get(status, 0) > 0, status
    assert set(by(Issue, demo, "status")) == set(Issue.Status.values)
    roles = set(Agent.objects.filter(workspace=demo).values_list("role", flat=True))
    assert len(roles) > 3 and "" not in roles
    assert Message.objects.filter(workspace=demo).exists()
    # The test databases: held while tests run, let go at the end of the slot, with the
    # session's end, or taken back from a crashed holder; refused while both are held.
    hold_reasons = set(by(ResourceHold, demo, "release_reason"))
    assert {"released", "agent_ended", "expired"} <= hold_reasons
    assert Event.objects.filter(workspace=demo, type=EventType.RESOURCE_REFUSED).exists()


def test_the_history_spans_the_window_and_ends_now(demo):
    now = timezone.now()
    for model, column in (
        (ClaimConflict, "occurred_at"),
        (FileClaim, "claimed_at"),
        (AgentSession, "started_at"),
        (Run, "started_at"),
        (ResourceHold, "acquired_at"),
    ):
        span = model.objects.filter(workspace=demo).aggregate(first=Min(column), last=Max(column))
        assert span["first"] < now - timedelta(days=DAYS - 2), model.__name__
        assert span["last"] <= now, model.__name__
    for later, column in (
        (AgentSession, "last_heartbeat_at"),
        (AgentSession, "ended_at"),
        (FileClaim, "released_at"),
        (Message, "created_at"),
        (Issue, "updated_at"),
        (ResourceHold, "released_at"),
    ):
        assert later.objects.filter(workspace=demo).aggregate(last=Max(column))["last"] <= now
    live = AgentSession.objects.live().filter(workspace=demo)
    assert live.exists()
    assert FileClaim.objects.filter(session__in=live, released_at__isnull=True).exists()
    # A recent crash: active, no longer live, still holding a lease nobody reclaimed yet.
    crashed = (
        AgentSession.objects.filter(workspace=demo, status=AgentSession.Status.ACTIVE)
        .exclude(pk__in=live)
        .filter(leases__released_at__isnull=True)
    )
    latest = crashed.order_by("-last_heartbeat_at").first()
    assert latest is not None and now - latest.last_heartbeat_at < timedelta(hours=1)
    assert FileClaim.objects.filter(session=latest, released_at__isnull=True).exists()
    # Both test databases are in use now, by live sessions at work, and one more was
    # refused just now.
    [test_db] = resources.resources(demo)
    assert (test_db.name, test_db.capacity, resources.in_use(test_db)) == (world.TEST_DB, 2, 2)
    assert {hold.session_id for hold in test_db.live_holds} <= set(
        live.values_list("pk", flat=True)
    )
    assert Resource.objects.get(workspace=demo).created_at < now - timedelta(days=DAYS - 1)
    refused = Event.objects.filter(workspace=demo, type=EventType.RESOURCE_REFUSED)
    assert refused.filter(occurred_at__gte=now - timedelta(minutes=5)).exists()


def test_running_it_again_adds_nothing_but_a_key(demo):
    before = counts()
    keys = ApiKey.objects.filter(workspace=demo).count()
    out = seed_demo()
    assert counts() == before
    assert ApiKey.objects.filter(workspace=demo).count() == keys + 1
    assert "admin / projektor-demo" in out and "already seeded" in out


def test_the_banner_names_logins_key_and_pages():
    out = seed_demo("--password", "s3cret-demo")
    key = next(line.split(":", 1)[1].strip() for line in out.splitlines() if "API key" in line)
    assert key.startswith(ApiKey.PREFIX)
    for url in (
        "/workspaces/demo/heatmap/",
        "/workspaces/demo/health/",
        "/admin/",
        "/api/v1/docs/",
    ):
        assert f"http://127.0.0.1:8000{url}" in out
    assert "admin / s3cret-demo" in out and "manager / s3cret-demo" in out
    assert "WIP denials" in out and "file claims" in out
    users = get_user_model().objects
    admin, manager = users.get(username="admin"), users.get(username="manager")
    assert admin.is_superuser and admin.is_staff and admin.check_password("s3cret-demo")
    assert not manager.is_staff and not manager.is_superuser
    assert manager.check_password("s3cret-demo")
    members = Workspace.objects.get(slug="demo").members
    assert set(members.values_list("username", flat=True)) == {"admin", "manager"}


def test_demo_key_works_against_the_api(client):
    out = StringIO()
    call_command("seed_demo", "--agents", "4", "--days", "2", stdout=out)
    raw = next(
        line.split(":", 1)[1].strip() for line in out.getvalue().splitlines() if "API key" in line
    )
    response = client.get("/api/v1/issues/", headers={"Authorization": f"Bearer {raw}"})
    assert response.status_code == 200
    assert response.json()["count"] == Issue.objects.filter(workspace__slug="demo").count() > 0
    call_command("seed_demo", stdout=StringIO())  # running it twice is harmless
    assert Issue.objects.filter(workspace__slug="demo").count() == response.json()["count"]


# --- what every run hands out -------------------------------------------------------

TINY = ("--agents", "4", "--days", "2")


def run_tiny(*args: str) -> str:
    out = StringIO()
    call_command("seed_demo", *TINY, *args, stdout=out)
    return out.getvalue()


def field(out: str, label: str) -> str:
    """The value of a banner line, ``  <label> : <value>``."""
    return next(line.split(":", 1)[1].strip() for line in out.splitlines() if label in line)


def shell_line(out: str) -> dict[str, str]:
    """The variables of the banner's ``export KEY=… ISSUE=…`` line."""
    exported = field(out, "shell").split("#")[0].split()
    assert exported[0] == "export"
    return dict(assignment.split("=", 1) for assignment in exported[1:])


def test_every_run_prints_the_password_and_one_working_demo_key(client):
    first, second = run_tiny(), run_tiny()
    for out in (first, second):
        assert "admin / projektor-demo" in out and "manager / projektor-demo" in out
    old, new = field(first, "API key"), field(second, "API key")
    assert shell_line(second)["KEY"] == new != old
    workspace = Workspace.objects.get(slug="demo")
    live = ApiKey.objects.filter(workspace=workspace, name="demo", revoked_at__isnull=True)
    assert [key.key_prefix for key in live] == [new[:10]]
    assert ApiKey.objects.filter(workspace=workspace, name="demo").count() == 2
    for raw, status in ((old, 401), (new, 200)):
        response = client.get("/api/v1/issues/", headers={"Authorization": f"Bearer {raw}"})
        assert response.status_code == status, raw


def test_a_changed_password_is_never_printed_only_how_to_set_one():
    run_tiny()
    admin = get_user_model().objects.get(username="admin")
    admin.set_password("chosen-later")
    admin.save()
    out = run_tiny()
    assert "manager / projektor-demo" in out
    [login] = [line for line in out.splitlines() if "admin /" in line]
    assert "projektor-demo" not in login and "chosen-later" not in login
    assert "manage.py changepassword admin" in login
    admin.refresh_from_db()
    assert admin.check_password("chosen-later")  # left alone
    # Asked for another password than the one set: neither is printed.
    out = run_tiny("--password", "another-one")
    assert "another-one" not in out and out.count("manage.py changepassword") == 2


def test_the_readme_examples_work_with_what_the_banner_prints(client):
    """README "Using the API" and "MCP", call by call, with the printed KEY and ISSUE."""
    exported = shell_line(run_tiny())
    key, issue = exported["KEY"], int(exported["ISSUE"])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")

    def post(url: str, body: dict[str, Any], status: int) -> dict[str, Any]:
        response = api.post(f"/api/v1/{url}", body, format="json")
        assert response.status_code == status, (url, response.content)
        return response.json()

    ready = api.get("/api/v1/issues/ready/").json()["results"]
    assert issue in [row["id"] for row in ready]
    session = post("sessions/", {"agent": "coder-1", "role": "engineer"}, 201)["id"]
    post(f"sessions/{session}/heartbeat/", {}, 200)
    assert post(f"issues/{issue}/claim/", {"session": session}, 201)["fence"] == 1
    post(f"issues/{issue}/release/", {"session": session}, 200)
    paths = ["src/api/rate_limits.py"]  # outside the demo's tree: no demo claim holds it
    assert not set(paths) & set(world.SOURCE_TREE)
    work = post("work/start/", {"agent": "coder-1", "issue": issue, "paths": paths}, 201)
    report = {
        "summary": "Added rate limits.",
        "verification": "New tests; the suite passes.",
        "pr_link": "https://example.com/pr/1",
    }
    body = {"session": work["session"]["id"], "issue": issue, "report": report}
    assert post("work/finish/", body, 200)["issue"]["status"] == "in_review"
    body = {"session": work["session"]["id"], "fence": 1}
    assert post(f"issues/{issue}/release/", body, 409)["code"] == "stale_fence"
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "register_agent", "arguments": {"agent": "coder-2"}},
    }
    response = client.post(
        "/mcp",
        call,
        content_type="application/json",
        headers={"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 200 and response.json()["result"]["isError"] is False


def test_the_free_issue_waits_in_a_project_the_fleet_never_works(tmp_path):
    """The banner's issue is in the tour's project: the live fleet's plan leaves it out
    (its runners work the plan's projects, its reviewer only those), so it is still
    free when a person pastes the tour. Free, it is handed out again; taken, the next
    run files another."""
    first = int(shell_line(run_tiny())["ISSUE"])
    assert int(shell_line(run_tiny())["ISSUE"]) == first
    issue = Issue.objects.get(pk=first)
    assert issue.project.key == access.TOUR_PROJECT
    assert access.TOUR_PROJECT not in world.PROJECTS_BY_KEY
    plan = DemoPlan(tmp_path / "plan.json", Pacing(), ttl=120)
    assert prepare(issue.workspace, plan) > 0
    assert first not in {planned.id for planned in plan.plan.issues}
    assert not Issue.objects.get(pk=first).requires_filesystem  # left as it was
    work.start_work(
        workspace=issue.workspace, agent_name="coder-1", issue_id=first, paths=["src/a.py"]
    )
    second = int(shell_line(run_tiny())["ISSUE"])
    assert second != first
    assert Issue.objects.get(pk=second).project.key == access.TOUR_PROJECT


# --- a stale history is seeded again ------------------------------------------------


def days_pass(workspace: Workspace, delta: timedelta) -> None:
    """Make the history ``delta`` older, as if nobody had worked since: its events are
    what tells its age (the contention logs cannot be moved, and need not be)."""
    Event.objects.filter(workspace=workspace).update(occurred_at=F("occurred_at") - delta)


def test_a_stale_history_is_seeded_again_to_end_now(demo):
    before = counts()
    days_pass(demo, timedelta(days=3))
    out = seed_demo()
    assert "seeded again: the history was 3 d 0 h old" in out and "seeded in" in out
    rebuilt = Workspace.objects.get(slug="demo")
    assert rebuilt.pk != demo.pk and not Workspace.objects.filter(pk=demo.pk).exists()
    assert counts() == before  # the same seed, the same story
    assert anchor.db_now(rebuilt) - anchor.newest_event(rebuilt) < timedelta(minutes=1)
    assert "seeded again" not in seed_demo()  # fresh now: left alone
    assert Workspace.objects.get(slug="demo").pk == rebuilt.pk


def test_a_history_younger_than_a_day_is_left_alone(demo):
    days_pass(demo, timedelta(hours=20))
    before = counts()
    assert "seeded again" not in seed_demo()
    assert Workspace.objects.get(slug="demo").pk == demo.pk and counts() == before


def test_the_logs_are_written_at_their_moment_of_the_story(demo):
    """The contention logs are never moved (invariant 8 (append-only logs)): each is
    written with its past stamp at once, the same moment as its event."""
    denials = WipCapDenial.objects.filter(workspace=demo)
    assert denials.exists()
    for denial in denials:
        events = Event.objects.filter(
            workspace=demo,
            type="wip.denied",
            issue_id=denial.issue_id,
            session_id=denial.session_id,
            occurred_at__range=(
                denial.occurred_at - timedelta(seconds=1),
                denial.occurred_at + timedelta(seconds=1),
            ),
        )
        assert {"limit": denial.limit} in [event.data for event in events], denial.pk
    first = ClaimConflict.objects.filter(workspace=demo).aggregate(first=Min("occurred_at"))
    assert first["first"] < timezone.now() - timedelta(days=DAYS - 2)


def test_a_stopping_fleet_revokes_its_own_key_not_the_next_ones():
    """make run run again at once: the old fleet stops while the new one starts, both
    with a key named ``demo-fleet``; the old one's revocation leaves the new key working."""
    run_tiny()
    workspace = Workspace.objects.get(slug="demo")
    old = access.fresh_key(workspace, access.FLEET_KEY_NAME)
    new = access.fresh_key(workspace, access.FLEET_KEY_NAME)  # the next fleet's
    access.revoke_minted(workspace, old)
    live = ApiKey.objects.filter(name=access.FLEET_KEY_NAME, revoked_at__isnull=True)
    assert [key.key_prefix for key in live] == [new[:10]]
    access.revoke_minted(workspace, new)
    assert not ApiKey.objects.filter(name=access.FLEET_KEY_NAME, revoked_at__isnull=True).exists()
