"""The admin's list filters: session state and holder state from the TTL, runs by
error and liveness."""

import pytest
from django.urls import reverse
from django.utils import timezone

from coordination.models import AgentSession, FileClaim, Run
from coordination.services import file_claims
from tests.conftest import expire
from tests.coordination.admin_helpers import url

pytestmark = pytest.mark.django_db


def test_runs_can_be_filtered_by_error_in_the_admin(operator, three_runs):
    url = reverse("admin:coordination_run_changelist")

    page = operator.get(f"{url}?error=worktree_busy")

    assert page.status_code == 200
    html = page.content.decode()
    change = reverse("admin:coordination_run_change", args=[three_runs["cancelled"]])
    assert change in html
    for other in ("running", "skipped"):
        assert reverse("admin:coordination_run_change", args=[three_runs[other]]) not in html


def test_runs_can_be_filtered_by_liveness_in_the_admin(operator, three_runs):
    url = reverse("admin:coordination_run_changelist")
    running = Run.objects.get(pk=three_runs["running"])
    change = reverse("admin:coordination_run_change", args=[running.pk])
    assert change in operator.get(f"{url}?live=yes").content.decode()
    expire(running.session)
    assert change not in operator.get(f"{url}?live=yes").content.decode()
    assert change in operator.get(f"{url}?live=no").content.decode()


def test_session_state_filter_uses_the_ttl(operator, workspace, make_session):
    from coordination.services import agents

    make_session("live-one")
    expire(make_session("stale-one"))
    agents.end_session(workspace=workspace, session_id=make_session("ended-one").pk)

    def listed(state):
        page = operator.get(url(AgentSession) + f"?state={state}").content.decode()
        return {name for name in ("live-one", "stale-one", "ended-one") if name in page}

    assert listed("live") == {"live-one"}
    assert listed("stale") == {"stale-one"}
    assert listed("ended") == {"ended-one"}


def test_holder_filter_tells_live_from_stale_from_released(
    operator, workspace, make_issue, make_session
):
    live, dead = make_session("live-one"), make_session("dead-one")
    file_claims.claim_files(
        workspace=workspace, issue_id=make_issue().pk, paths=["live.py"], session_id=live.pk
    )
    file_claims.claim_files(
        workspace=workspace, issue_id=make_issue().pk, paths=["dead.py"], session_id=dead.pk
    )
    expire(dead)
    FileClaim.objects.create(
        workspace=workspace,
        issue=make_issue(),
        path="gone.py",
        released_at=timezone.now(),
        release_reason="released",
    )

    def listed(holder):
        page = operator.get(url(FileClaim) + f"?holder={holder}").content.decode()
        return {path for path in ("live.py", "dead.py", "gone.py") if path in page}

    assert listed("live") == {"live.py"}
    assert listed("stale") == {"dead.py"}
    assert listed("released") == {"gone.py"}
