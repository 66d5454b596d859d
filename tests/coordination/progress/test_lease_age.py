"""The age of a lease (invariant 17 (stalled is derived)): past its project's
``max_lease_age_seconds`` a lease is not live for any purpose, and the next claimer releases it
``max_age``."""

from datetime import timedelta

import pytest
from django.utils import timezone

from coordination.errors import LeaseHeld, WipLimitReached
from coordination.models import Event, FileClaim, IssueLease, Project
from coordination.services import leases
from tests.api_helpers import V1, assert_error, post
from tests.conftest import expire
from tests.coordination.conftest import claim_lease, dispatch_run, lease_fences, lock_of

pytestmark = pytest.mark.django_db

CAP = 600
REPORT = {"summary": "Fixed it.", "verification": "Ran the tests."}


@pytest.fixture
def capped(project: Project) -> Project:
    Project.objects.filter(pk=project.pk).update(max_lease_age_seconds=CAP)
    project.refresh_from_db()
    return project


def age_out(lease: IssueLease) -> None:
    """Move the lease's age-out time into the past: it is past its project's cap."""
    IssueLease.objects.filter(pk=lease.pk).update(ages_out_at=timezone.now() - timedelta(seconds=1))


def test_a_capped_projects_lease_ages_out_at_its_grant_plus_the_cap(
    workspace, capped, issue, make_session
):
    lease = claim_lease(workspace, issue, make_session())
    lease.refresh_from_db()
    assert lease.ages_out_at - lease.acquired_at == timedelta(seconds=CAP)


def test_without_a_cap_a_lease_never_ages_out(workspace, issue, make_session):
    lease = claim_lease(workspace, issue, make_session())
    lease.refresh_from_db()
    assert lease.ages_out_at is None


def test_an_aged_out_lease_shows_not_live_and_aged_out(api, workspace, capped, issue, make_session):
    lease = claim_lease(workspace, issue, make_session())
    shown = api.get(f"{V1}/leases/{lease.pk}/").json()
    assert shown["live"] is True and shown["aged_out"] is False
    age_out(lease)
    shown = api.get(f"{V1}/leases/{lease.pk}/").json()
    assert shown["live"] is False and shown["aged_out"] is True


def test_the_next_claimer_releases_an_aged_out_lease_max_age(
    workspace, capped, issue, make_session
):
    holder, claimer = make_session("holder"), make_session("claimer")
    old = claim_lease(workspace, issue, holder)
    with pytest.raises(LeaseHeld):
        claim_lease(workspace, issue, claimer)
    age_out(old)
    new = claim_lease(workspace, issue, claimer)
    old.refresh_from_db()
    assert old.release_reason == "max_age" and new.fence == 2
    released = Event.objects.get(type="lease.released", data__lease=old.pk)
    assert released.data["reason"] == "max_age"
    assert released.data["by"] == {"session": claimer.pk, "agent": "claimer"}


def test_aged_out_and_dead_is_released_expired(workspace, capped, issue, make_session):
    holder = make_session("holder")
    old = claim_lease(workspace, issue, holder)
    age_out(old)
    expire(holder)
    claim_lease(workspace, issue, make_session("claimer"))
    old.refresh_from_db()
    assert old.release_reason == "expired"


def test_the_holder_may_claim_again_with_a_new_fence(workspace, capped, issue, make_session):
    holder = make_session("holder")
    old = claim_lease(workspace, issue, holder)
    age_out(old)
    new = claim_lease(workspace, issue, holder)
    old.refresh_from_db()
    assert old.release_reason == "max_age" and new.pk != old.pk
    assert lease_fences(issue) == [1, 2]


def test_an_aged_out_lease_does_not_count_against_the_wip_cap(
    workspace, capped, make_issue, make_session
):
    Project.objects.filter(pk=capped.pk).update(agent_wip_limit=1)
    first, second = make_issue(), make_issue()
    lease = claim_lease(workspace, first, make_session("a"))
    with pytest.raises(WipLimitReached):
        claim_lease(workspace, second, make_session("b"))
    age_out(lease)
    assert claim_lease(workspace, second, make_session("b")).fence == 1


def test_an_aged_out_holders_fenced_call_is_stale(api, workspace, capped, issue, make_session):
    session = make_session()
    lease = claim_lease(workspace, issue, session)
    age_out(lease)
    body = assert_error(
        post(
            api,
            "/work/finish/",
            {"session": session.pk, "issue": issue.pk, "report": REPORT, "fence": lease.fence},
        ),
        409,
        "stale_fence",
    )
    assert body["fence"] == 1
    assert IssueLease.objects.get(pk=lease.pk).released_at is None  # nothing changed


def released_events(lease: IssueLease) -> int:
    return Event.objects.filter(type="lease.released", data__lease=lease.pk).count()


def test_an_aged_out_holder_cannot_release_with_its_fence(
    api, workspace, capped, issue, make_session
):
    session = make_session()
    lease = claim_lease(workspace, issue, session)
    age_out(lease)
    body = assert_error(
        post(api, f"/issues/{issue.pk}/release/", {"session": session.pk, "fence": lease.fence}),
        409,
        "stale_fence",
    )
    assert body["fence"] == 1 and body["current_fence"] is None
    assert "aged out" in body["detail"]
    assert IssueLease.objects.get(pk=lease.pk).released_at is None  # nothing changed
    assert released_events(lease) == 0


def test_an_aged_out_holder_releases_without_a_fence_as_before(
    api, workspace, capped, issue, make_session
):
    session = make_session()
    lease = claim_lease(workspace, issue, session)
    age_out(lease)
    response = post(api, f"/issues/{issue.pk}/release/", {"session": session.pk})
    assert response.status_code == 200, response.content
    assert response.json()["release_reason"] == "released"


def test_a_young_lease_is_released_with_its_fence(api, workspace, capped, issue, make_session):
    session = make_session()
    lease = claim_lease(workspace, issue, session)
    response = post(
        api, f"/issues/{issue.pk}/release/", {"session": session.pk, "fence": lease.fence}
    )
    assert response.status_code == 200, response.content
    assert response.json()["release_reason"] == "released"


def test_the_old_fence_is_stale_once_the_holder_claimed_again(
    api, workspace, capped, issue, make_session
):
    session = make_session()
    old = claim_lease(workspace, issue, session)
    age_out(old)
    new = claim_lease(workspace, issue, session)
    body = assert_error(
        post(api, f"/issues/{issue.pk}/release/", {"session": session.pk, "fence": old.fence}),
        409,
        "stale_fence",
    )
    assert body["current_fence"] == new.fence == 2
    assert IssueLease.objects.get(pk=new.pk).released_at is None
    response = post(api, f"/issues/{issue.pk}/release/", {"session": session.pk, "fence": 2})
    assert response.status_code == 200, response.content


def test_an_aged_out_holder_cannot_claim_files_with_its_fence(
    api, workspace, capped, issue, make_session
):
    session = make_session()
    lease = claim_lease(workspace, issue, session)
    age_out(lease)
    body = {"issue": issue.pk, "paths": ["src/a.py"], "session": session.pk, "fence": lease.fence}
    assert_error(post(api, "/file-claims/", body), 409, "stale_fence")
    assert not FileClaim.objects.filter(issue=issue).exists()
    assert not Event.objects.filter(type="claims.granted").exists()


def test_a_runs_lock_fence_is_not_its_leases(
    api, workspace, capped, make_issue, make_session, tree
):
    """A run's finish is fenced by its worktree lock, which has no age cap: a holder
    whose lease aged out still reports its run and frees the worktree."""
    session = make_session()
    run = dispatch_run(workspace, session, make_issue(worktree=tree))
    age_out(IssueLease.objects.get(session=session))
    response = post(api, f"/runs/{run.pk}/finish/", {"outcome": "succeeded", "fence": 1})
    assert response.status_code == 200, response.content
    assert lock_of(run).release_reason == "released"


def test_a_new_cap_ages_the_leases_held_already(api, workspace, project, issue, make_session):
    lease = claim_lease(workspace, issue, make_session())
    response = api.patch(
        f"{V1}/projects/{project.pk}/", {"max_lease_age_seconds": 60}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["max_lease_age_seconds"] == 60
    lease.refresh_from_db()
    assert lease.ages_out_at - lease.acquired_at == timedelta(seconds=60)
    api.patch(f"{V1}/projects/{project.pk}/", {"max_lease_age_seconds": None}, format="json")
    lease.refresh_from_db()
    assert lease.ages_out_at is None


def test_a_project_is_created_with_a_cap(api):
    body = {"key": "ops", "name": "Ops", "max_lease_age_seconds": 3600}
    response = post(api, "/projects/", body)
    assert response.status_code == 201 and response.json()["max_lease_age_seconds"] == 3600
    shown = post(api, "/projects/", {"key": "web", "name": "Web"}).json()
    assert shown["max_lease_age_seconds"] is None


@pytest.mark.parametrize("cap", [0, -5, "soon", 1.5, True, [60]])
def test_a_bad_cap_is_400_and_changes_nothing(api, project, cap):
    before = Project.objects.values().get(pk=project.pk)
    response = api.patch(
        f"{V1}/projects/{project.pk}/", {"max_lease_age_seconds": cap}, format="json"
    )
    assert_error(response, 400, "invalid")
    assert_error(
        post(api, "/projects/", {"key": "new", "name": "New", "max_lease_age_seconds": cap}),
        400,
        "invalid",
    )
    assert Project.objects.values().get(pk=project.pk) == before
    assert not Project.objects.filter(key="new").exists()


def test_the_database_refuses_a_cap_below_one(project):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Project.objects.filter(pk=project.pk).update(max_lease_age_seconds=0)


def test_release_reason_max_age_is_listed(api, workspace, capped, issue, make_session):
    old = claim_lease(workspace, issue, make_session("holder"))
    age_out(old)
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=make_session("b").pk)
    listed = api.get(f"{V1}/leases/?release_reason=max_age").json()
    assert [row["id"] for row in listed["results"]] == [old.pk]


def test_an_aged_out_leases_issue_is_ready_again(api, workspace, capped, make_issue, make_session):
    issue = make_issue(status="todo")
    lease = claim_lease(workspace, issue, make_session())
    assert api.get(f"{V1}/issues/ready/").json()["results"] == []
    age_out(lease)
    [shown] = api.get(f"{V1}/issues/ready/").json()["results"]
    assert shown["id"] == issue.pk
