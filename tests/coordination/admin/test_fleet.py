"""The operators' admin of coordination state: read-only rows, actions that go through
the services, and changelists whose cost does not grow with their rows."""

import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext

from coordination.models import (
    AgentSession,
    ClaimConflict,
    Event,
    FileClaim,
    IssueLease,
    Landing,
    Message,
    ResourceHold,
    Run,
    WipCapDenial,
    Worktree,
    WorktreeLock,
)
from coordination.services import file_claims, leases, runs
from tests.coordination.admin_helpers import act, bar, populate, url

pytestmark = pytest.mark.django_db

STATE_MODELS = [
    AgentSession, IssueLease, FileClaim, WorktreeLock, ResourceHold, Run, ClaimConflict,
    WipCapDenial, Event, Landing,
]  # fmt: skip
COORDINATION_MODELS = [
    model for model in admin.site._registry if model._meta.app_label == "coordination"
]


# --- demo-sized data ------------------------------------------------------------------


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
    run = runs.dispatch_run(workspace=workspace, session_id=make_session().pk, issue_id=issue.pk)
    response = act(operator, WorktreeLock, "force_release", WorktreeLock.objects.all())
    lock, run = WorktreeLock.objects.get(), Run.objects.get(pk=run.pk)
    assert lock.release_reason == "overridden"
    assert run.status == "cancelled" and "force-released by operator ops" in run.error_detail
    assert run.finished_at is not None
    assert f"Run {run.pk} was cancelled" in Message.objects.get(scope=f"issue:{issue.pk}").body
    assert any(f"run {run.pk} cancelled" in text for text in bar(response))


# --- directory claims ---------------------------------------------------------------------


def test_a_directory_claim_is_visibly_a_directory(operator, workspace, make_issue):
    """Invariant 11 (overlap): ``src/api/`` holds its whole subtree, and the list says so; the
    kind filter keeps directories or files."""
    issue = make_issue()
    file_claims.claim_files(workspace=workspace, issue_id=issue.pk, paths=["src/api/", "a.py"])

    page = operator.get(url(FileClaim)).content.decode()
    assert (
        'class="kind-dir" title="directory claim: holds every path under src/api/">dir</span>'
        in page
    )
    assert page.count('class="kind-dir"') == 1

    directories = operator.get(url(FileClaim) + "?kind=directory").context["cl"].queryset
    assert [claim.path for claim in directories] == ["src/api/"]
    files = operator.get(url(FileClaim) + "?kind=file").context["cl"].queryset
    assert [claim.path for claim in files] == ["a.py"]
    issue_page = operator.get(f"/admin/coordination/issue/{issue.pk}/change/").content.decode()
    assert 'class="kind-dir"' in issue_page
