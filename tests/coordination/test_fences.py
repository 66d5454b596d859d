"""Fences (API.md, "Fences"): numbers that grow per issue lease and per worktree lock,
are never reused, and refuse a holder that lost what it held (409 ``stale_fence``).

The scenario throughout: a holder pauses past the TTL, another session reclaims what
it held, then the old holder wakes up and acts with its old fence.
"""

import importlib
import random
import threading
import time
from typing import Any

import pytest
from django.apps import apps
from django.db import IntegrityError, connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from coordination.errors import StaleFence
from coordination.models import (
    AgentSession,
    ClaimConflict,
    FileClaim,
    Issue,
    IssueLease,
    Message,
    Project,
    ReleaseReason,
    Run,
    Worktree,
    WorktreeLock,
)
from coordination.services import agents, file_claims, leases, operators, work, workflow, worktrees
from tests.api_helpers import V1, assert_error, post
from tests.conftest import expire, run_in_threads

REPORT = {"summary": "Done.", "verification": "Tests pass."}
BAD_FENCES = ["1", "", 0, -1, 1.5, 1.0, True, [1], {"fence": 1}, 2**31, 2**63]
fences_migration = importlib.import_module("coordination.migrations.0006_fences")


# --- helpers ---------------------------------------------------------------------------


def claim(workspace, issue, session):
    return leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk).lease


def dispatch(workspace, session, issue):
    return worktrees.dispatch_run(workspace=workspace, session_id=session.pk, issue_id=issue.pk)


def lock_of(run) -> WorktreeLock:
    return WorktreeLock.objects.get(run_id=run.pk)


def lease_fences(issue) -> list[int]:
    return list(
        IssueLease.objects.filter(issue=issue).order_by("id").values_list("fence", flat=True)
    )


def lock_fences(worktree) -> list[int]:
    rows = WorktreeLock.objects.filter(worktree=worktree).order_by("id")
    return list(rows.values_list("fence", flat=True))


def state() -> dict[str, Any]:
    """Everything a refused call must leave as it was."""
    return {
        "leases": list(
            IssueLease.objects.order_by("id").values_list(
                "id", "session_id", "released_at", "release_reason", "fence"
            )
        ),
        "claims": list(
            FileClaim.objects.order_by("id").values_list(
                "id", "path", "issue_id", "session_id", "released_at", "release_reason"
            )
        ),
        "conflicts": ClaimConflict.objects.count(),
        "messages": Message.objects.count(),
        "runs": list(Run.objects.order_by("id").values_list("id", "status", "finished_at")),
        "locks": list(
            WorktreeLock.objects.order_by("id").values_list(
                "id", "released_at", "release_reason", "fence"
            )
        ),
        "issues": list(Issue.objects.order_by("id").values_list("id", "status", "report")),
        "sessions": list(
            AgentSession.objects.order_by("id").values_list("id", "status", "ended_at")
        ),
    }


@pytest.fixture
def roomy(project: Project) -> Project:
    """Enough WIP room that the cap never gets in a fence test's way."""
    project.agent_wip_limit = 100
    project.save()
    return project


@pytest.fixture
def tree(workspace) -> Worktree:
    return Worktree.objects.create(workspace=workspace, slug="main", name="Main")


@pytest.fixture
def lost_lease(workspace, issue, make_session, roomy):
    """``old`` held the issue with fence 1, paused past the TTL and ``new`` reclaimed
    it (fence 2); ``old`` has woken up and heartbeats again."""
    old, new = make_session("old"), make_session("new")
    first = claim(workspace, issue, old)
    expire(old)
    second = claim(workspace, issue, new)
    agents.heartbeat_session(workspace=workspace, session_id=old.pk)
    assert (first.fence, second.fence) == (1, 2)
    return old, first, new, second


@pytest.fixture
def lost_lock(workspace, make_issue, make_session, tree, roomy):
    """``old`` ran on the worktree (lock fence 1), paused past the TTL, and ``new``
    dispatched onto the same worktree, reclaiming the lock (fence 2)."""
    old, new = make_session("old"), make_session("new")
    old_run = dispatch(workspace, old, make_issue(worktree=tree))
    expire(old)
    new_run = dispatch(workspace, new, make_issue(worktree=tree))
    agents.heartbeat_session(workspace=workspace, session_id=old.pk)
    assert (lock_of(old_run).fence, lock_of(new_run).fence) == (1, 2)
    assert lock_of(old_run).release_reason == ReleaseReason.EXPIRED
    return old_run, new_run


# --- fences grow and are never reused ------------------------------------------------


@pytest.mark.django_db
def test_lease_fences_grow_per_issue_through_release_expiry_override_and_close(
    api, workspace, make_issue, make_session, roomy
):
    issue, other = make_issue(), make_issue()
    a, b, c = make_session("a"), make_session("b"), make_session("c")

    body = post(api, f"/issues/{issue.pk}/claim/", {"session": a.pk}).json()
    assert body["fence"] == 1
    assert claim(workspace, other, b).fence == 1  # counted per issue
    assert claim(workspace, issue, a).fence == 1  # the holder's own lease again: same one
    leases.release_issue(workspace=workspace, issue_id=issue.pk, session_id=a.pk, fence=1)
    assert claim(workspace, issue, b).fence == 2  # after a release
    expire(b)
    assert claim(workspace, issue, c).fence == 3  # after a stale reclaim
    operators.force_release_leases(leases=IssueLease.objects.filter(issue=issue), operator="op")
    assert claim(workspace, issue, a).fence == 4  # after an override
    workflow.transition_issue(
        workspace=workspace, issue_id=issue.pk, to="cancelled", by_human=False
    )
    workflow.transition_issue(workspace=workspace, issue_id=issue.pk, to="backlog", by_human=False)
    assert claim(workspace, issue, c).fence == 5  # after a close and a reopen

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


@pytest.mark.django_db
def test_lock_fences_grow_per_worktree_through_finish_expiry_override_and_end(
    api, workspace, make_issue, make_session, tree, roomy
):
    other_tree = Worktree.objects.create(workspace=workspace, slug="docs", name="Docs")
    a, b, c = make_session("a"), make_session("b"), make_session("c")

    first = post(api, "/runs/", {"session": a.pk, "issue": make_issue(worktree=tree).pk}).json()
    assert first["fence"] == 1
    assert dispatch(workspace, b, make_issue(worktree=other_tree)).pk  # counted per worktree
    post(api, f"/runs/{first['id']}/finish/", {"outcome": "succeeded", "fence": 1})
    second = dispatch(workspace, b, make_issue(worktree=tree))  # after a finish
    expire(b)
    third = dispatch(workspace, c, make_issue(worktree=tree))  # after a stale reclaim
    operators.force_release_worktree_locks(locks=WorktreeLock.objects.all(), operator="op")
    fourth = dispatch(workspace, a, make_issue(worktree=tree))  # after an override
    agents.end_session(workspace=workspace, session_id=a.pk)
    fifth = dispatch(workspace, c, make_issue(worktree=tree))  # after a clean end

    assert [lock_of(run).fence for run in (second, third, fourth, fifth)] == [2, 3, 4, 5]
    assert lock_fences(tree) == [1, 2, 3, 4, 5]
    assert lock_fences(other_tree) == [1]
    runs = {run["id"]: run["fence"] for run in api.get(f"{V1}/runs/").json()["results"]}
    assert runs[first["id"]] == 1 and runs[fifth.pk] == 5
    assert api.get(f"{V1}/runs/{third.pk}/").json()["fence"] == 3


@pytest.mark.django_db
def test_a_run_without_a_lock_has_no_fence(api, issue, make_session):
    body = post(api, "/runs/", {"session": make_session().pk, "issue": issue.pk}).json()
    assert body["lock_mode"] == "none" and body["fence"] is None
    assert api.get(f"{V1}/runs/").json()["results"][0]["fence"] is None


@pytest.mark.django_db
def test_a_busy_worktree_gives_the_cancelled_run_no_fence(api, make_issue, make_session, tree):
    post(api, "/runs/", {"session": make_session("a").pk, "issue": make_issue(worktree=tree).pk})
    issue = make_issue(worktree=tree)
    assert_error(
        post(api, "/runs/", {"session": make_session("b").pk, "issue": issue.pk}),
        409,
        "worktree_busy",
    )
    cancelled = Run.objects.get(issue=issue)
    assert api.get(f"{V1}/runs/{cancelled.pk}/").json()["fence"] is None
    assert lock_fences(tree) == [1]


@pytest.mark.django_db
def test_the_run_list_costs_the_same_queries_for_one_run_and_many(
    api, workspace, make_issue, make_session, tree, roomy
):
    session = make_session()
    run = dispatch(workspace, session, make_issue(worktree=tree))
    api.get(f"{V1}/runs/")  # warm up whatever a first request does once
    with CaptureQueriesContext(connection) as one:
        assert api.get(f"{V1}/runs/").status_code == 200
    for _ in range(4):
        worktrees.finish_run(workspace=workspace, run_id=run.pk, outcome="succeeded")
        run = dispatch(workspace, session, make_issue(worktree=tree))
    with CaptureQueriesContext(connection) as five:
        body = api.get(f"{V1}/runs/").json()
    assert [r["fence"] for r in body["results"]] == [5, 4, 3, 2, 1]
    assert len(five) == len(one)


@pytest.mark.django_db
def test_the_database_refuses_a_reused_fence(workspace, issue, tree, make_session):
    session = make_session()
    IssueLease.objects.create(
        workspace=workspace, issue=issue, session=session, fence=7, released_at=timezone.now()
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        IssueLease.objects.create(workspace=workspace, issue=issue, session=session, fence=7)
    WorktreeLock.objects.create(
        workspace=workspace, worktree=tree, session=session, fence=3, released_at=timezone.now()
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        WorktreeLock.objects.create(workspace=workspace, worktree=tree, session=session, fence=3)


class Editor:
    """Just what a RunPython function of the migration uses of a schema editor."""

    def __init__(self):
        self.connection = connection

    def execute(self, sql, params=None):
        with connection.cursor() as cursor:
            cursor.execute(sql, params)


@pytest.mark.django_db
def test_the_migration_numbers_existing_rows_per_issue_and_worktree_in_id_order(
    workspace, make_issue, make_session, tree
):
    session = make_session()
    first, second = make_issue(), make_issue()
    released = {"released_at": timezone.now(), "release_reason": "released"}
    for issue, fence in [(first, 30), (second, 40), (first, 20), (first, 10), (second, 50)]:
        IssueLease.objects.create(
            workspace=workspace, issue=issue, session=session, fence=fence, **released
        )
    docs = Worktree.objects.create(workspace=workspace, slug="docs", name="Docs")
    for worktree, fence in [(tree, 90), (docs, 80), (tree, 70)]:
        WorktreeLock.objects.create(
            workspace=workspace, worktree=worktree, session=session, fence=fence, **released
        )

    fences_migration.number_existing_rows(apps, Editor())

    assert (lease_fences(first), lease_fences(second)) == ([1, 2, 3], [1, 2])
    assert (lock_fences(tree), lock_fences(docs)) == ([1, 2], [1])


# --- a holder that lost its lease cannot act with its old fence ----------------------


@pytest.mark.django_db
def test_a_lost_holder_cannot_release_with_its_old_fence(api, issue, lost_lease):
    old, first, new, second = lost_lease
    before = state()

    body = assert_error(
        post(api, f"/issues/{issue.pk}/release/", {"session": old.pk, "fence": first.fence}),
        409,
        "stale_fence",
    )

    assert body["fence"] == 1 and body["current_fence"] == 2
    assert state() == before
    assert IssueLease.objects.unreleased().get(issue=issue).session_id == new.pk
    # Even with the new holder's fence it is not the holder.
    assert_error(
        post(api, f"/issues/{issue.pk}/release/", {"session": old.pk, "fence": second.fence}),
        409,
        "lease_not_held",
    )
    assert state() == before


@pytest.mark.django_db
def test_the_holder_releases_with_its_fence(api, issue, lost_lease):
    _, _, new, second = lost_lease
    response = post(api, f"/issues/{issue.pk}/release/", {"session": new.pk, "fence": 2})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["fence"], body["release_reason"]) == (2, "released")
    assert not IssueLease.objects.unreleased().filter(issue=issue).exists()
    # Released, the fence is stale like any other.
    assert_error(
        post(api, f"/issues/{issue.pk}/release/", {"session": new.pk, "fence": 2}),
        409,
        "stale_fence",
    )


@pytest.mark.django_db
def test_without_a_fence_release_behaves_as_before(api, issue, lost_lease):
    old, _, new, _ = lost_lease
    assert_error(
        post(api, f"/issues/{issue.pk}/release/", {"session": old.pk}), 409, "lease_not_held"
    )
    response = post(api, f"/issues/{issue.pk}/release/", {"session": new.pk, "fence": None})
    assert response.status_code == 200, response.content


@pytest.mark.django_db
def test_a_lost_holder_cannot_claim_files_with_its_old_fence(
    api, workspace, issue, make_issue, make_session, lost_lease
):
    old, first, new, second = lost_lease
    # A path held by another issue: a stale claim must not even log a conflict.
    file_claims.claim_files(
        workspace=workspace,
        issue_id=make_issue().pk,
        paths=["src/held.py"],
        session_id=make_session("other").pk,
    )
    before = state()

    for session in (old.pk, None):
        body = assert_error(
            post(
                api,
                "/file-claims/",
                {
                    "issue": issue.pk,
                    "paths": ["src/a.py", "src/held.py"],
                    "session": session,
                    "fence": first.fence,
                },
            ),
            409,
            "stale_fence",
        )
        assert body["current_fence"] == 2
        assert state() == before

    response = post(
        api,
        "/file-claims/",
        {"issue": issue.pk, "paths": ["src/a.py"], "session": new.pk, "fence": 2},
    )
    assert response.status_code == 201, response.content
    assert FileClaim.objects.get(path="src/a.py").session_id == new.pk


@pytest.mark.django_db
def test_a_file_claim_fence_needs_an_unreleased_lease(api, workspace, issue, make_session, roomy):
    session = make_session()
    before = state()
    body = assert_error(
        post(api, "/file-claims/", {"issue": issue.pk, "paths": ["a.py"], "fence": 1}),
        409,
        "stale_fence",
    )
    assert body["current_fence"] is None and state() == before
    fence = claim(workspace, issue, session).fence
    response = post(api, "/file-claims/", {"issue": issue.pk, "paths": ["a.py"], "fence": fence})
    assert response.status_code == 201, response.content


@pytest.mark.django_db
def test_a_lost_holder_cannot_finish_its_run_with_its_old_fence(api, lost_lock):
    old_run, new_run = lost_lock
    before = state()

    body = assert_error(
        post(api, f"/runs/{old_run.pk}/finish/", {"outcome": "succeeded", "fence": 1}),
        409,
        "stale_fence",
    )

    assert body["fence"] == 1 and body["current_fence"] == 2
    assert state() == before
    assert Run.objects.get(pk=old_run.pk).status == Run.Status.RUNNING
    assert lock_of(new_run).released_at is None
    # Nor with the new holder's fence: it is not the lock of this run.
    assert_error(
        post(api, f"/runs/{old_run.pk}/finish/", {"outcome": "failed", "fence": 2}),
        409,
        "stale_fence",
    )
    assert state() == before

    response = post(api, f"/runs/{new_run.pk}/finish/", {"outcome": "succeeded", "fence": 2})
    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["fence"]) == ("succeeded", 2)
    assert lock_of(new_run).release_reason == ReleaseReason.RELEASED


@pytest.mark.django_db
def test_without_a_fence_finishing_a_run_behaves_as_before(api, lost_lock):
    old_run, new_run = lost_lock
    response = post(api, f"/runs/{old_run.pk}/finish/", {"outcome": "failed"})
    assert response.status_code == 200, response.content
    assert lock_of(old_run).release_reason == ReleaseReason.EXPIRED  # kept its first reason
    assert lock_of(new_run).released_at is None


@pytest.mark.django_db
def test_a_wrong_fence_on_a_held_lock_or_a_lockless_run_changes_nothing(
    api, workspace, make_issue, make_session, tree, roomy
):
    session = make_session()
    locked = dispatch(workspace, session, make_issue(worktree=tree))
    lockless = dispatch(workspace, session, make_issue())
    before = state()
    for run, fence in [(locked, 2), (lockless, 1)]:
        assert_error(
            post(api, f"/runs/{run.pk}/finish/", {"outcome": "succeeded", "fence": fence}),
            409,
            "stale_fence",
        )
    assert state() == before
    response = post(api, f"/runs/{locked.pk}/finish/", {"outcome": "succeeded", "fence": 1})
    assert response.status_code == 200, response.content
    assert_error(
        post(api, f"/runs/{locked.pk}/finish/", {"outcome": "succeeded", "fence": 1}),
        409,
        "run_not_running",
    )


@pytest.mark.django_db
def test_a_lost_holder_cannot_finish_work_with_its_old_fence(
    api, workspace, issue, make_session, roomy
):
    started = post(
        api, "/work/start/", {"agent": "old", "issue": issue.pk, "paths": ["src/a.py"]}
    ).json()
    assert started["lease"]["fence"] == 1
    old = AgentSession.objects.get(pk=started["session"]["id"])
    expire(old)
    new = make_session("new")
    assert claim(workspace, issue, new).fence == 2
    agents.heartbeat_session(workspace=workspace, session_id=old.pk)
    workflow.transition_issue(workspace=workspace, issue_id=issue.pk, to="todo", by_human=False)
    workflow.transition_issue(
        workspace=workspace, issue_id=issue.pk, to="in_progress", by_human=False
    )
    before = state()

    body = assert_error(
        post(
            api,
            "/work/finish/",
            {"session": old.pk, "issue": issue.pk, "report": REPORT, "fence": 1},
        ),
        409,
        "stale_fence",
    )

    assert body["current_fence"] == 2
    assert state() == before
    assert Issue.objects.get(pk=issue.pk).status == "in_progress"
    assert AgentSession.objects.get(pk=old.pk).status == "active"

    response = post(
        api, "/work/finish/", {"session": new.pk, "issue": issue.pk, "report": REPORT, "fence": 2}
    )
    assert response.status_code == 200, response.content
    assert response.json()["issue"]["status"] == "in_review"
    assert IssueLease.objects.get(fence=2).release_reason == ReleaseReason.RELEASED


@pytest.mark.django_db
def test_finish_work_with_a_wrong_fence_changes_nothing(api, workspace, issue, make_session):
    session = make_session()
    claim(workspace, issue, session)
    before = state()
    for to in ("in_review", "cancelled"):
        assert_error(
            post(
                api,
                "/work/finish/",
                {"session": session.pk, "issue": issue.pk, "to": to, "report": REPORT, "fence": 9},
            ),
            409,
            "stale_fence",
        )
        assert state() == before
    finished = work.finish_work(
        workspace=workspace, session_id=session.pk, issue_id=issue.pk, to="cancelled", fence=1
    )
    assert finished.issue.status == "cancelled"


# --- bad fences are 400 ----------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("fence", BAD_FENCES)
def test_a_bad_fence_is_400_everywhere_and_changes_nothing(
    api, workspace, issue, make_issue, make_session, tree, roomy, fence
):
    session = make_session()
    claim(workspace, issue, session)
    run = dispatch(workspace, session, make_issue(worktree=tree))
    before = state()
    calls = [
        (f"/issues/{issue.pk}/release/", {"session": session.pk}),
        ("/file-claims/", {"issue": issue.pk, "paths": ["a.py"], "session": session.pk}),
        (f"/runs/{run.pk}/finish/", {"outcome": "succeeded"}),
        ("/work/finish/", {"session": session.pk, "issue": issue.pk, "report": REPORT}),
    ]
    for url, body in calls:
        response = assert_error(post(api, url, {**body, "fence": fence}), 400, "invalid")
        assert "fence" in str(response), (url, response)
    assert state() == before


def test_fence_errors_are_conflicts():
    error = StaleFence(fence=1, current_fence=2)
    assert (error.status, error.code) == (409, "stale_fence")
    assert error.as_dict()["current_fence"] == 2


# --- races (PostgreSQL) ----------------------------------------------------------------

ROUNDS = 20


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_lost_holders_release_racing_the_reclaim_has_exactly_one_winner(
    workspace, issue, make_session, roomy
):
    """Each round: the old holder (expired) releases with its fence while a new session
    claims. Either the release lands first (and the claim takes a fresh lease), or the
    reclaim does (and the release is refused ``stale_fence``); never both, never
    neither, never a claim refused as held by the dead."""

    def act(kind, session_id, fence=None):
        if kind == "release":
            return leases.release_issue(
                workspace=workspace, issue_id=issue.pk, session_id=session_id, fence=fence
            )
        return leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session_id)

    outcomes = []
    for round_number in range(ROUNDS):
        old = make_session(f"old-{round_number}")
        lease = claim(workspace, issue, old)
        expire(old)
        new = make_session(f"new-{round_number}")

        released, claimed = run_in_threads(
            act, [("release", old.pk, lease.fence), ("claim", new.pk)]
        )

        assert not isinstance(claimed, Exception), (round_number, claimed)
        assert claimed.created and claimed.lease.fence > lease.fence
        lease.refresh_from_db()
        if isinstance(released, StaleFence):
            outcomes.append("reclaimed")
            assert lease.release_reason == ReleaseReason.EXPIRED
            assert released.extra["current_fence"] == claimed.lease.fence
        else:
            outcomes.append("released")
            assert isinstance(released, IssueLease), (round_number, released)
            assert lease.release_reason == ReleaseReason.RELEASED and released.fence == lease.fence
        unreleased = IssueLease.objects.unreleased().filter(issue=issue)
        assert list(unreleased.values_list("pk", flat=True)) == [claimed.lease.pk]
        leases.release_issue(
            workspace=workspace, issue_id=issue.pk, session_id=new.pk, fence=claimed.lease.fence
        )

    assert lease_fences(issue) == list(range(1, 2 * ROUNDS + 1))
    print("outcomes:", {kind: outcomes.count(kind) for kind in set(outcomes)})


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_lost_runs_finish_racing_a_dispatch_onto_its_worktree_has_exactly_one_winner(
    workspace, make_issue, make_session, tree, roomy
):
    """Each round: the old run's session is expired; it finishes with its lock's fence
    while another session dispatches onto the same worktree. Either the finish lands
    first (and the dispatch takes the free worktree), or the reclaim does (and the
    finish is refused ``stale_fence``, the old run left as it was)."""

    def act(kind, session_id, target, fence=None):
        if kind == "finish":
            # The dispatcher claims a lease before it reaches the worktree: delay the
            # finisher by 0 to 80 ms so that both orders happen.
            time.sleep(random.uniform(0, 0.08))
            return worktrees.finish_run(
                workspace=workspace, run_id=target, outcome="succeeded", fence=fence
            )
        return worktrees.dispatch_run(workspace=workspace, session_id=session_id, issue_id=target)

    outcomes = []
    for round_number in range(ROUNDS):
        old, new = make_session(f"old-{round_number}"), make_session(f"new-{round_number}")
        old_run = dispatch(workspace, old, make_issue(worktree=tree))
        old_fence = lock_of(old_run).fence
        expire(old)

        finished, dispatched = run_in_threads(
            act,
            [
                ("finish", old.pk, old_run.pk, old_fence),
                ("dispatch", new.pk, make_issue(worktree=tree).pk),
            ],
        )

        assert isinstance(dispatched, Run) and dispatched.status == "running", dispatched
        new_lock = lock_of(dispatched)
        assert new_lock.fence > old_fence and new_lock.released_at is None
        old_lock = lock_of(old_run)
        if isinstance(finished, StaleFence):
            outcomes.append("reclaimed")
            assert old_lock.release_reason == ReleaseReason.EXPIRED
            assert Run.objects.get(pk=old_run.pk).status == Run.Status.RUNNING
        else:
            outcomes.append("finished")
            assert isinstance(finished, Run) and finished.status == "succeeded", finished
            assert old_lock.release_reason == ReleaseReason.RELEASED
        assert WorktreeLock.objects.filter(worktree=tree, released_at__isnull=True).count() == 1
        worktrees.finish_run(
            workspace=workspace, run_id=dispatched.pk, outcome="succeeded", fence=new_lock.fence
        )

    assert lock_fences(tree) == list(range(1, 2 * ROUNDS + 1))
    print("outcomes:", {kind: outcomes.count(kind) for kind in set(outcomes)})


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_fenced_file_claim_racing_a_start_work_on_the_same_paths(
    workspace, issue, make_session, roomy
):
    """The old holder (expired) claims paths with its fence, no session, while another
    agent starts work on the (todo) issue with the same paths: it reclaims the lease,
    claims the paths and moves the issue on. Either the fenced claim lands first (and
    start_work, of the same issue, keeps those claims), or the reclaim does (and the
    claim is refused ``stale_fence``); never a deadlock."""
    paths = ["src/a.py", "src/b.py"]

    def act(kind, fence=None, agent=None):
        if kind == "claim":
            time.sleep(random.uniform(0, 0.03))  # start_work registers a session first
            return file_claims.claim_files(
                workspace=workspace, issue_id=issue.pk, paths=paths, fence=fence
            )
        return work.start_work(
            workspace=workspace, agent_name=agent, issue_id=issue.pk, paths=paths
        )

    outcomes = []
    for round_number in range(ROUNDS):
        Issue.objects.filter(pk=issue.pk).update(status=Issue.Status.TODO)
        old = make_session(f"old-{round_number}")
        lease = claim(workspace, issue, old)
        expire(old)

        claimed, started = run_in_threads(
            act, [("claim", lease.fence), ("start", None, f"new-{round_number}")]
        )

        assert isinstance(started, work.Started), (round_number, started)
        assert started.lease.fence > lease.fence
        held = FileClaim.objects.filter(issue=issue, released_at__isnull=True)
        if isinstance(claimed, StaleFence):
            outcomes.append("reclaimed")
            assert {claim.session_id for claim in held} == {started.session.pk}
        else:
            outcomes.append("claimed")
            assert isinstance(claimed, file_claims.ClaimedFiles), (round_number, claimed)
            assert {claim.session_id for claim in held} == {None}  # kept by start_work
        assert held.count() == len(paths)
        assert IssueLease.objects.unreleased().get(issue=issue).pk == started.lease.pk
        # Clear the field for the next round.
        file_claims.release_issue_claims(issue=issue, reason=ReleaseReason.RELEASED)
        agents.end_session(workspace=workspace, session_id=started.session.pk)

    assert lease_fences(issue) == list(range(1, 2 * ROUNDS + 1))
    print("outcomes:", {kind: outcomes.count(kind) for kind in set(outcomes)})


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_fenced_file_claim_meeting_a_close_in_progress_waits_and_is_refused(
    workspace, issue, make_session
):
    """A close holds the issue, then releases its lease; a fenced claim holds the
    lease, then needs the issue. The claim must not wait for the issue while holding
    the lease (a cycle): it backs off, waits for the close alone, and is refused."""
    holder = make_session()
    lease = claim(workspace, issue, holder)
    locked = threading.Event()
    results: list[Any] = [None, None]

    def close():
        try:
            with transaction.atomic():
                Issue.objects.select_for_update(no_key=True).get(pk=issue.pk)
                locked.set()
                time.sleep(0.5)  # the claim arrives while the issue is locked
                workflow.transition_issue(
                    workspace=workspace, issue_id=issue.pk, to="cancelled", by_human=False
                )
        except Exception as error:  # noqa: BLE001 - the test inspects it
            results[0] = error
        finally:
            locked.set()
            connections.close_all()

    def claim_with_fence():
        locked.wait()
        try:
            results[1] = file_claims.claim_files(
                workspace=workspace,
                issue_id=issue.pk,
                paths=["src/a.py"],
                session_id=holder.pk,
                fence=lease.fence,
            )
        except Exception as error:  # noqa: BLE001 - the test inspects it
            results[1] = error
        finally:
            connections.close_all()

    threads = [threading.Thread(target=close), threading.Thread(target=claim_with_fence)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    closed, claimed = results
    assert closed is None, closed
    assert isinstance(claimed, StaleFence), claimed
    assert claimed.extra["current_fence"] is None
    lease.refresh_from_db()
    assert lease.release_reason == ReleaseReason.ISSUE_CLOSED
    assert not FileClaim.objects.exists()
