"""REST API for worktrees: success and error statuses, isolation, bad input."""

import pytest

from coordination.models import Worktree
from tests.api_helpers import V1, assert_error, post

pytestmark = pytest.mark.django_db


# --- worktrees ----------------------------------------------------------------------


def test_create_worktree_is_201(api, workspace):
    response = post(
        api, "/worktrees/", {"slug": "main", "name": "Main", "path": "/srv/m", "branch": "dev"}
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert {k: body[k] for k in ("slug", "name", "path", "branch")} == {
        "slug": "main",
        "name": "Main",
        "path": "/srv/m",
        "branch": "dev",
    }
    assert Worktree.objects.get(workspace=workspace, slug="main").branch == "dev"


def test_create_worktree_with_slug_and_name_only(api, workspace):
    response = post(api, "/worktrees/", {"slug": "docs", "name": "Docs"})
    assert response.status_code == 201, response.content
    assert response.json()["path"] == "" and response.json()["branch"] == ""
    assert Worktree.objects.filter(workspace=workspace, slug="docs").exists()


def test_duplicate_worktree_slug_is_400(api, tree):
    body = assert_error(post(api, "/worktrees/", {"slug": "main", "name": "Again"}), 400, "invalid")
    assert body["field"] == "slug"
    assert Worktree.objects.filter(slug="main").count() == 1


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"slug": "main"},
        {"name": "Main"},
        {"slug": "not a slug", "name": "Main"},
        {"slug": 5, "name": "Main"},
        {"slug": "main", "name": ["Main"]},
        {"slug": "main", "name": "Main", "path": 3},
        {"slug": "main", "name": "Ma\x00in"},
        {"slug": "x" * 65, "name": "Main"},
        {"slug": "main", "name": "Main", "path": "p" * 1025},
    ],
)
def test_bad_worktree_body_is_400(api, workspace, body):
    assert_error(post(api, "/worktrees/", body), 400, "invalid")
    assert not Worktree.objects.exists()


def test_worktree_body_must_be_json(api, workspace):
    response = api.post(f"{V1}/worktrees/", "slug=main&name=Main", content_type="text/plain")
    assert_error(response, 415, "unsupported_media_type")
    assert not Worktree.objects.exists()


def test_list_worktrees_shows_only_this_workspace(api, stranger_api, tree, other_workspace):
    Worktree.objects.create(workspace=other_workspace, slug="theirs", name="Theirs")

    response = api.get(f"{V1}/worktrees/")

    assert response.status_code == 200
    assert [w["slug"] for w in response.json()["results"]] == ["main"]
    assert [w["slug"] for w in stranger_api.get(f"{V1}/worktrees/").json()["results"]] == ["theirs"]
