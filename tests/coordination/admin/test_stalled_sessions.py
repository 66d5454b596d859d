"""Stalled sessions in the admin (invariant 17 (stalled is derived)): their state and progress
shown, a filter for them, an action that ends them (what they hold released ``agent_ended``,
their agent told why), and a project's lease age cap."""

from datetime import timedelta

import pytest
from django.utils import timezone

from coordination.models import AgentSession, IssueLease, Message, Project
from coordination.services import agents, leases
from tests.conftest import expire
from tests.coordination.admin_helpers import act, url

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _short_stall(settings):
    settings.PROJEKTOR_STALL_AFTER_SECONDS = 600


def stall(session: AgentSession) -> None:
    stamp = timezone.now() - timedelta(minutes=15)
    AgentSession.objects.filter(pk=session.pk).update(last_progress_at=stamp)


def test_a_stalled_session_shows_stalled_with_its_progress_and_note(
    operator, workspace, make_session
):
    session = make_session("stuck")
    agents.report_progress(workspace=workspace, session_id=session.pk, note="waiting on CI")
    stall(session)
    make_session("moving")
    listed = operator.get(url(AgentSession)).content.decode()
    assert listed.count('class="state state-stalled"') == 1
    assert listed.count('class="state state-live"') == 1
    filtered = operator.get(url(AgentSession), {"state": "stalled"}).content.decode()
    assert filtered.count('class="state state-stalled"') == 1
    assert 'class="state state-live"' not in filtered
    page = operator.get(url(AgentSession, "change", session.pk)).content.decode()
    assert "last progress" in page.lower() and "waiting on CI" in page


def test_ending_a_stalled_session_releases_what_it_holds_and_tells_its_agent(
    operator, workspace, issue, make_session
):
    stuck, moving, dead = make_session("stuck"), make_session("moving"), make_session("dead")
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=stuck.pk)
    stall(stuck)
    stall(dead)
    expire(dead)
    response = act(operator, AgentSession, "end_stalled_sessions", [stuck, moving, dead])
    assert response.status_code == 200
    page = response.content.decode()
    assert "not stalled" in page
    lease = IssueLease.objects.get(issue=issue)
    assert lease.release_reason == "agent_ended"
    statuses = dict(AgentSession.objects.values_list("agent__name", "status"))
    assert statuses == {"stuck": "ended", "moving": "active", "dead": "active"}
    [told] = Message.objects.filter(scope="agent:stuck")
    assert f"#{issue.pk}" in told.body and "agent_ended" in told.body
    assert not Message.objects.filter(scope__in=["agent:moving", "agent:dead"]).exists()


def test_the_project_admin_shows_and_sets_the_age_cap(
    operator, workspace, project, issue, make_session
):
    lease = leases.claim_issue(
        workspace=workspace, issue_id=issue.pk, session_id=make_session().pk
    ).lease
    assert "lease age cap" in operator.get(url(Project)).content.decode().lower()
    form = {
        "workspace": workspace.pk,
        "key": project.key,
        "name": project.name,
        "agent_wip_limit": project.agent_wip_limit,
        "max_lease_age_seconds": 90,
        "primary_worktree": "",
    }
    response = operator.post(url(Project, "change", project.pk), form)
    assert response.status_code == 302, response.content.decode()[:2000]
    project.refresh_from_db()
    assert project.max_lease_age_seconds == 90
    lease.refresh_from_db()
    assert lease.ages_out_at - lease.acquired_at == timedelta(seconds=90)
    refused = operator.post(
        url(Project, "change", project.pk), {**form, "max_lease_age_seconds": 0}
    )
    assert refused.status_code == 200  # the form again, with its error
    project.refresh_from_db()
    assert project.max_lease_age_seconds == 90
