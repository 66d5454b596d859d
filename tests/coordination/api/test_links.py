"""The work graph over REST: links [link_issues, unlink_issues], the issue shape's graph
fields, blocked issues, issue.unblocked and bad input (invariant 16 (the work graph))."""

import pytest

from coordination.models import Event, EventType, ExpectedPath, Issue, IssueLink
from coordination.services import leases, workflow
from tests.api_helpers import V1, assert_error, post

pytestmark = pytest.mark.django_db
S = Issue.Status


def link(api, source, type, target):
    return post(api, f"/issues/{source.pk}/links/", {"type": type, "target": target.pk})


def shown(api, issue):
    response = api.get(f"{V1}/issues/{issue.pk}/")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def chain(make_issue):
    """model blocks api blocks page, all ready."""
    return [make_issue(title=title, status=S.TODO) for title in ("model", "api", "page")]


def test_a_link_is_created_once_and_shown_from_both_ends(api, chain):
    model, api_issue, _ = chain
    created = link(api, model, "blocks", api_issue)
    assert created.status_code == 201, created.content
    body = created.json()
    assert {k: body[k] for k in ("type", "source", "target")} == {
        "type": "blocks",
        "source": model.pk,
        "target": api_issue.pk,
    }
    again = link(api, model, "blocks", api_issue)
    assert again.status_code == 200 and again.json() == body
    assert IssueLink.objects.count() == 1

    blocked = shown(api, api_issue)
    assert blocked["blocked_by"] == [{"id": model.pk, "title": "model", "status": "todo"}]
    assert blocked["links"] == [body]
    blocker = shown(api, model)
    assert blocker["blocks"] == [api_issue.pk] and blocker["blocked_by"] == []
    assert blocker["links"] == [body]
    events = Event.objects.filter(type=EventType.ISSUE_LINKED)
    assert [e.data for e in events] == [
        {"type": "blocks", "source": model.pk, "target": api_issue.pk}
    ]


def test_parent_and_childrens_progress(api, make_issue):
    epic = make_issue(title="epic")
    children = [make_issue(title=f"child {n}") for n in range(3)]
    for child in children:
        assert link(api, epic, "parent_of", child).status_code == 201
    Issue.objects.filter(pk=children[0].pk).update(status=S.DONE)
    Issue.objects.filter(pk=children[1].pk).update(status=S.CANCELLED)
    assert shown(api, epic)["children"] == {"total": 3, "done": 2}
    assert shown(api, children[2])["parent"] == epic.pk
    # A child has one parent: a second one is refused, naming the first.
    other = make_issue(title="other epic")
    body = assert_error(link(api, other, "parent_of", children[2]), 400, "invalid")
    assert body["parent"] == epic.pk
    # relates_to and discovered_from only relate.
    assert link(api, other, "relates_to", epic).status_code == 201
    assert link(api, children[2], "discovered_from", other).status_code == 201
    assert shown(api, epic)["blocked_by"] == []


def test_unlink_from_either_end_and_only_its_own(api, chain):
    model, api_issue, page = chain
    made = link(api, model, "blocks", api_issue).json()
    assert api.delete(f"{V1}/issues/{page.pk}/links/{made['id']}/").status_code == 404
    assert api.delete(f"{V1}/issues/{api_issue.pk}/links/{made['id']}/").status_code == 204
    assert api.delete(f"{V1}/issues/{api_issue.pk}/links/{made['id']}/").status_code == 404
    assert shown(api, api_issue)["blocked_by"] == []
    unlinked = Event.objects.get(type=EventType.ISSUE_UNLINKED)
    assert unlinked.data == {"type": "blocks", "source": model.pk, "target": api_issue.pk}
    # The removed link was the last unresolved blocker: unblocked, by no close.
    unblocked = Event.objects.get(type=EventType.ISSUE_UNBLOCKED)
    assert unblocked.issue_id == api_issue.pk and unblocked.data == {"resolved_by": None}


@pytest.mark.parametrize("length", [2, 3, 30])
def test_a_cycle_is_refused_naming_it_and_nothing_changes(api, make_issue, length):
    issues = [make_issue(title=f"i{n}") for n in range(length)]
    for first, second in zip(issues, issues[1:], strict=False):
        assert link(api, first, "blocks", second).status_code == 201
    before = (IssueLink.objects.count(), Event.objects.count())
    body = assert_error(link(api, issues[-1], "blocks", issues[0]), 409, "dependency_cycle")
    assert body["cycle"] == [issues[-1].pk, *[i.pk for i in issues[:-1]]]
    assert (IssueLink.objects.count(), Event.objects.count()) == before
    # Another type's graph is its own: the reverse relation is no cycle of blocks.
    assert link(api, issues[-1], "relates_to", issues[0]).status_code == 201


def test_a_parent_cycle_is_refused(api, make_issue):
    a, b, c = (make_issue(title=t) for t in "abc")
    assert link(api, a, "parent_of", b).status_code == 201
    assert link(api, b, "parent_of", c).status_code == 201
    assert_error(link(api, c, "parent_of", a), 409, "dependency_cycle")


def test_bad_links_are_refused_and_change_nothing(api, stranger_api, make_issue, other_workspace):
    a, b = make_issue(title="a"), make_issue(title="b")
    assert_error(link(api, a, "blocks", a), 400, "invalid")
    assert_error(
        post(api, f"/issues/{a.pk}/links/", {"type": "fixes", "target": b.pk}), 400, "invalid"
    )
    assert_error(post(api, f"/issues/{a.pk}/links/", {"type": "blocks"}), 400, "invalid")
    assert_error(
        post(api, f"/issues/{a.pk}/links/", {"type": "blocks", "target": 999999}), 404, "not_found"
    )
    assert_error(
        post(api, "/issues/999999/links/", {"type": "blocks", "target": a.pk}), 404, "not_found"
    )
    # Another workspace's issue is unknown, from either side.
    assert_error(link(stranger_api, a, "blocks", b), 404, "not_found")
    assert api.delete(f"{V1}/issues/{a.pk}/links/99999999999999999999/").status_code == 404
    assert IssueLink.objects.count() == 0
    assert not Event.objects.filter(type=EventType.ISSUE_LINKED).exists()


def test_a_read_key_may_not_link(workspace, chain):
    from coordination.models import ApiKey
    from tests.conftest import make_client

    _, raw = ApiKey.issue(workspace, "reader", kind=ApiKey.Kind.READ)
    assert_error(link(make_client(raw), chain[0], "blocks", chain[1]), 403, "forbidden")


# --- blocked means blocked -------------------------------------------------------------


def test_a_blocked_issue_cannot_start_nor_move_to_in_progress(api, chain, make_session):
    model, api_issue, _ = chain
    link(api, model, "blocks", api_issue)
    body = assert_error(
        post(api, "/work/start/", {"agent": "coder", "issue": api_issue.pk}), 409, "blocked"
    )
    assert body["blocked_by"] == [{"id": model.pk, "title": "model", "status": "todo"}]
    assert_error(
        post(api, f"/issues/{api_issue.pk}/transition/", {"to": "in_progress"}), 409, "blocked"
    )
    api_issue.refresh_from_db()
    assert api_issue.status == S.TODO and not api_issue.leases.exists()
    # A lease alone may still be taken: the tiers stay independent.
    session = make_session()
    leases.claim_issue(workspace=api_issue.workspace, issue_id=api_issue.pk, session_id=session.pk)
    # A backlog issue is refused by start_work too.
    Issue.objects.filter(pk=api_issue.pk).update(status=S.BACKLOG)
    assert_error(
        post(api, "/work/start/", {"agent": "other", "issue": api_issue.pk}), 409, "blocked"
    )


def test_closing_the_last_blocker_unblocks_in_its_transaction(api, make_issue, workspace):
    first, second, blocked = (
        make_issue(title=t, status=S.TODO) for t in ("first", "second", "blocked")
    )
    link(api, first, "blocks", blocked)
    link(api, second, "blocks", blocked)
    workflow.transition_issue(workspace=workspace, issue_id=first.pk, to=S.CANCELLED, by_human=True)
    assert not Event.objects.filter(type=EventType.ISSUE_UNBLOCKED).exists()
    assert [b["id"] for b in shown(api, blocked)["blocked_by"]] == [second.pk]
    workflow.transition_issue(
        workspace=workspace, issue_id=second.pk, to=S.CANCELLED, by_human=True
    )
    unblocked = Event.objects.get(type=EventType.ISSUE_UNBLOCKED)
    assert unblocked.issue_id == blocked.pk and unblocked.data == {"resolved_by": second.pk}
    # The close's own transition event comes first, in the same transaction.
    closed = Event.objects.filter(type=EventType.ISSUE_TRANSITIONED).latest("id")
    assert closed.issue_id == second.pk and closed.id < unblocked.id
    assert shown(api, blocked)["blocked_by"] == []
    assert post(api, f"/issues/{blocked.pk}/transition/", {"to": "in_progress"}).status_code == 200


# --- expected paths ----------------------------------------------------------------------


def test_paths_are_normalised_like_claims_and_set_on_create_and_patch(api, project):
    body = {
        "project": "core",
        "title": "Paths",
        "paths": ["./src//api/", "src/api/", "docs/a.md", "src/models.py"],
    }
    created = post(api, "/issues/", body)
    assert created.status_code == 201, created.content
    assert created.json()["paths"] == ["docs/a.md", "src/api/", "src/models.py"]
    issue_id = created.json()["id"]
    patched = api.patch(f"{V1}/issues/{issue_id}/", {"paths": ["lib/"]}, format="json")
    assert patched.status_code == 200 and patched.json()["paths"] == ["lib/"]
    assert api.patch(f"{V1}/issues/{issue_id}/", {"paths": []}, format="json").json()["paths"] == []


@pytest.mark.parametrize(
    "paths",
    [
        [f"f{n}.py" for n in range(101)],
        ["src/*.py"],
        ["../outside.py"],
        ["/abs.py"],
        "src/a.py",
    ],
)
def test_bad_paths_are_400_and_nothing_changes(api, project, make_issue, paths):
    issue = make_issue(title="kept")
    before = Issue.objects.count()
    assert_error(
        post(api, "/issues/", {"project": "core", "title": "x", "paths": paths}), 400, "invalid"
    )
    assert Issue.objects.count() == before
    response = api.patch(
        f"{V1}/issues/{issue.pk}/", {"paths": paths, "title": "changed"}, format="json"
    )
    assert_error(response, 400, "invalid")
    issue.refresh_from_db()
    assert issue.title == "kept" and not ExpectedPath.objects.exists()


def test_start_work_without_paths_claims_the_expected_ones(api, project):
    created = post(
        api,
        "/issues/",
        {
            "project": "core",
            "title": "t",
            "description": "d",
            "status": "todo",
            "paths": ["src/a.py", "lib/"],
        },
    ).json()
    started = post(api, "/work/start/", {"agent": "coder", "issue": created["id"]})
    assert started.status_code == 201, started.content
    assert sorted(c["path"] for c in started.json()["claims"]) == ["lib/", "src/a.py"]
