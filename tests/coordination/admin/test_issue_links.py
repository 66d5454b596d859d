"""The issue's admin page shows its links both ways, read-only (invariant 16 (the work graph))."""

import pytest
from django.urls import reverse

from coordination.models import IssueLink

pytestmark = pytest.mark.django_db


def test_the_issue_page_lists_its_blockers_and_what_it_blocks(admin_client, make_issue, workspace):
    blocker, issue, blocked = (make_issue(title=t) for t in ("The model", "The API", "The page"))
    IssueLink.objects.create(workspace=workspace, source=blocker, type="blocks", target=issue)
    IssueLink.objects.create(workspace=workspace, source=issue, type="blocks", target=blocked)

    page = admin_client.get(reverse("admin:coordination_issue_change", args=[issue.pk]))

    assert page.status_code == 200
    text = page.content.decode().lower()
    assert "links to this issue" in text and "links from this issue" in text
    assert f"#{blocker.pk} the model" in text and f"#{blocked.pk} the page" in text
    # Read-only: saving the issue needs no formset of its links.
    saved = admin_client.post(
        reverse("admin:coordination_issue_change", args=[issue.pk]),
        {
            "workspace": workspace.pk,
            "project": issue.project_id,
            "title": "The API, renamed",
            "description": issue.description,
            "priority": 0,
        },
    )
    assert saved.status_code == 302, saved.content[:500]
    assert IssueLink.objects.count() == 2
