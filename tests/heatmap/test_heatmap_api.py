"""GET /api/v1/heatmap/ [get_code_heatmap]: shape, defaults, validation, isolation."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from coordination.models import FileClaim
from tests.api_helpers import V1, assert_error
from tests.heatmap.conftest import T0

pytestmark = pytest.mark.django_db
WINDOW = {"since": "2026-11-01T12:00:00Z", "until": "2026-11-02T12:00:00Z"}


def test_answers_the_aggregation_in_the_api_shape(api, tree):
    response = api.get(f"{V1}/heatmap/", {**WINDOW, "prefix": "./src/", "depth": 1})
    assert response.status_code == 200
    assert response.json() == {
        "mode": "claims",
        "since": "2026-11-01T12:00:00Z",
        "until": "2026-11-02T12:00:00Z",
        "prefix": "src",
        "depth": 1,
        "total": 4,
        "nodes": [
            {"path": "src/api", "count": 3, "depth": 1},
            {"path": "src/web", "count": 1, "depth": 1},
        ],
    }


def test_contention_mode_and_project_filter(api, project, make_issue, add_conflict):
    a, b = make_issue(), make_issue()
    add_conflict(a, b, "src/x.py", T0)
    body = api.get(
        f"{V1}/heatmap/", {**WINDOW, "mode": "contention", "project": project.key}
    ).json()
    assert body["mode"] == "contention" and body["total"] == 1
    assert body["nodes"][0] == {"path": "src", "count": 1, "depth": 1}


def test_defaults_to_the_last_seven_days_at_depth_two(api, issue):
    FileClaim.objects.create(workspace=issue.workspace, issue=issue, path="a/b/c.py")
    old = FileClaim.objects.create(
        workspace=issue.workspace, issue=issue, path="old.py", released_at=timezone.now()
    )
    FileClaim.objects.filter(pk=old.pk).update(claimed_at=timezone.now() - timedelta(days=8))
    body = api.get(f"{V1}/heatmap/").json()
    assert body["mode"] == "claims" and body["depth"] == 2 and body["prefix"] == ""
    assert body["total"] == 1
    assert [node["path"] for node in body["nodes"]] == ["a", "a/b"]


@pytest.mark.parametrize(
    "query",
    [
        {"mode": "heat"},
        {"depth": "0"},
        {"depth": "9"},
        {"depth": "two"},
        {"since": "yesterday"},
        {"until": "2026-13-01"},
        {"since": "2026-11-02T00:00:00Z", "until": "2026-11-01T00:00:00Z"},
        {"since": "2026-11-01T00:00:00Z", "until": "2026-11-01T00:00:00Z"},
        {"project": "nope"},
        {"prefix": "/etc"},
        {"prefix": "src/../.."},
        {"prefix": "a\\b"},
        {"prefix": "a\x00b"},
        {"project": "a\x00b"},
    ],
)
def test_bad_parameters_are_a_400(api, project, query):
    assert_error(api.get(f"{V1}/heatmap/", query), 400, "invalid")


def test_needs_a_key(client):
    assert_error(client.get(f"{V1}/heatmap/"), 401, "unauthenticated")


def test_another_workspace_sees_only_its_own(stranger_api, tree):
    body = stranger_api.get(f"{V1}/heatmap/", WINDOW).json()
    assert body["total"] == 0 and body["nodes"] == []


def test_a_logged_in_member_names_the_workspace(workspace, tree, django_user_model):
    member = django_user_model.objects.create_user("bob", password="pw")
    workspace.members.add(member)
    client = APIClient()
    client.force_login(member)
    response = client.get(f"{V1}/heatmap/", {**WINDOW, "workspace": workspace.slug})
    assert response.status_code == 200 and response.json()["total"] == 7
