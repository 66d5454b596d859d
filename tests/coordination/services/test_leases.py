"""Issue leases: one live lease per issue, the WIP cap, stale reclaim (invariants 2 (one live lease
per issue), 3 (the WIP cap), 4 (stale reclaim) and 8 (append-only logs))."""

import pytest

from coordination.errors import (
    InvalidInput,
    InvalidTransition,
    LeaseHeld,
    LeaseNotHeld,
    NotFound,
    SessionNotLive,
    WipLimitReached,
)
from coordination.models import IssueLease, Project, ReleaseReason, WipCapDenial
from coordination.services import agents, leases, operators, workflow
from tests.api_helpers import V1, post
from tests.conftest import expire
from tests.coordination.conftest import claim_lease, lease_fences

pytestmark = pytest.mark.django_db


def claim(workspace, issue, session):
    return leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)


def test_claim_creates_a_live_lease(workspace, issue, make_session):
    session = make_session()
    claimed = claim(workspace, issue, session)
    assert claimed.created
    assert claimed.lease.is_live and claimed.lease.session_id == session.pk
    assert claimed.lease.agent_id == session.agent_id


def test_claiming_again_with_the_same_session_returns_it(workspace, issue, make_session):
    session = make_session()
    first = claim(workspace, issue, session)
    second = claim(workspace, issue, session)
    assert not second.created and second.lease.pk == first.lease.pk
    assert IssueLease.objects.count() == 1


def test_claim_held_by_a_live_session_names_the_holder(workspace, issue, make_session):
    holder, other = make_session("holder"), make_session("other")
    claim(workspace, issue, holder)
    with pytest.raises(LeaseHeld) as raised:
        claim(workspace, issue, other)
    assert raised.value.extra["holder"] == {"session": holder.pk, "agent": "holder"}


def test_not_live_claimer_is_refused(workspace, issue, make_session):
    session = make_session()
    expire(session)
    with pytest.raises(SessionNotLive):
        claim(workspace, issue, session)
    assert not IssueLease.objects.exists()


def test_ended_claimer_is_refused(workspace, issue, make_session):
    session = make_session()
    agents.end_session(workspace=workspace, session_id=session.pk)
    with pytest.raises(SessionNotLive):
        claim(workspace, issue, session)


def test_dead_holders_lease_is_reclaimed_expired_in_the_claimers_call(
    workspace, issue, make_session
):
    dead, claimer = make_session("dead"), make_session("claimer")
    old = claim(workspace, issue, dead).lease
    expire(dead)

    new = claim(workspace, issue, claimer)

    assert new.created and new.lease.session_id == claimer.pk
    old.refresh_from_db()
    assert old.release_reason == ReleaseReason.EXPIRED and old.released_at is not None


def test_lease_of_a_deleted_session_is_reclaimable(workspace, issue, make_session):
    gone, claimer = make_session("gone"), make_session("claimer")
    claim(workspace, issue, gone)
    gone.delete()
    assert claim(workspace, issue, claimer).created
    assert IssueLease.objects.get(release_reason=ReleaseReason.EXPIRED).session_id is None


def test_wip_cap_refuses_and_records_a_denial(workspace, project, make_issue, make_session):
    session = make_session()
    issues = [make_issue() for _ in range(4)]
    for issue in issues[:3]:
        claim(workspace, issue, session)

    with pytest.raises(WipLimitReached) as raised:
        claim(workspace, issues[3], session)

    assert raised.value.extra == {"limit": 3}
    assert IssueLease.objects.live().count() == 3
    denial = WipCapDenial.objects.get()
    assert (denial.project_id, denial.issue_id, denial.session_id, denial.limit) == (
        project.pk,
        issues[3].pk,
        session.pk,
        3,
    )


def test_wip_cap_counts_only_live_holders(workspace, project, make_issue, make_session):
    project.agent_wip_limit = 1
    project.save()
    dead, claimer = make_session("dead"), make_session("claimer")
    claim(workspace, make_issue(), dead)
    expire(dead)
    assert claim(workspace, make_issue(), claimer).created


def test_wip_cap_is_per_project(workspace, project, make_issue, make_session):
    other = Project.objects.create(workspace=workspace, key="web", name="Web", agent_wip_limit=1)
    session = make_session()
    claim(workspace, make_issue(project=other), session)
    with pytest.raises(WipLimitReached):
        claim(workspace, make_issue(project=other), session)
    assert claim(workspace, make_issue(), session).created


def test_release_by_the_holder(workspace, issue, make_session):
    session = make_session()
    claim(workspace, issue, session)
    lease = leases.release_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    assert lease.release_reason == ReleaseReason.RELEASED and not lease.is_live


def test_release_by_a_non_holder_is_refused(workspace, issue, make_session):
    holder, other = make_session("holder"), make_session("other")
    claim(workspace, issue, holder)
    with pytest.raises(LeaseNotHeld):
        leases.release_issue(workspace=workspace, issue_id=issue.pk, session_id=other.pk)
    assert IssueLease.objects.live().get().session_id == holder.pk


def test_unknown_issue_is_not_found_and_unknown_session_invalid(workspace, issue, make_session):
    with pytest.raises(NotFound):
        leases.claim_issue(workspace=workspace, issue_id=999_999, session_id=make_session().pk)
    with pytest.raises(InvalidInput):
        leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=999_999)


@pytest.mark.parametrize("closed", ["done", "cancelled"])
def test_a_closed_issue_cannot_be_leased(workspace, make_issue, make_session, closed):
    issue = make_issue(status=closed)
    with pytest.raises(InvalidTransition):
        claim(workspace, issue, make_session())
    assert not IssueLease.objects.exists()


# --- fences ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_lease_fences_grow_per_issue_through_release_expiry_override_and_close(
    api, workspace, make_issue, make_session, roomy
):
    issue, other = make_issue(), make_issue()
    a, b, c = make_session("a"), make_session("b"), make_session("c")

    body = post(api, f"/issues/{issue.pk}/claim/", {"session": a.pk}).json()
    assert body["fence"] == 1
    assert claim_lease(workspace, other, b).fence == 1  # counted per issue
    assert claim_lease(workspace, issue, a).fence == 1  # the holder's own lease again: same one
    leases.release_issue(workspace=workspace, issue_id=issue.pk, session_id=a.pk, fence=1)
    assert claim_lease(workspace, issue, b).fence == 2  # after a release
    expire(b)
    assert claim_lease(workspace, issue, c).fence == 3  # after a stale reclaim
    operators.force_release_leases(leases=IssueLease.objects.filter(issue=issue), operator="op")
    assert claim_lease(workspace, issue, a).fence == 4  # after an override
    workflow.transition_issue(
        workspace=workspace, issue_id=issue.pk, to="cancelled", by_human=False
    )
    workflow.transition_issue(workspace=workspace, issue_id=issue.pk, to="backlog", by_human=False)
    assert claim_lease(workspace, issue, c).fence == 5  # after a close and a reopen

    assert lease_fences(issue) == [1, 2, 3, 4, 5]
    assert lease_fences(other) == [1]
    reasons = IssueLease.objects.filter(issue=issue).order_by("id")
    assert list(reasons.values_list("release_reason", flat=True)) == [
        ReleaseReason.RELEASED,
        ReleaseReason.EXPIRED,
        ReleaseReason.OVERRIDDEN,
        ReleaseReason.ISSUE_CLOSED,
        "",
    ]
    shown = api.get(f"{V1}/issues/{issue.pk}/").json()["lease"]
    assert shown["fence"] == 5
    listed = api.get(f"{V1}/leases/?issue={issue.pk}").json()["results"]
    assert [lease["fence"] for lease in listed] == [5, 4, 3, 2, 1]


# --- the assignee ------------------------------------------------------------------------


def assignee_of(issue):
    issue.refresh_from_db()
    return issue.assignee


def test_a_claim_makes_its_agent_the_assignee_of_an_unassigned_issue(
    workspace, issue, make_session
):
    before = issue.updated_at
    session = make_session("erin")
    claim(workspace, issue, session)
    assert assignee_of(issue) == session.agent
    assert issue.updated_at > before


def test_a_claim_never_replaces_the_assignee(workspace, issue, agent, make_session):
    issue.assignee = agent  # a person's choice
    issue.save()
    claim(workspace, issue, make_session("erin"))
    assert assignee_of(issue) == agent


def test_a_takeover_makes_the_taker_the_assignee_in_place_of_the_dead_holder(
    workspace, issue, make_session
):
    dead, next_one = make_session("dead"), make_session("next")
    claim(workspace, issue, dead)
    expire(dead)
    claim(workspace, issue, next_one)
    assert assignee_of(issue) == next_one.agent  # more in test_takeover.py


def test_a_refused_claim_assigns_nobody(workspace, project, make_issue, make_session):
    project.agent_wip_limit = 1
    project.save()
    first, second = make_issue(title="first"), make_issue(title="second")
    claim(workspace, first, make_session("holder"))
    with pytest.raises(WipLimitReached):
        claim(workspace, second, make_session("capped"))
    with pytest.raises(LeaseHeld):
        claim(workspace, first, make_session("late"))
    assert assignee_of(second) is None
    assert assignee_of(first).name == "holder"
