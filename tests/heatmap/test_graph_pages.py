"""The board marks blocked cards and cards whose expected files are held; the issue
page shows its blockers, what it blocks, its parent and its children's progress
(invariant 16 (the work graph))."""

import pytest

from coordination.models import Issue, IssueLink
from coordination.services import file_claims, graph

pytestmark = pytest.mark.django_db
S = Issue.Status


@pytest.fixture
def member(client, alice):
    from tests.conftest import password_of

    client.login(username=alice.username, password=password_of(alice.username))
    return client


def test_the_board_marks_blocked_cards_and_held_expected_files(
    member, workspace, make_issue, make_session
):
    blocker = make_issue(title="The model", status=S.TODO)
    blocked = make_issue(title="The API", status=S.TODO)
    IssueLink.objects.create(workspace=workspace, source=blocker, type="blocks", target=blocked)
    graph.set_expected_paths(issue=blocker, paths=["src/models/"])
    holder = make_issue(title="Elsewhere", status=S.IN_PROGRESS)
    atlas = make_session("atlas")
    file_claims.claim_files(
        workspace=workspace, issue_id=holder.pk, paths=["src/models/user.py"], session_id=atlas.pk
    )

    page = member.get(f"/workspaces/{workspace.slug}/issues/")

    assert page.status_code == 200
    text = page.content.decode()
    blocker_url = f"/workspaces/{workspace.slug}/issues/{blocker.pk}/"
    assert f'<span class="tag bad">blocked</span> by <a href="{blocker_url}"' in text
    assert "expected files held" in text and "<code>src/<wbr>models/<wbr></code>" in text
    assert "atlas" in text


def test_the_issue_page_shows_its_place_in_the_graph(member, workspace, make_issue):
    epic = make_issue(title="The epic")
    issue = make_issue(title="The API", status=S.TODO)
    done_child = make_issue(title="Done child", status=S.DONE)
    blocker = make_issue(title="The model")
    page_issue = make_issue(title="The page")
    for source, type, target in (
        (epic, "parent_of", issue),
        (issue, "parent_of", done_child),
        (blocker, "blocks", issue),
        (issue, "blocks", page_issue),
    ):
        IssueLink.objects.create(workspace=workspace, source=source, type=type, target=target)
    graph.set_expected_paths(issue=issue, paths=["src/api/"])

    page = member.get(f"/workspaces/{workspace.slug}/issues/{issue.pk}/")

    assert page.status_code == 200
    text = page.content.decode()
    assert f"#{epic.pk} The epic" in text  # its parent
    assert "Blocked: it cannot be started" in text and f"#{blocker.pk} The model" in text
    assert f"#{page_issue.pk} The page" in text  # what it blocks
    assert "1 of 1 done" in text and f"#{done_child.pk} Done child" in text
    assert "<code>src/api/</code>" in text


def test_the_timeline_tells_the_links_and_the_unblocking(member, workspace, make_issue):
    blocker = make_issue(title="The model", status=S.TODO)
    issue = make_issue(title="The API", status=S.TODO)
    linked = graph.link_issues(
        workspace=workspace, source_id=blocker.pk, type="blocks", target_id=issue.pk
    )
    graph.unlink_issues(workspace=workspace, issue_id=issue.pk, link_id=linked.link.pk)

    source_page = member.get(f"/workspaces/{workspace.slug}/issues/{blocker.pk}/")
    target_page = member.get(f"/workspaces/{workspace.slug}/issues/{issue.pk}/")

    source, target = source_page.content.decode(), target_page.content.decode()
    blocker_link = f'<a href="/workspaces/{workspace.slug}/issues/{blocker.pk}/">#{blocker.pk}</a>'
    issue_link = f'<a href="/workspaces/{workspace.slug}/issues/{issue.pk}/">#{issue.pk}</a>'
    assert f"Linked: {blocker_link} blocks {issue_link}</span>" in source
    assert f"Link removed: {blocker_link} blocks {issue_link}</span>" in source
    assert "Unblocked: its last blocking link was removed" in target
    assert "issue.linked by" not in source
