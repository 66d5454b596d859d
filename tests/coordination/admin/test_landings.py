"""The landing queue's entries in the admin (invariant 21 (the default branch is always
green)): listed with their project, issue (linked), agent, state, reason and times,
filtered by project, state and reason; read-only, for superusers too. Entries made by
the landing services."""

import re

import pytest

from coordination.models import Landing, Project
from coordination.services import landings
from tests.conftest import expire
from tests.coordination.admin_helpers import url
from tests.coordination.landing_helpers import queue_work

pytestmark = pytest.mark.django_db


@pytest.fixture
def entries(workspace, project, make_issue, make_session):
    """core: one landed, one rejected check_failed, one queued; ops: one rejected
    stale_fence (its session died before a tester took it)."""
    project.agent_wip_limit = 10
    project.save()
    ops = Project.objects.create(workspace=workspace, key="ops", name="Ops", agent_wip_limit=5)
    tester = make_session("tester")

    def queue(n: int, on: Project = project):
        issue = make_issue(title=f"Landing issue {n}", project=on)
        session = make_session(f"coder-{n}")
        entry = queue_work(issue, session, paths=[f"src/{n}.py"], branch=f"work-{n}")
        return entry, session

    landed, _ = queue(1)
    red, _ = queue(2)
    batch = landings.take_batch(
        workspace=workspace, project_key="core", session_id=tester.pk, max_entries=2
    )
    common = {"workspace": workspace, "session_id": tester.pk, "fence": batch.fence}
    landings.land(landing_id=landed.pk, commit="def456", **common)
    landings.reject(landing_id=red.pk, reason="check_failed", detail="FAILED", **common)
    waiting, _ = queue(3)
    stale, stale_session = queue(4, on=ops)
    expire(stale_session)
    landings.take_batch(workspace=workspace, project_key="ops", session_id=tester.pk)
    return {
        name: Landing.objects.get(pk=entry.pk)
        for name, entry in {
            "landed": landed,
            "red": red,
            "waiting": waiting,
            "stale": stale,
        }.items()
    }


def listed(operator, query: str = "") -> set[int]:
    page = operator.get(url(Landing) + query)
    assert page.status_code == 200
    return {
        int(pk)
        for pk in re.findall(
            r'href="/admin/coordination/landing/(\d+)/change/', page.content.decode()
        )
    }


def test_entries_are_listed_with_their_issue_linked_and_their_outcome(operator, entries):
    page = operator.get(url(Landing)).content.decode()
    assert listed(operator) == {entry.pk for entry in entries.values()}
    red = entries["red"]
    assert f'href="/admin/coordination/issue/{red.issue_id}/change/"' in page
    assert "Landing issue 2" in page and "check_failed" in page and "stale_fence" in page
    assert "coder-1" in page and 'class="landing-state state-landed"' in page


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("?state__exact=rejected", {"red", "stale"}),
        ("?state__exact=queued", {"waiting"}),
        ("?reason__exact=stale_fence", {"stale"}),
        ("?reason__exact=check_failed", {"red"}),
    ],
)
def test_entries_are_filtered_by_state_and_reason(operator, entries, query, names):
    assert listed(operator, query) == {entries[name].pk for name in names}


def test_entries_are_filtered_by_project(operator, entries):
    ops = Project.objects.get(key="ops")
    assert listed(operator, f"?project__id__exact={ops.pk}") == {entries["stale"].pk}


def test_an_entry_cannot_be_added_edited_or_deleted_even_by_a_superuser(operator, entries):
    row = entries["waiting"]
    page = operator.get(url(Landing)).content.decode()
    assert url(Landing, "add") not in page and "delete_selected" not in page
    assert operator.get(url(Landing, "add")).status_code == 403
    assert operator.post(url(Landing, "add"), {}).status_code == 403
    change = operator.get(url(Landing, "change", row.pk))
    assert change.status_code == 200 and b'type="submit" value="Save"' not in change.content
    assert b"work-3" in change.content  # every field shown, read-only
    assert operator.post(url(Landing, "change", row.pk), {"state": "landed"}).status_code == 403
    assert operator.post(url(Landing, "delete", row.pk), {"post": "yes"}).status_code == 403
    assert Landing.objects.get(pk=row.pk).state == "queued"
