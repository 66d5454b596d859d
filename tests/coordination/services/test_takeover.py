"""Taking over an issue from a dead session: the lease, the dead session's claims on the
issue (released ``expired`` in the same call) and the assignee go to the new agent, by a
lease claim and by ``start_work`` alike. A live holder is still refused; the dead
session's claims on other issues wait for their own paths' next claimer (invariant 4 (stale
reclaim))."""

import pytest

from coordination.errors import LeaseHeld
from coordination.models import Event, EventType, FileClaim, Issue, IssueLease, ReleaseReason
from coordination.services import file_claims, leases, work
from tests.conftest import expire

pytestmark = pytest.mark.django_db


@pytest.fixture
def dead(workspace, make_issue, make_session):
    """A session that started an issue with two files, claimed a file of another issue,
    and stopped heartbeating."""
    issue, elsewhere = make_issue(title="Taken over"), make_issue(title="Elsewhere")
    session = work.start_work(
        workspace=workspace,
        agent_name="oldie",
        issue_id=issue.pk,
        paths=["src/a.py", "src/b/"],
    ).session
    file_claims.claim_files(
        workspace=workspace, issue_id=elsewhere.pk, paths=["docs/x.md"], session_id=session.pk
    )
    expire(session)
    return session, issue, elsewhere


def claims_of(session, issue):
    return {
        claim.path: (claim.release_reason, claim.released_at is not None)
        for claim in FileClaim.objects.filter(session=session, issue=issue)
    }


def released_events(issue, type):
    return [
        (event.session_id, event.data)
        for event in Event.objects.filter(issue=issue, type=type).order_by("id")
        if event.data.get("reason") == ReleaseReason.EXPIRED
    ]


def assert_taken_over(dead_session, issue, elsewhere, taker):
    issue.refresh_from_db()
    assert issue.assignee_id == taker.agent_id
    assert claims_of(dead_session, issue) == {
        "src/a.py": (ReleaseReason.EXPIRED, True),
        "src/b/": (ReleaseReason.EXPIRED, True),
    }
    by = {"session": taker.pk, "agent": taker.agent.name}
    lease = IssueLease.objects.get(session=dead_session)
    assert lease.release_reason == ReleaseReason.EXPIRED
    assert released_events(issue, EventType.LEASE_RELEASED) == [
        (dead_session.pk, {"lease": lease.pk, "fence": lease.fence, "reason": "expired", "by": by})
    ]
    assert released_events(issue, EventType.CLAIMS_RELEASED) == [
        (dead_session.pk, {"paths": ["src/a.py", "src/b/"], "reason": "expired", "by": by})
    ]
    # Its claim of another issue is that path's next claimer's to reclaim.
    assert claims_of(dead_session, elsewhere) == {"docs/x.md": ("", False)}


def test_a_lease_claim_takes_over_the_dead_holders_claims_and_assignment(
    workspace, dead, make_session
):
    dead_session, issue, elsewhere = dead
    taker = make_session("newbie")
    claimed = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=taker.pk)
    assert claimed.created and [lease.session_id for lease in claimed.taken_over] == [
        dead_session.pk
    ]
    assert_taken_over(dead_session, issue, elsewhere, taker)


def test_start_work_takes_over_the_dead_holders_claims_and_assignment(workspace, dead):
    dead_session, issue, elsewhere = dead
    started = work.start_work(
        workspace=workspace, agent_name="newbie", issue_id=issue.pk, paths=["src/c.py"]
    )
    assert_taken_over(dead_session, issue, elsewhere, started.session)
    assert sorted(
        FileClaim.objects.filter(issue=issue, released_at__isnull=True).values_list(
            "path", "session_id"
        )
    ) == [("src/c.py", started.session.pk)]


def test_start_work_reclaiming_the_same_paths_announces_each_release_once(workspace, dead):
    """The dead session's claim of a path the taker claims again is reclaimed by the
    file claim; the rest by the takeover: each path is released once."""
    dead_session, issue, _ = dead
    started = work.start_work(
        workspace=workspace, agent_name="newbie", issue_id=issue.pk, paths=["src/a.py"]
    )
    assert claims_of(dead_session, issue) == {
        "src/a.py": (ReleaseReason.EXPIRED, True),
        "src/b/": (ReleaseReason.EXPIRED, True),
    }
    announced = [data["paths"] for _, data in released_events(issue, EventType.CLAIMS_RELEASED)]
    assert sorted(path for paths in announced for path in paths) == ["src/a.py", "src/b/"]
    assert Issue.objects.get(pk=issue.pk).assignee_id == started.session.agent_id


def test_a_live_holder_is_still_refused_and_keeps_everything(workspace, make_issue, make_session):
    issue = make_issue()
    holder = work.start_work(
        workspace=workspace, agent_name="oldie", issue_id=issue.pk, paths=["src/a.py"]
    ).session
    with pytest.raises(LeaseHeld):
        leases.claim_issue(
            workspace=workspace, issue_id=issue.pk, session_id=make_session("newbie").pk
        )
    with pytest.raises(LeaseHeld):
        work.start_work(workspace=workspace, agent_name="late", issue_id=issue.pk)
    issue.refresh_from_db()
    assert issue.assignee_id == holder.agent_id
    assert claims_of(holder, issue) == {"src/a.py": ("", False)}


def test_a_person_s_assignee_stays_on_a_takeover(workspace, dead, agent, make_session):
    dead_session, issue, _ = dead
    Issue.objects.filter(pk=issue.pk).update(assignee=agent)  # a person's choice
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=make_session("newbie").pk)
    assert Issue.objects.get(pk=issue.pk).assignee_id == agent.pk
    assert claims_of(dead_session, issue)["src/a.py"] == (ReleaseReason.EXPIRED, True)


def test_the_same_agent_restarting_takes_over_its_own_dead_session(workspace, dead):
    dead_session, issue, _ = dead
    started = work.start_work(workspace=workspace, agent_name="oldie", issue_id=issue.pk)
    assert started.session.agent_id == dead_session.agent_id
    assert Issue.objects.get(pk=issue.pk).assignee_id == dead_session.agent_id
    assert claims_of(dead_session, issue)["src/b/"] == (ReleaseReason.EXPIRED, True)


def test_an_aged_out_lease_of_a_live_holder_keeps_its_claims(
    workspace, project, make_issue, make_session
):
    """max_age is not a takeover of a dead session: the holder is alive and keeps its
    claims and its assignment (invariants 7 (release reasons) and 15 (day counts))."""
    issue = make_issue()
    holder = work.start_work(
        workspace=workspace, agent_name="oldie", issue_id=issue.pk, paths=["src/a.py"]
    ).session
    IssueLease.objects.filter(session=holder).update(ages_out_at="2000-01-01T00:00:00Z")
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=make_session("newbie").pk)
    assert IssueLease.objects.get(session=holder).release_reason == ReleaseReason.MAX_AGE
    assert claims_of(holder, issue) == {"src/a.py": ("", False)}
    assert Issue.objects.get(pk=issue.pk).assignee_id == holder.agent_id
