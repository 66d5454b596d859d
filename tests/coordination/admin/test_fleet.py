"""The operators' admin: the dashboard, read-only coordination state, actions that
go through the services, and changelists whose cost does not grow with their rows."""

from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from coordination import models as m
from coordination.models import (
    AgentSession,
    ApiKey,
    ClaimConflict,
    FileClaim,
    Issue,
    IssueLease,
    Message,
    Run,
    WipCapDenial,
    Worktree,
    WorktreeLock,
)
from coordination.services import file_claims, leases, worktrees
from tests.conftest import expire

pytestmark = pytest.mark.django_db

STATE_MODELS = [AgentSession, IssueLease, FileClaim, WorktreeLock, Run, ClaimConflict, WipCapDenial]
COORDINATION_MODELS = [
    model for model in admin.site._registry if model._meta.app_label == "coordination"
]


@pytest.fixture
def operator(client):
    user = get_user_model().objects.create_superuser("ops", password="pw-ops-123")
    client.force_login(user)
    return client


def url(model, view="changelist", *args):
    return reverse(f"admin:coordination_{model._meta.model_name}_{view}", args=args)


def act(client, model, action, rows):
    return client.post(
        url(model), {"action": action, "_selected_action": [row.pk for row in rows]}, follow=True
    )


def bar(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


# --- demo-sized data ------------------------------------------------------------------


def populate(workspace, count: int, *, start: int = 0) -> None:
    """``count`` rows of every model the admin lists, as the services leave them."""
    for n in range(start, start + count):
        m.Workspace.objects.create(slug=f"ws-{n}", name=f"Workspace {n}")
        worktree = Worktree.objects.create(workspace=workspace, slug=f"wt-{n}", name="Tree")
        project = m.Project.objects.create(
            workspace=workspace, key=f"p{n}", name="P", primary_worktree=worktree
        )
        agent = m.Agent.objects.create(workspace=workspace, name=f"agent-{n}", worktree=worktree)
        session = AgentSession.objects.create(workspace=workspace, agent=agent)
        issue = Issue.objects.create(
            workspace=workspace,
            project=project,
            title=f"Issue {n}",
            assignee=agent,
            worktree=worktree,
        )
        done = {"released_at": timezone.now(), "release_reason": "released"}
        IssueLease.objects.create(
            workspace=workspace, issue=issue, session=session, agent=agent, **done
        )
        FileClaim.objects.create(
            workspace=workspace,
            issue=issue,
            session=session,
            agent=agent,
            path=f"src/f{n}.py",
            **done,
        )
        run = Run.objects.create(
            workspace=workspace,
            issue=issue,
            session=session,
            agent=agent,
            worktree=worktree,
            lock_mode="exclusive",
            status="succeeded",
        )
        WorktreeLock.objects.create(
            workspace=workspace, worktree=worktree, session=session, run=run, **done
        )
        ClaimConflict.objects.create(
            workspace=workspace,
            path=f"src/f{n}.py",
            rejected_issue=issue,
            holding_issue=issue,
            rejected_session=session,
            holding_session=session,
            rejected_agent=agent,
            holding_agent=agent,
        )
        WipCapDenial.objects.create(
            workspace=workspace, project=project, issue=issue, session=session, agent=agent, limit=3
        )
        Message.objects.create(
            workspace=workspace,
            scope=f"issue:{issue.pk}",
            body="hello",
            session=session,
            agent=agent,
        )
        ApiKey.issue(workspace, f"key-{n}")


def queries(client, address: str) -> int:
    """Queries of a warm page (the first visit also fills per-process caches)."""
    assert client.get(address).status_code == 200
    with CaptureQueriesContext(connection) as captured:
        assert client.get(address).status_code == 200
    return len(captured)


@pytest.mark.parametrize("model", COORDINATION_MODELS, ids=lambda model: model.__name__)
def test_pages_cost_the_same_for_10_and_100_rows(operator, workspace, model):
    populate(workspace, 10)
    first = model._default_manager.order_by("pk").first()
    small = (queries(operator, url(model)), queries(operator, url(model, "change", first.pk)))
    populate(workspace, 90, start=10)
    large = (queries(operator, url(model)), queries(operator, url(model, "change", first.pk)))
    assert model._default_manager.count() >= 100
    assert large == small


# --- no back doors --------------------------------------------------------------------


@pytest.mark.parametrize("model", STATE_MODELS, ids=lambda model: model.__name__)
def test_state_cannot_be_added_edited_or_deleted_even_by_a_superuser(operator, workspace, model):
    populate(workspace, 1)
    row = model._default_manager.get()
    page = operator.get(url(model)).content.decode()
    assert url(model, "add") not in page
    assert operator.get(url(model, "add")).status_code == 403
    assert operator.post(url(model, "add"), {}).status_code == 403
    change = operator.get(url(model, "change", row.pk))
    assert change.status_code == 200 and b'type="submit" value="Save"' not in change.content
    assert operator.post(url(model, "change", row.pk), {}).status_code == 403
    assert operator.post(url(model, "delete", row.pk), {"post": "yes"}).status_code == 403
    assert model._default_manager.filter(pk=row.pk).exists()


@pytest.mark.parametrize("model", [m.Project, Issue, m.Agent, Worktree], ids=lambda m: m.__name__)
def test_rows_that_state_points_at_cannot_be_deleted(operator, workspace, model):
    populate(workspace, 1)
    row = model._default_manager.order_by("pk").first()
    assert operator.post(url(model, "delete", row.pk), {"post": "yes"}).status_code == 403
    assert model._default_manager.filter(pk=row.pk).exists()


def test_issue_status_moves_only_through_the_workflow(operator, issue):
    page = operator.get(url(Issue, "change", issue.pk)).content.decode()
    assert 'name="status"' not in page


# --- actions ----------------------------------------------------------------------------


def test_end_sessions_releases_as_agent_ended_and_reports(operator, workspace, issue, make_session):
    session, ended = make_session(), make_session("gone")
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    operator.post(url(AgentSession), {"action": "end_sessions", "_selected_action": [ended.pk]})
    response = act(operator, AgentSession, "end_sessions", [session, ended])
    assert IssueLease.objects.get().release_reason == "agent_ended"
    assert AgentSession.objects.get(pk=session.pk).status == "ended"
    assert any("Ended 1" in text for text in bar(response))
    assert any("already ended" in text for text in bar(response))


def test_force_release_of_a_lease_is_overridden_and_told_to_the_issue(
    operator, workspace, issue, make_session
):
    session = make_session()
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk).lease
    response = act(operator, IssueLease, "force_release", [lease])
    assert IssueLease.objects.get().release_reason == "overridden"
    told = Message.objects.get(scope=f"issue:{issue.pk}")
    assert "ops" in told.body and "coder-1" in told.body
    assert any(f"lease {lease.pk}" in text for text in bar(response))
    again = act(operator, IssueLease, "force_release", [lease])
    assert any("already released" in text for text in bar(again))
    assert Message.objects.count() == 1


def test_force_release_of_file_claims_is_overridden_and_told(
    operator, workspace, issue, make_session
):
    session = make_session()
    file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["b.py", "a.py"], session_id=session.pk
    )
    response = act(operator, FileClaim, "force_release", FileClaim.objects.all())
    assert set(FileClaim.objects.values_list("release_reason", flat=True)) == {"overridden"}
    assert Message.objects.get(scope=f"issue:{issue.pk}").body.endswith("a.py, b.py.")
    assert any("Force-released 2" in text for text in bar(response))


def test_force_release_of_a_worktree_lock_cancels_its_run(
    operator, workspace, make_issue, make_session
):
    tree = Worktree.objects.create(workspace=workspace, slug="main", name="Main")
    issue = make_issue(worktree=tree)
    run = worktrees.dispatch_run(
        workspace=workspace, session_id=make_session().pk, issue_id=issue.pk
    )
    response = act(operator, WorktreeLock, "force_release", WorktreeLock.objects.all())
    lock, run = WorktreeLock.objects.get(), Run.objects.get(pk=run.pk)
    assert lock.release_reason == "overridden"
    assert run.status == "cancelled" and "force-released by operator ops" in run.error_detail
    assert run.finished_at is not None
    assert f"Run {run.pk} was cancelled" in Message.objects.get(scope=f"issue:{issue.pk}").body
    assert any(f"run {run.pk} cancelled" in text for text in bar(response))


def test_transition_actions_pass_the_review_gate_and_report_refusals(operator, make_issue):
    review = make_issue(status=Issue.Status.IN_REVIEW)
    backlog = make_issue(status=Issue.Status.BACKLOG)
    response = act(operator, Issue, "move_to_done", [review, backlog])
    review.refresh_from_db()
    backlog.refresh_from_db()
    assert (review.status, backlog.status) == ("done", "backlog")
    assert any(f"#{review.pk}" in text and "done" in text for text in bar(response))
    assert any(f"#{backlog.pk}: Cannot move" in text for text in bar(response))


def test_every_status_has_a_transition_action(operator):
    actions = admin.site._registry[Issue].get_actions(operator.get(url(Issue)).wsgi_request)
    assert {f"move_to_{status}" for status in Issue.Status} <= set(actions)


def test_revoking_keys_reports_each_and_an_added_key_is_shown_once(operator, workspace):
    response = operator.post(
        url(ApiKey, "add"), {"workspace": workspace.pk, "name": "ci"}, follow=True
    )
    shown = [text for text in bar(response) if "shown once" in text]
    assert len(shown) == 1 and ApiKey.PREFIX in shown[0]
    key = ApiKey.objects.get()
    revoked = act(operator, ApiKey, "revoke", [key])
    assert ApiKey.objects.get().revoked_at is not None
    assert any("Revoked 1" in text for text in bar(revoked))
    assert any("already revoked" in text for text in bar(act(operator, ApiKey, "revoke", [key])))


# --- filters --------------------------------------------------------------------------


def test_session_state_filter_uses_the_ttl(operator, workspace, make_session):
    from coordination.services import agents

    make_session("live-one")
    expire(make_session("stale-one"))
    agents.end_session(workspace=workspace, session_id=make_session("ended-one").pk)

    def listed(state):
        page = operator.get(url(AgentSession) + f"?state={state}").content.decode()
        return {name for name in ("live-one", "stale-one", "ended-one") if name in page}

    assert listed("live") == {"live-one"}
    assert listed("stale") == {"stale-one"}
    assert listed("ended") == {"ended-one"}


def test_holder_filter_tells_live_from_stale_from_released(
    operator, workspace, make_issue, make_session
):
    live, dead = make_session("live-one"), make_session("dead-one")
    file_claims.claim_files(
        workspace=workspace, issue_id=make_issue().pk, paths=["live.py"], session_id=live.pk
    )
    file_claims.claim_files(
        workspace=workspace, issue_id=make_issue().pk, paths=["dead.py"], session_id=dead.pk
    )
    expire(dead)
    FileClaim.objects.create(
        workspace=workspace,
        issue=make_issue(),
        path="gone.py",
        released_at=timezone.now(),
        release_reason="released",
    )

    def listed(holder):
        page = operator.get(url(FileClaim) + f"?holder={holder}").content.decode()
        return {path for path in ("live.py", "dead.py", "gone.py") if path in page}

    assert listed("live") == {"live.py"}
    assert listed("stale") == {"dead.py"}
    assert listed("released") == {"gone.py"}


def test_logs_have_a_date_hierarchy_and_search(operator, workspace):
    populate(workspace, 3)
    first = ClaimConflict.objects.order_by("pk").first()
    ClaimConflict.objects.create(  # a year back, dated at insert (the log is append-only)
        workspace=workspace,
        path="old/x.py",
        rejected_issue=first.rejected_issue,
        holding_issue=first.holding_issue,
        occurred_at=timezone.now() - timedelta(days=400),
    )
    page = operator.get(url(ClaimConflict) + "?q=src/f1.py").content.decode()
    assert "src/f1.py" in page and "src/f2.py" not in page
    assert "?occurred_at__year=" in page  # the date hierarchy, down from the years


# --- the dashboard ----------------------------------------------------------------------


def test_index_is_the_fleet_dashboard(operator, workspace, project, make_issue, make_session):
    live = make_session()
    leases.claim_issue(workspace=workspace, issue_id=make_issue().pk, session_id=live.pk)
    ClaimConflict.objects.create(
        workspace=workspace,
        path="x.py",
        rejected_issue=make_issue(),
        holding_issue=make_issue(),
        forced=True,
    )
    skipped = Run.objects.create(
        workspace=workspace,
        issue=make_issue(),
        status="skipped",
        error="worktree_unresolved",
        error_detail="Bind a worktree.",
    )
    response = operator.get(reverse("admin:index"))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Projektor operations" in html and 'href="/workspaces/"' in html
    (board,) = response.context["dashboards"]
    assert (board.live_agents, board.rejected, board.forced, board.denials) == (1, 0, 1, 0)
    assert [(load.key, load.live, load.limit) for load in board.loads] == [("core", 1, 3)]
    assert board.troubled_runs == [skipped] and "Bind a worktree." in html
    assert "/workspaces/acme/heatmap/" in html and "/workspaces/acme/health/" in html
