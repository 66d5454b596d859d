"""An agent that stops heartbeating: what it holds (a lease, file claims, a worktree
lock) is refused to others until the TTL has passed, and reclaimable right after."""

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db.models import DateTimeField, ExpressionWrapper, Value

from coordination.liveness import DbNow
from coordination.models import (
    AgentSession,
    ClaimConflict,
    FileClaim,
    IssueLease,
    ReleaseReason,
    Run,
    Worktree,
    WorktreeLock,
)
from tests.api_helpers import V1, assert_error, post


def heartbeat_seconds_ago(session: AgentSession, seconds: float) -> None:
    """Move the session's last heartbeat back by the database's clock (invariant 1 (liveness))."""
    AgentSession.objects.filter(pk=session.pk).update(
        last_heartbeat_at=ExpressionWrapper(
            DbNow() - Value(timedelta(seconds=seconds)), output_field=DateTimeField()
        )
    )


@pytest.mark.django_db
def test_a_silent_agents_lease_claims_and_lock_are_reclaimable_exactly_after_the_ttl(
    api, workspace, project, make_issue, make_session
):
    ttl = settings.PROJEKTOR_SESSION_TTL_SECONDS
    project.agent_wip_limit = 10
    project.save()
    tree = Worktree.objects.create(workspace=workspace, slug="main", name="Main")
    leased, files, run_issue = make_issue(), make_issue(), make_issue(worktree=tree)
    mine, my_run_issue = make_issue(), make_issue(worktree=tree)
    paths = ["src/app.py", "src/models.py"]
    silent, other = make_session("silent"), make_session("other")

    assert post(api, f"/issues/{leased.pk}/claim/", {"session": silent.pk}).status_code == 201
    body = {"issue": files.pk, "paths": paths, "session": silent.pk}
    assert post(api, "/file-claims/", body).status_code == 201
    silent_run = post(api, "/runs/", {"session": silent.pk, "issue": run_issue.pk})
    assert silent_run.status_code == 201 and silent_run.json()["lock_mode"] == "exclusive"

    def claim_lease() -> Any:
        return post(api, f"/issues/{leased.pk}/claim/", {"session": other.pk})

    def claim_paths() -> Any:
        return post(api, "/file-claims/", {"issue": mine.pk, "paths": paths, "session": other.pk})

    def dispatch() -> Any:
        return post(api, "/runs/", {"session": other.pk, "issue": my_run_issue.pk})

    # Silent for TTL - 2 s: still live, everything it holds is refused to others. Set
    # before each request: on a busy machine the four together may take 2 s.
    heartbeat_seconds_ago(silent, ttl - 2)
    assert api.get(f"{V1}/sessions/{silent.pk}/").json()["live"] is True
    heartbeat_seconds_ago(silent, ttl - 2)
    held = assert_error(claim_lease(), 409, "lease_held")
    assert held["holder"]["session"] == silent.pk
    heartbeat_seconds_ago(silent, ttl - 2)
    conflict = assert_error(claim_paths(), 409, "file_conflict")
    assert {c["session"] for c in conflict["conflicts"]} == {silent.pk}
    heartbeat_seconds_ago(silent, ttl - 2)
    busy = assert_error(dispatch(), 409, "worktree_busy")
    assert busy["holder"]["session"] == silent.pk
    assert IssueLease.objects.unreleased().filter(session=silent).count() == 2
    assert FileClaim.objects.filter(session=silent, released_at__isnull=True).count() == 2
    assert WorktreeLock.objects.filter(session=silent, released_at__isnull=True).count() == 1
    assert ClaimConflict.objects.count() == len(paths)

    # Silent for TTL + 2 s: dead; the next claimer reclaims each as expired.
    heartbeat_seconds_ago(silent, ttl + 2)
    assert api.get(f"{V1}/sessions/{silent.pk}/").json()["live"] is False
    assert claim_lease().status_code == 201
    claimed = claim_paths()
    assert claimed.status_code == 201, claimed.content
    assert sorted(claimed.json()["reclaimed"]) == sorted(paths)
    ran = dispatch()
    assert ran.status_code == 201, ran.content
    assert ran.json()["worktree"] == "main" and ran.json()["status"] == "running"

    expired = ReleaseReason.EXPIRED
    assert IssueLease.objects.get(issue=leased, session=silent).release_reason == expired
    assert set(
        FileClaim.objects.filter(session=silent).values_list("release_reason", flat=True)
    ) == {expired}
    assert WorktreeLock.objects.get(session=silent).release_reason == expired
    assert ClaimConflict.objects.count() == len(paths), "a reclaim logs no conflict"
    assert Run.objects.get(pk=silent_run.json()["id"]).status == "running"  # a crash is no exit
    assert Run.objects.filter(session=other, error="worktree_busy").count() == 1
