"""The landing queue (invariant 21 (the default branch is always green)): entries queued
under their lease, batches of entries whose paths do not overlap taken in order of
arrival under a fence, a dead tester's batch taken again whole, stale entries rejected,
and the tester's reports fenced. On both databases (the suite runs on each)."""

from typing import Any

import pytest

from coordination.errors import (
    InvalidInput,
    LandingExists,
    LeaseNotHeld,
    NotFound,
    SessionNotLive,
    StaleFence,
)
from coordination.models import Event, Landing
from coordination.selectors import landings as selected
from coordination.services import file_claims, landings, leases
from tests.api_helpers import assert_error, post
from tests.conftest import expire
from tests.coordination.landing_helpers import queue_work

pytestmark = pytest.mark.django_db

COMMIT = "0123abc"


@pytest.fixture
def queue(workspace, project, make_issue, make_session):
    """``queue(paths)``: a new issue leased by a session of its own, its paths claimed,
    queued; returns the entry."""
    project.agent_wip_limit = 50
    project.save()
    made = {"n": 0}

    def queue_one(paths: list[str], **fields: Any) -> Landing:
        made["n"] += 1
        issue = make_issue(title=f"issue {made['n']}")
        session = fields.pop("session", None) or make_session(f"coder-{made['n']}")
        return queue_work(issue, session, paths=paths, branch=f"work-{made['n']}", commit=COMMIT)

    return queue_one


@pytest.fixture
def tester(make_session):
    return make_session("tester")


def take(workspace, tester, max_entries=4):
    return landings.take_batch(
        workspace=workspace, project_key="core", session_id=tester.pk, max_entries=max_entries
    )


def ids(entries):
    return [entry.pk for entry in entries]


# --- queue ---------------------------------------------------------------------------------


def test_an_entry_is_queued_under_its_lease_with_the_issues_claimed_paths(workspace, queue):
    entry = queue(["src/b.py", "src/a.py"])
    assert entry.state == "queued" and entry.paths == ["src/a.py", "src/b.py"]
    assert entry.lease_fence >= 1 and entry.commit == COMMIT
    event = Event.objects.get(type="landing.queued")
    assert event.issue_id == entry.issue_id and event.session_id == entry.session_id
    assert event.data == {"landing": entry.pk, "branch": entry.branch, "commit": COMMIT}
    assert selected.shown(workspace, entry).place == 1


def test_one_open_entry_per_issue(workspace, queue):
    entry = queue(["src/a.py"])
    with pytest.raises(LandingExists) as refused:
        landings.queue_landing(
            workspace=workspace,
            issue_id=entry.issue_id,
            session_id=entry.session_id,
            branch="again",
            commit=COMMIT,
            fence=entry.lease_fence,
        )
    assert refused.value.extra == {"landing": entry.pk}
    assert Landing.objects.count() == 1


def test_a_queued_entry_of_a_lost_lease_gives_way_to_the_new_holders(
    workspace, queue, make_session, tester
):
    old = queue(["src/a.py"])
    expire(old.session)
    heir = make_session("heir")
    lease = leases.claim_issue(workspace=workspace, issue_id=old.issue_id, session_id=heir.pk)
    new = landings.queue_landing(
        workspace=workspace,
        issue_id=old.issue_id,
        session_id=heir.pk,
        branch="redone",
        commit="7654321",
        fence=lease.lease.fence,
    )
    old.refresh_from_db()
    assert (old.state, old.reason) == ("rejected", "stale_fence")
    assert new.state == "queued"
    # Under test, the old entry is its tester's to land or reject: the issue waits.
    land_all(workspace, tester, take(workspace, tester))
    expire(heir)
    third = make_session("third")
    lease = leases.claim_issue(workspace=workspace, issue_id=old.issue_id, session_id=third.pk)
    again = landings.queue_landing(
        workspace=workspace,
        issue_id=old.issue_id,
        session_id=third.pk,
        branch="again",
        commit="7654321",
        fence=lease.lease.fence,
    )
    testing = take(workspace, tester)
    assert ids(testing.entries) == [again.pk]
    expire(third)
    fourth = make_session("fourth")
    lease = leases.claim_issue(workspace=workspace, issue_id=old.issue_id, session_id=fourth.pk)
    with pytest.raises(LandingExists):
        landings.queue_landing(
            workspace=workspace,
            issue_id=old.issue_id,
            session_id=fourth.pk,
            branch="fourth",
            commit="7654321",
            fence=lease.lease.fence,
        )


def test_queueing_needs_the_live_lease_and_its_fence(workspace, issue, make_session):
    holder, other = make_session("holder"), make_session("other")
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=holder.pk)
    fence = lease.lease.fence

    def queue_as(session, fence):
        return landings.queue_landing(
            workspace=workspace,
            issue_id=issue.pk,
            session_id=session.pk,
            branch="b",
            commit=COMMIT,
            fence=fence,
        )

    with pytest.raises(LeaseNotHeld):
        queue_as(other, fence)
    with pytest.raises(StaleFence):
        queue_as(holder, fence + 1)
    expire(holder)
    with pytest.raises(SessionNotLive):
        queue_as(holder, fence)
    assert not Landing.objects.exists()
    assert not Event.objects.filter(type__startswith="landing.").exists()


def test_another_workspaces_issue_is_not_found(other_workspace, queue, make_session):
    entry = queue([])
    stranger = make_session("stranger", workspace=other_workspace)
    with pytest.raises(NotFound):
        landings.queue_landing(
            workspace=other_workspace,
            issue_id=entry.issue_id,
            session_id=stranger.pk,
            branch="b",
            commit=COMMIT,
            fence=entry.lease_fence,
        )


# --- take ------------------------------------------------------------------------------------


def test_the_head_batch_is_the_first_entries_whose_paths_do_not_overlap(workspace, queue, tester):
    first = queue(["src/a.py"])
    second = queue(["src/b/"])
    # Claims keep two open entries apart; one released after queueing does not.
    file_claims.release_files(
        workspace=workspace, issue_id=second.issue_id, session_id=second.session_id
    )
    third = queue(["src/b/c.py"])  # under the second's directory: the batch stops here
    fourth = queue(["src/d.py"])  # free, but later than the third: not passed ahead of it

    batch = take(workspace, tester)
    assert batch.fence == 1 and ids(batch.entries) == [first.pk, second.pk]
    assert {entry.state for entry in batch.entries} == {"testing"}
    assert all(entry.tester_id == tester.pk for entry in batch.entries)
    places = {entry.pk: entry.place for entry in selected.landings(workspace)}
    assert places == {first.pk: 1, second.pk: 2, third.pk: 3, fourth.pk: 4}
    testing = Event.objects.filter(type="landing.testing").order_by("id")
    assert [event.data["landing"] for event in testing] == [first.pk, second.pk]
    assert testing[0].data["batch"] == [first.pk, second.pk]
    assert testing[0].session_id == tester.pk


def test_a_batch_is_at_most_max_and_an_entry_without_paths_is_alone(workspace, queue, tester):
    entries = [queue([f"src/{n}.py"]) for n in range(3)]
    lonely = queue([])  # what it touches is unknown: it overlaps everything
    after = queue(["src/z.py"])
    batches = []
    for _ in range(4):
        batch = take(workspace, tester, max_entries=2)
        batches.append(ids(batch.entries))
        land_all(workspace, tester, batch)
    assert batches == [ids(entries[:2]), [entries[2].pk], [lonely.pk], [after.pk]]


def land_all(workspace, tester, batch):
    for entry in batch.entries:
        landings.land(
            workspace=workspace,
            landing_id=entry.pk,
            session_id=tester.pk,
            fence=batch.fence,
            commit="fedcba9",
        )


def test_a_live_testers_batch_is_not_taken_twice(workspace, queue, tester, make_session):
    queue(["src/a.py"])
    batch = take(workspace, tester)
    other = make_session("other-tester")
    answer = take(workspace, other)
    assert answer.fence is None and answer.entries == []
    assert answer.busy == {"session": tester.pk, "agent": "tester", "fence": batch.fence}
    assert Landing.objects.get().tester_id == tester.pk


def test_nothing_waiting_is_an_empty_answer(workspace, project, tester):
    assert take(workspace, tester) == landings.Batch()


def test_a_dead_testers_batch_is_taken_again_whole_and_its_reports_are_stale(
    workspace, queue, tester, make_session
):
    first, second = queue(["src/a.py"]), queue(["src/b.py"])
    old = take(workspace, tester)
    expire(tester)
    heir = make_session("heir")
    new = take(workspace, heir, max_entries=1)  # takes less: the rest is queued again
    assert new.fence == old.fence + 1 and ids(new.entries) == [first.pk]
    assert Landing.objects.get(pk=second.pk).state == "queued"
    with pytest.raises(StaleFence) as stale:
        landings.land(
            workspace=workspace,
            landing_id=first.pk,
            session_id=tester.pk,
            fence=old.fence,
            commit="fedcba9",
        )
    assert stale.value.extra == {"fence": old.fence, "current_fence": new.fence}
    land_all(workspace, heir, new)
    assert Landing.objects.get(pk=first.pk).state == "landed"
    assert Event.objects.filter(type="landing.landed").count() == 1


def returns(workspace) -> list[Event]:
    """The ``landing.queued`` events of entries put back in line, in order."""
    queued = Event.objects.filter(workspace=workspace, type="landing.queued").order_by("id")
    return [event for event in queued if "returned_by" in event.data]


def test_a_dead_testers_entries_the_new_batch_leaves_are_put_back_with_an_event(
    workspace, queue, tester, make_session
):
    first, second, third = queue(["src/a.py"]), queue(["src/b.py"]), queue(["src/c.py"])
    old = take(workspace, tester)
    expire(tester)
    heir = make_session("heir")
    new = take(workspace, heir, max_entries=1)
    assert ids(new.entries) == [first.pk]
    back = returns(workspace)
    assert [event.data for event in back] == [
        {"landing": entry.pk, "returned_by": old.fence, "reason": "tester_gone"}
        for entry in (second, third)
    ]
    assert [event.issue_id for event in back] == [second.issue_id, third.issue_id]
    assert {(event.session_id, event.agent_id) for event in back} == {(heir.pk, heir.agent_id)}
    assert {event.project_id for event in back} == {first.project_id}
    # One event per change: each entry's change of state has its event.
    states = dict(Landing.objects.values_list("pk", "state"))
    assert states == {first.pk: "testing", second.pk: "queued", third.pk: "queued"}
    # A take that takes the dead batch whole puts nothing back.
    expire(heir)
    whole = take(workspace, make_session("third-tester"))
    assert ids(whole.entries) == [first.pk, second.pk, third.pk]
    assert len(returns(workspace)) == 2


def test_a_dead_testers_batch_keeps_its_stale_entries_rejected(
    workspace, queue, tester, make_session
):
    first, lost, third = queue(["src/a.py"]), queue(["src/b.py"]), queue(["src/c.py"])
    take(workspace, tester)
    expire(tester)
    expire(lost.session)
    thief = make_session("thief")
    leases.claim_issue(workspace=workspace, issue_id=lost.issue_id, session_id=thief.pk)
    heir = make_session("heir")
    batch = take(workspace, heir, max_entries=1)
    assert ids(batch.entries) == [first.pk]
    states = dict(Landing.objects.values_list("pk", "state"))
    assert states == {first.pk: "testing", lost.pk: "rejected", third.pk: "queued"}
    # The stale one is rejected (its event), the other put back (its event).
    assert [event.data["landing"] for event in returns(workspace)] == [third.pk]
    rejected = Event.objects.get(workspace=workspace, type="landing.rejected")
    assert rejected.data["landing"] == lost.pk and rejected.data["reason"] == "stale_fence"


def test_an_entry_whose_lease_was_lost_is_rejected_stale_at_the_take(
    workspace, queue, tester, make_session
):
    lost = queue(["src/a.py"])
    kept = queue(["src/b.py"])
    expire(lost.session)
    thief = make_session("thief")
    leases.claim_issue(workspace=workspace, issue_id=lost.issue_id, session_id=thief.pk)
    batch = take(workspace, tester)
    assert ids(batch.entries) == [kept.pk]
    lost.refresh_from_db()
    assert (lost.state, lost.reason) == ("rejected", "stale_fence")
    event = Event.objects.get(type="landing.rejected")
    assert event.data["reason"] == "stale_fence" and event.data["landing"] == lost.pk


# --- the reports ------------------------------------------------------------------------------


def test_a_rejection_keeps_the_tail_of_the_detail_and_says_why(workspace, queue, tester):
    entry = queue(["src/a.py"])
    batch = take(workspace, tester)
    output = "x" * 5000 + "NameError: name 'fetch' is not defined"
    rejected = landings.reject(
        workspace=workspace,
        landing_id=entry.pk,
        session_id=tester.pk,
        fence=batch.fence,
        reason="check_failed",
        detail=output,
    )
    assert rejected.state == "rejected" and rejected.reason == "check_failed"
    assert len(rejected.detail) == 4000 and rejected.detail.endswith("not defined")
    assert rejected.finished_at is not None and selected.shown(workspace, rejected).place is None
    event = Event.objects.get(type="landing.rejected")
    assert len(event.data["detail"]) == 500 and event.session_id == tester.pk
    # The issue can be queued again, by its holder.
    again = landings.queue_landing(
        workspace=workspace,
        issue_id=entry.issue_id,
        session_id=entry.session_id,
        branch=entry.branch,
        commit="1234567",
        fence=entry.lease_fence,
    )
    assert again.state == "queued"


def test_reports_need_the_batchs_tester_and_fence(workspace, queue, tester, make_session):
    entry = queue(["src/a.py"])
    batch = take(workspace, tester)
    other = make_session("other")
    for session, fence in ((other, batch.fence), (tester, batch.fence + 1)):
        with pytest.raises(StaleFence):
            landings.land(
                workspace=workspace,
                landing_id=entry.pk,
                session_id=session.pk,
                fence=fence,
                commit="fedcba9",
            )
        with pytest.raises(StaleFence):
            landings.return_batch(workspace=workspace, session_id=session.pk, fence=fence)
    with pytest.raises(InvalidInput):
        landings.reject(
            workspace=workspace,
            landing_id=entry.pk,
            session_id=tester.pk,
            fence=batch.fence,
            reason="stale_fence",
        )
    assert Landing.objects.get().state == "testing"


def test_returned_entries_keep_their_place(workspace, queue, tester):
    first, second = queue(["src/a.py"]), queue(["src/b.py"])
    batch = take(workspace, tester)
    assert landings.return_batch(workspace=workspace, session_id=tester.pk, fence=batch.fence) == [
        first.pk,
        second.pk,
    ]
    assert set(Landing.objects.values_list("state", flat=True)) == {"queued"}
    assert ids(take(workspace, tester).entries) == [first.pk, second.pk]


# --- over REST ------------------------------------------------------------------------------


def test_the_queue_over_rest(api, workspace, issue, make_session):
    session = make_session("coder")
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    body = {
        "issue": issue.pk,
        "session": session.pk,
        "branch": "fix-login",
        "commit": "a" * 40,
        "fence": lease.lease.fence,
    }
    for field, bad in (("commit", "not-a-sha"), ("branch", "two words"), ("fence", "1")):
        assert_error(post(api, "/landings/", {**body, field: bad}), 400, "invalid")
    created = post(api, "/landings/", body)
    assert created.status_code == 201, created.content
    entry = created.json()
    assert entry["state"] == "queued" and entry["place"] == 1 and entry["project"] == "core"
    assert_error(post(api, "/landings/", body), 409, "landing_exists")
    tester = make_session("tester")
    assert_error(
        post(api, "/landings/take/", {"session": tester.pk, "project": "core", "max": 0}),
        400,
        "invalid",
    )
    taken = post(api, "/landings/take/", {"session": tester.pk, "project": "core"}).json()
    assert taken["busy"] is None and [e["id"] for e in taken["entries"]] == [entry["id"]]
    assert taken["entries"][0]["tester"] == {"session": tester.pk, "agent": "tester"}
    landed = post(
        api,
        f"/landings/{entry['id']}/land/",
        {"session": tester.pk, "fence": taken["fence"], "commit": "b" * 40},
    )
    assert landed.status_code == 200 and landed.json()["landed_commit"] == "b" * 40
    listed = api.get("/api/v1/landings/?project=core&state=landed").json()
    assert [e["id"] for e in listed["results"]] == [entry["id"]]
    assert api.get("/api/v1/landings/?state=queued").json()["results"] == []
    assert_error(api.get("/api/v1/landings/?state=gone"), 400, "invalid")
