"""Stalled agents on the managers' pages (invariant 17 (stalled is derived)): the health page counts
and lists them (how long, holding what), the board marks their cards, the agent's page
shows its last progress and note."""

from datetime import timedelta

import pytest
from django.utils import timezone

from coordination.models import AgentSession, IssueLease, Project
from coordination.services import agents, leases
from tests.heatmap.test_pages import embedded_json, logged_in

pytestmark = pytest.mark.django_db

STALL_AFTER = 600


@pytest.fixture(autouse=True)
def _short_stall(settings):
    settings.PROJEKTOR_STALL_AFTER_SECONDS = STALL_AFTER


def stall(session: AgentSession, minutes: int = 15) -> None:
    stamp = timezone.now() - timedelta(minutes=minutes)
    AgentSession.objects.filter(pk=session.pk).update(last_progress_at=stamp)


@pytest.fixture
def stuck(workspace, make_issue, make_session):
    """coder-1 holds an issue and has made no progress for 15 minutes; coder-2 moves."""
    session = make_session("coder-1")
    issue = make_issue(title="Fix the flaky login test")
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    agents.report_progress(workspace=workspace, session_id=session.pk, note="rerunning tests")
    stall(session)
    make_session("coder-2")
    return session, issue


def test_the_health_page_counts_and_lists_stalled_agents(alice, stuck):
    session, issue = stuck
    response = logged_in(alice).get("/workspaces/acme/health/")
    assert response.status_code == 200
    stalled = response.context["stalled"]
    assert stalled.count == 1 and [s.pk for s in stalled.sessions] == [session.pk]
    assert [i.pk for i in stalled.sessions[0].held] == [issue.pk]
    html = response.content.decode()
    assert 'id="stalled-agents"' in html and "Fix the flaky login test" in html
    assert "15\xa0minutes" in html and "rerunning tests" in html and "10 minutes" in html


def test_the_health_page_without_stalls_shows_zero(alice, workspace, make_session):
    make_session("coder-1")
    response = logged_in(alice).get("/workspaces/acme/health/")
    assert response.context["stalled"].count == 0
    assert 'id="stalled-agents"' not in response.content.decode()


def test_the_health_page_charts_max_age_releases(
    alice, workspace, project, make_issue, make_session
):
    Project.objects.filter(pk=project.pk).update(max_lease_age_seconds=60)
    issue = make_issue()
    old = leases.claim_issue(
        workspace=workspace, issue_id=issue.pk, session_id=make_session("a").pk
    ).lease
    IssueLease.objects.filter(pk=old.pk).update(ages_out_at=timezone.now() - timedelta(seconds=1))
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=make_session("b").pk)
    response = logged_in(alice).get("/workspaces/acme/health/")
    releases = embedded_json(response, "chart-lease-releases-data")["data"]
    assert {trace["name"]: sum(trace["y"]) for trace in releases}["max_age"] == 1


def test_the_board_marks_a_stalled_holders_card(alice, stuck, make_issue, workspace):
    session, issue = stuck
    moving = make_issue(title="Moving along")
    other = AgentSession.objects.get(agent__name="coder-2")
    leases.claim_issue(workspace=workspace, issue_id=moving.pk, session_id=other.pk)
    html = logged_in(alice).get("/workspaces/acme/issues/").content.decode()
    assert 'class="holder stalled"' in html and "</svg> coder-1 (stalled)" in html
    assert html.count('class="holder stalled"') == 1
    assert "● coder-2" in html


def test_the_agents_page_shows_its_stall_and_note(alice, stuck):
    html = logged_in(alice).get("/workspaces/acme/agents/coder-1/").content.decode()
    assert 'class="tag bad stalled"' in html and "rerunning tests" in html


def test_an_aged_out_lease_shows_aged_out_on_the_issue_and_agent_pages(
    alice, workspace, project, make_issue, make_session
):
    Project.objects.filter(pk=project.pk).update(max_lease_age_seconds=60)
    issue = make_issue(title="Held too long")
    lease = leases.claim_issue(
        workspace=workspace, issue_id=issue.pk, session_id=make_session("coder-1").pk
    ).lease
    client = logged_in(alice)
    pages = (f"/workspaces/acme/issues/{issue.pk}/", "/workspaces/acme/agents/coder-1/")
    for page in pages:
        html = client.get(page).content.decode()
        assert '<span class="tag live">live</span>' in html and "aged out" not in html
    IssueLease.objects.filter(pk=lease.pk).update(ages_out_at=timezone.now() - timedelta(seconds=1))
    for page in pages:
        html = client.get(page).content.decode()
        assert 'class="tag stale aged-out"' in html and ">aged out</span>" in html, page
        assert '<span class="tag live">live</span>' not in html, page
