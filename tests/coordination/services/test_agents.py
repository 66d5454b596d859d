"""Sessions and liveness (invariant 1 (liveness)): derived at read time from one TTL; a heartbeat
returns the session as the list shows it."""

import pytest
from django.test import override_settings

from coordination.api.serializers import SessionSerializer
from coordination.errors import SessionEnded
from coordination.models import Agent, AgentSession, IssueLease, ReleaseReason, Worktree
from coordination.selectors.sessions import is_live, live_sessions, sessions
from coordination.services import agents, leases
from tests.conftest import expire

pytestmark = pytest.mark.django_db


def test_new_session_is_live_and_listed(workspace, make_session):
    session = make_session("coder-1", role="engineer")
    assert is_live(session)
    assert list(live_sessions(workspace)) == [session]


def test_session_past_ttl_is_not_listed_live(workspace, make_session):
    live, stale = make_session("a"), make_session("b")
    expire(stale)
    assert list(live_sessions(workspace)) == [live]
    assert not is_live(stale)


def test_liveness_uses_the_ttl_setting(workspace, make_session):
    session = make_session()
    expire(session, seconds_past_ttl=-60)  # 60 s younger than the default TTL
    assert is_live(session)
    with override_settings(PROJEKTOR_SESSION_TTL_SECONDS=30):
        assert not is_live(session)


def test_registering_an_existing_name_reuses_the_agent(workspace, make_session):
    first = make_session("coder-1", role="engineer", department="platform")
    second = make_session("coder-1", role="staff engineer")
    assert first.pk != second.pk
    assert Agent.objects.filter(workspace=workspace).count() == 1
    agent = Agent.objects.get()
    assert (agent.role, agent.department) == ("staff engineer", "platform")


def test_register_binds_the_agent_to_a_worktree(workspace, make_session):
    Worktree.objects.create(workspace=workspace, slug="main", name="Main")
    session = make_session("coder-1", worktree_slug="main")
    assert session.agent.worktree.slug == "main"


def test_heartbeat_revives_a_lapsed_session_but_not_a_reclaimed_lease(
    workspace, issue, make_session
):
    holder, claimer = make_session("a"), make_session("b")
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=holder.pk).lease
    expire(holder)
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=claimer.pk)

    revived = agents.heartbeat_session(workspace=workspace, session_id=holder.pk)

    assert revived.is_live
    lease.refresh_from_db()
    assert lease.release_reason == ReleaseReason.EXPIRED
    assert IssueLease.objects.live().get(issue=issue).session_id == claimer.pk


def test_heartbeat_after_end_is_refused(workspace, make_session):
    session = make_session()
    agents.end_session(workspace=workspace, session_id=session.pk)
    with pytest.raises(SessionEnded):
        agents.heartbeat_session(workspace=workspace, session_id=session.pk)


def test_end_releases_leases_as_agent_ended_and_is_idempotent(workspace, issue, make_session):
    session = make_session()
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    ended = agents.end_session(workspace=workspace, session_id=session.pk)
    again = agents.end_session(workspace=workspace, session_id=session.pk)

    assert ended.status == AgentSession.Status.ENDED and not ended.is_live
    assert again.ended_at == ended.ended_at
    lease = IssueLease.objects.get()
    assert lease.release_reason == ReleaseReason.AGENT_ENDED and lease.released_at


def test_crash_is_recorded_expired_not_agent_ended(workspace, make_issue, make_session):
    """A clean exit and a crash leave different reasons (invariant 7 (release reasons))."""
    first, second = make_issue(), make_issue()
    clean, crashed, claimer = make_session("clean"), make_session("crashed"), make_session("c")
    leases.claim_issue(workspace=workspace, issue_id=first.pk, session_id=clean.pk)
    leases.claim_issue(workspace=workspace, issue_id=second.pk, session_id=crashed.pk)
    agents.end_session(workspace=workspace, session_id=clean.pk)
    expire(crashed)
    leases.claim_issue(workspace=workspace, issue_id=second.pk, session_id=claimer.pk)

    released = IssueLease.objects.exclude(release_reason="")
    reasons = dict(released.values_list("session_id", "release_reason"))
    assert reasons == {clean.pk: "agent_ended", crashed.pk: "expired"}


def test_heartbeat_returns_the_session_as_listed(workspace, make_session):
    worktree = Worktree.objects.create(workspace=workspace, slug="main", name="Main")
    session = make_session("ada")
    session.agent.worktree = worktree
    session.agent.role = "builder"
    session.agent.save()
    beaten = agents.heartbeat_session(workspace=workspace, session_id=session.pk)
    listed = sessions(workspace).get(pk=session.pk)
    assert SessionSerializer(beaten).data == SessionSerializer(listed).data
    assert SessionSerializer(beaten).data["worktree"] == "main"
    assert beaten.is_live is True
