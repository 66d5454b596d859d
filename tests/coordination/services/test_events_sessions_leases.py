"""The event log (invariant 12 (one event per change)) of sessions and leases: a session registered
and ended, a lease granted, released, reclaimed or closed with its issue, the WIP cap's denial;
a refused attempt announces no success.

Events are compared as the API shows them (``EventSerializer``, without id and time),
so these tests check the table of docs/api.md, not the columns."""

import pytest

from coordination.errors import LeaseHeld, StaleFence, WipLimitReached
from coordination.models import EventType
from coordination.services import agents, events, file_claims, leases, workflow
from tests.conftest import expire
from tests.coordination.conftest import claim_lease
from tests.coordination.services.events_helpers import by, cursor, expected, since

pytestmark = pytest.mark.django_db


# --- sessions -------------------------------------------------------------------------


def test_registering_and_ending_a_session_are_announced(workspace):
    mark = cursor()
    session = agents.register_session(workspace=workspace, agent_name="coder-1")
    agents.end_session(workspace=workspace, session_id=session.pk)
    agents.end_session(workspace=workspace, session_id=session.pk)  # twice: one event

    assert since(mark) == [
        expected(EventType.SESSION_REGISTERED, session=session),
        expected(EventType.SESSION_ENDED, session=session),
    ]


def test_a_heartbeat_writes_no_event(workspace, make_session):
    session = make_session()
    mark = cursor()
    agents.heartbeat_session(workspace=workspace, session_id=session.pk)
    assert since(mark) == []


# --- leases ---------------------------------------------------------------------------


def test_a_lease_grant_names_the_lease_and_its_fence(workspace, issue, make_session):
    session = make_session()
    mark = cursor()
    lease = claim_lease(workspace, issue, session)
    claim_lease(workspace, issue, session)  # idempotent: no second grant

    assert since(mark) == [
        expected(
            EventType.LEASE_GRANTED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"lease": lease.pk, "fence": 1},
        )
    ]


def test_a_release_by_the_holder_is_reason_released(workspace, issue, make_session):
    session = make_session()
    lease = claim_lease(workspace, issue, session)
    mark = cursor()
    leases.release_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)

    assert since(mark) == [
        expected(
            EventType.LEASE_RELEASED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"lease": lease.pk, "fence": 1, "reason": "released"},
        )
    ]


def test_a_refused_release_writes_nothing(workspace, issue, make_session):
    session = make_session()
    claim_lease(workspace, issue, session)
    mark = cursor()
    with pytest.raises(StaleFence):
        leases.release_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk, fence=7)
    assert since(mark) == []


def test_ending_a_session_releases_what_it_held_agent_ended(
    workspace, make_issue, make_session, roomy
):
    session = make_session()
    first, second = make_issue(title="First"), make_issue(title="Second")
    lease_one = claim_lease(workspace, first, session)
    lease_two = claim_lease(workspace, second, session)
    file_claims.claim_files(
        workspace=workspace, issue_id=first.pk, paths=["a.py", "b.py"], session_id=session.pk
    )
    file_claims.claim_files(
        workspace=workspace, issue_id=second.pk, paths=["c.py"], session_id=session.pk
    )
    mark = cursor()
    agents.end_session(workspace=workspace, session_id=session.pk)

    ended = {"reason": "agent_ended"}
    assert since(mark) == [
        expected(
            EventType.LEASE_RELEASED,
            project="core",
            issue=first.pk,
            session=session,
            data={"lease": lease_one.pk, "fence": 1, **ended},
        ),
        expected(
            EventType.LEASE_RELEASED,
            project="core",
            issue=second.pk,
            session=session,
            data={"lease": lease_two.pk, "fence": 1, **ended},
        ),
        # One claims.released per holder (issue and session) and reason.
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=first.pk,
            session=session,
            data={"paths": ["a.py", "b.py"], **ended},
        ),
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=second.pk,
            session=session,
            data={"paths": ["c.py"], **ended},
        ),
        expected(EventType.SESSION_ENDED, session=session),
    ]


def test_released_leases_are_announced_in_lease_id_order_whatever_the_update_returns(
    workspace, make_issue, make_session, roomy, monkeypatch
):
    # PostgreSQL's UPDATE … RETURNING gives its rows in the order it updated them:
    # shown here by handing them back reversed; the events still follow the leases' ids.
    session = make_session()
    first, second = make_issue(title="First"), make_issue(title="Second")
    lease_one = claim_lease(workspace, first, session)
    lease_two = claim_lease(workspace, second, session)
    returned = leases.fetchall
    monkeypatch.setattr(leases, "fetchall", lambda statement: returned(statement)[::-1])
    mark = cursor()
    with events.change():
        released = leases.release_leases(reason="agent_ended", session_id=session.pk)

    assert [lease.pk for lease in released] == [lease_one.pk, lease_two.pk]
    assert [event["data"]["lease"] for event in since(mark)] == [lease_one.pk, lease_two.pk]


def test_a_reclaimed_lease_is_announced_for_its_old_holder_naming_the_taker(
    workspace, issue, make_session, roomy
):
    old, new = make_session("old"), make_session("new")
    lost = claim_lease(workspace, issue, old)
    expire(old)
    mark = cursor()
    taken = claim_lease(workspace, issue, new)

    assert since(mark) == [
        expected(
            EventType.LEASE_RELEASED,
            project="core",
            issue=issue.pk,
            session=old,
            data={"lease": lost.pk, "fence": 1, "reason": "expired", "by": by(new)},
        ),
        expected(
            EventType.LEASE_GRANTED,
            project="core",
            issue=issue.pk,
            session=new,
            data={"lease": taken.pk, "fence": 2},
        ),
    ]


def test_a_lease_held_by_a_live_session_is_refused_silently(workspace, issue, make_session):
    holder, other = make_session("holder"), make_session("other")
    claim_lease(workspace, issue, holder)
    mark = cursor()
    with pytest.raises(LeaseHeld):
        claim_lease(workspace, issue, other)
    assert since(mark) == []


def test_closing_an_issue_releases_its_lease_and_claims_issue_closed(
    workspace, issue, make_session
):
    session = make_session()
    lease = claim_lease(workspace, issue, session)
    file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["x.py"], session_id=session.pk
    )
    mark = cursor()
    workflow.transition_issue(workspace=workspace, issue_id=issue.pk, to="cancelled", by_human=True)

    closed = {"reason": "issue_closed"}
    assert since(mark) == [
        expected(
            EventType.ISSUE_TRANSITIONED,
            project="core",
            issue=issue.pk,
            data={"from": "backlog", "to": "cancelled"},
        ),
        expected(
            EventType.LEASE_RELEASED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"lease": lease.pk, "fence": 1, **closed},
        ),
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"paths": ["x.py"], **closed},
        ),
    ]


def test_the_wip_cap_refusal_is_announced_though_the_claim_failed(
    workspace, make_issue, make_session, project
):
    project.agent_wip_limit = 1
    project.save()
    holder, refused = make_session("holder"), make_session("refused")
    claim_lease(workspace, make_issue(title="Taken"), holder)
    wanted = make_issue(title="Wanted")
    mark = cursor()
    with pytest.raises(WipLimitReached):
        claim_lease(workspace, wanted, refused)

    assert since(mark) == [
        expected(
            EventType.WIP_DENIED,
            project="core",
            issue=wanted.pk,
            session=refused,
            data={"limit": 1},
        )
    ]
