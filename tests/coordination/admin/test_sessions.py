"""Sessions in the admin: named by their agent, one derived state, and a page that
shows when they started and beat and what they hold, read-only."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from coordination.admin.sessions import NewestFormSet
from coordination.models import (
    AgentSession,
    FileClaim,
    IssueLease,
    ResourceHold,
    Run,
    Worktree,
    WorktreeLock,
)
from coordination.services import agents, file_claims, leases, resources, runs
from tests.conftest import expire
from tests.coordination.admin_helpers import url

pytestmark = pytest.mark.django_db


def test_a_session_is_named_by_its_agent_everywhere(operator, make_session):
    session = make_session("coder-7")
    label = f"coder-7 · session {session.pk}"
    assert str(session) == label
    assert label in operator.get(url(AgentSession)).content.decode()
    page = operator.get(url(AgentSession, "change", session.pk)).content.decode()
    assert f"<h2>{label}</h2>" in page  # the title
    assert f"&rsaquo; {label}\n" in page  # the breadcrumbs
    assert f"<title>{label} | View agent session" in page


def test_a_dead_session_is_stale_not_active(operator, workspace, make_session):
    stale, ended = make_session("crashed"), make_session("gone")
    expire(stale)
    agents.end_session(workspace=workspace, session_id=ended.pk)
    page = operator.get(url(AgentSession)).content.decode()
    assert 'class="state state-stale">stale<' in page
    assert 'class="state state-ended">ended<' in page
    assert "Active" not in page and "icon-no.svg" not in page and "icon-yes.svg" not in page


def test_the_session_page_shows_its_times_state_and_holdings(
    operator, workspace, make_issue, make_session
):
    tree = Worktree.objects.create(workspace=workspace, slug="main", name="Main")
    session = make_session()
    leased, run_on = make_issue(title="Leased"), make_issue(title="Dispatched", worktree=tree)
    leases.claim_issue(workspace=workspace, issue_id=leased.pk, session_id=session.pk)
    file_claims.claim_files(
        workspace=workspace, issue_id=leased.pk, paths=["src/held.py"], session_id=session.pk
    )
    run = runs.dispatch_run(workspace=workspace, session_id=session.pk, issue_id=run_on.pk)
    lock = WorktreeLock.objects.get()
    resources.create_resource(workspace=workspace, name="ports", capacity=4)
    hold = resources.acquire(
        workspace=workspace, name="ports", session_id=session.pk, units=2, issue_id=leased.pk
    ).hold

    response = operator.get(url(AgentSession, "change", session.pk))
    page = response.content.decode()
    for label in ("Started:", "Last heartbeat:", "Ended:", "State:"):
        assert label in page
    assert "s ago</span>" in page and 'class="state state-live">live<' in page
    for row in (IssueLease.objects.get(issue=leased), FileClaim.objects.get(), lock, hold, run):
        assert url(type(row), "change", row.pk) in page  # each row links to its own page
    assert "src/held.py" in page and f"#{leased.pk} Leased" in page
    assert f"ports · hold {hold.pk}" in page and "slots 0, 1" in page
    assert f"?session__id__exact={session.pk}" in page
    assert 'type="submit" value="Save"' not in page and "DELETE" not in page
    inlines = response.context["inline_admin_formsets"]
    assert [inline.opts.model for inline in inlines] == [
        IssueLease,
        FileClaim,
        WorktreeLock,
        ResourceHold,
        Run,
    ]
    for inline in inlines:  # read-only, for superusers too
        assert not (inline.has_add_permission or inline.has_change_permission)
        assert not inline.has_delete_permission


def test_a_session_page_costs_the_same_however_much_it_holds(operator, workspace, make_issue):
    def page_queries(session):
        assert operator.get(url(AgentSession, "change", session.pk)).status_code == 200
        with CaptureQueriesContext(connection) as captured:
            operator.get(url(AgentSession, "change", session.pk))
        return len(captured)

    small, large = agents.register_session(workspace=workspace, agent_name="small"), None
    file_claims.claim_files(
        workspace=workspace, issue_id=make_issue().pk, paths=["one.py"], session_id=small.pk
    )
    large = agents.register_session(workspace=workspace, agent_name="large")
    for n in range(NewestFormSet.SHOWN + 5):
        file_claims.claim_files(
            workspace=workspace, issue_id=make_issue().pk, paths=[f"f{n}.py"], session_id=large.pk
        )
    assert page_queries(large) == page_queries(small)
    page = operator.get(url(AgentSession, "change", large.pk)).content.decode()
    shown = [n for n in range(NewestFormSet.SHOWN + 5) if f">f{n}.py<" in page]
    assert len(shown) == NewestFormSet.SHOWN and max(shown) == NewestFormSet.SHOWN + 4  # newest


@pytest.mark.parametrize("model", [IssueLease, FileClaim, WorktreeLock, Run])
def test_the_lists_filter_by_session(operator, workspace, make_issue, make_session, model):
    mine, theirs = make_session("mine"), make_session("theirs")
    for session in (mine, theirs):
        tree = Worktree.objects.create(workspace=workspace, slug=f"wt-{session.pk}", name="T")
        issue = make_issue(worktree=tree)
        runs.dispatch_run(workspace=workspace, session_id=session.pk, issue_id=issue.pk)
        file_claims.claim_files(
            workspace=workspace,
            issue_id=issue.pk,
            paths=["x.py"],
            session_id=session.pk,
            force=True,
        )
    response = operator.get(url(model) + f"?session__id__exact={mine.pk}")
    assert response.status_code == 200
    assert [row.session_id for row in response.context["cl"].result_list] == [mine.pk]
