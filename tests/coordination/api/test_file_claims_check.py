"""``POST /file-claims/check/``: the read-only check the pre-commit guard calls."""

import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from coordination.models import ClaimConflict, FileClaim, Message, Project
from coordination.services import file_claims
from tests.api_helpers import V1, assert_error, post
from tests.conftest import expire
from tests.coordination.conftest import INVALID_PATHS, claim_paths


def check(client: Any, issue: Any, paths: Any) -> Any:
    return post(client, "/file-claims/check/", {"issue": issue, "paths": paths})


def footprint() -> tuple[Any, ...]:
    """Everything a check must leave alone: claims (and their release), the log, messages."""
    return (
        sorted(FileClaim.objects.values_list("pk", "path", "released_at", "release_reason")),
        ClaimConflict.objects.count(),
        Message.objects.count(),
    )


@pytest.mark.django_db
def test_check_names_another_issues_live_claim(api, workspace, make_issue, make_session):
    mine, theirs = make_issue(), make_issue()
    them = make_session("coder-2")
    claim_paths(workspace, theirs, ["src/a.py", "src/b.py"], them)

    response = check(api, mine.pk, ["src/free.py", "./src//b.py", "src/a.py", "src/b.py"])

    assert response.status_code == 200, response.content
    assert response.json() == {
        "conflicts": [
            {
                "path": "src/a.py",
                "held_path": "src/a.py",
                "issue": theirs.pk,
                "session": them.pk,
                "agent": "coder-2",
            },
            {
                "path": "src/b.py",
                "held_path": "src/b.py",
                "issue": theirs.pk,
                "session": them.pk,
                "agent": "coder-2",
            },
        ]
    }


@pytest.mark.django_db
def test_a_claim_with_no_session_is_a_conflict(api, workspace, make_issue):
    mine, theirs = make_issue(), make_issue()
    claim_paths(workspace, theirs, ["a.py"])

    response = check(api, mine.pk, ["a.py"])

    assert response.json() == {
        "conflicts": [
            {
                "path": "a.py",
                "held_path": "a.py",
                "issue": theirs.pk,
                "session": None,
                "agent": None,
            }
        ]
    }


@pytest.mark.django_db
def test_the_issues_own_claims_are_not_conflicts(api, workspace, issue, make_session):
    claim_paths(workspace, issue, ["a.py"], make_session())
    claim_paths(workspace, issue, ["b.py"])
    response = check(api, issue.pk, ["a.py", "b.py", "c.py"])
    assert response.status_code == 200 and response.json() == {"conflicts": []}


@pytest.mark.django_db
def test_a_dead_holder_is_not_a_conflict_and_is_not_reclaimed(
    api, workspace, make_issue, make_session
):
    mine, theirs = make_issue(), make_issue()
    dead = make_session("dead")
    claim_paths(workspace, theirs, ["a.py"], dead)
    expire(dead)
    before = footprint()

    response = check(api, mine.pk, ["a.py"])

    assert response.json() == {"conflicts": []}
    assert footprint() == before
    assert FileClaim.objects.get().released_at is None  # left for the next claim to reclaim


@pytest.mark.django_db
def test_a_released_claim_is_not_a_conflict(api, workspace, make_issue, make_session):
    mine, theirs = make_issue(), make_issue()
    claim_paths(workspace, theirs, ["a.py"], make_session())
    file_claims.release_files(workspace=workspace, issue_id=theirs.pk)
    assert check(api, mine.pk, ["a.py"]).json() == {"conflicts": []}


@pytest.mark.django_db
def test_check_is_read_only(api, workspace, make_issue, make_session):
    mine, theirs, third = make_issue(), make_issue(), make_issue()
    dead = make_session("dead")
    claim_paths(workspace, theirs, ["live.py"], make_session("live"))
    claim_paths(workspace, third, ["nobody.py"])
    claim_paths(workspace, third, ["dead.py"], dead)
    expire(dead)
    before = footprint()

    response = check(api, mine.pk, ["live.py", "nobody.py", "dead.py", "free.py"])

    assert [c["path"] for c in response.json()["conflicts"]] == ["live.py", "nobody.py"]
    assert footprint() == before
    assert not ClaimConflict.objects.exists()
    # The same paths, claimed for real, are refused and logged: the check only looked.
    refused = post(api, "/file-claims/", {"issue": mine.pk, "paths": ["live.py", "nobody.py"]})
    assert_error(refused, 409, "file_conflict")
    assert ClaimConflict.objects.count() == 2


@pytest.mark.django_db
def test_check_costs_the_same_queries_for_one_path_and_a_thousand(
    api, issue, django_assert_num_queries
):
    check(api, issue.pk, ["warm.py"])  # the first request of a key also starts its counter
    with CaptureQueriesContext(connection) as one:
        assert check(api, issue.pk, ["a.py"]).status_code == 200
    with django_assert_num_queries(len(one)):
        paths = [f"src/{n}.py" for n in range(1000)]
        assert check(api, issue.pk, paths).status_code == 200


@pytest.mark.django_db
def test_up_to_1000_paths_and_no_more(api, issue):
    paths = [f"f{n}.py" for n in range(1001)]
    body = assert_error(check(api, issue.pk, paths), 400, "invalid")
    assert "1000" in body["detail"]
    assert check(api, issue.pk, paths[:1000]).status_code == 200


@pytest.mark.parametrize("raw", INVALID_PATHS)
@pytest.mark.django_db
def test_every_invalid_path_is_400_naming_it(api, issue, raw):
    body = assert_error(check(api, issue.pk, ["ok.py", raw]), 400, "invalid")
    assert body["path"] == raw


@pytest.mark.django_db
def test_a_path_over_1024_bytes_is_400(api, issue):
    raw = "x" * 1025
    assert assert_error(check(api, issue.pk, [raw]), 400, "invalid")["path"] == raw
    assert check(api, issue.pk, ["x" * 1024]).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"paths": ["a.py"]},
        {"issue": "one", "paths": ["a.py"]},
        {"issue": 0, "paths": ["a.py"]},
        {"issue": 2**70, "paths": ["a.py"]},
        {"issue": "ISSUE"},
        {"issue": "ISSUE", "paths": []},
        {"issue": "ISSUE", "paths": "a.py"},
        {"issue": "ISSUE", "paths": [1]},
        {"issue": "ISSUE", "paths": [None]},
        {"issue": "ISSUE", "paths": [["a.py"]]},
        [],
        "a.py",
    ],
)
@pytest.mark.django_db
def test_malformed_bodies_are_400(api, issue, body):
    if isinstance(body, dict):
        body = {key: issue.pk if value == "ISSUE" else value for key, value in body.items()}
    response = api.post(
        f"{V1}/file-claims/check/", json.dumps(body), content_type="application/json"
    )
    assert_error(response, 400, "invalid")


@pytest.mark.django_db
def test_only_json_bodies_and_only_post(api, issue):
    body = json.dumps({"issue": issue.pk, "paths": ["a.py"]})
    response = api.post(f"{V1}/file-claims/check/", body, content_type="text/plain")
    assert_error(response, 415, "unsupported_media_type")
    assert_error(
        api.post(f"{V1}/file-claims/check/", "{", content_type="application/json"), 400, "invalid"
    )
    assert_error(api.get(f"{V1}/file-claims/check/"), 405, "method_not_allowed")


@pytest.mark.django_db
def test_unknown_issue_is_404(api, issue):
    assert_error(check(api, 999999, ["a.py"]), 404, "not_found")


@pytest.mark.django_db
def test_needs_an_api_key(workspace, issue):
    assert_error(check(APIClient(), issue.pk, ["a.py"]), 401, "unauthenticated")


@pytest.mark.django_db
def test_workspaces_are_isolated(
    api, stranger_api, workspace, other_workspace, make_issue, make_session
):
    mine, theirs = make_issue(), make_issue()
    claim_paths(workspace, theirs, ["a.py"], make_session("ours"))
    # Their key cannot check against our issues.
    assert_error(check(stranger_api, mine.pk, ["a.py"]), 404, "not_found")
    # Their own issue: our claim on the same path is not theirs to see.
    foreign = Project.objects.create(workspace=other_workspace, key="x", name="X")
    foreign_issue = make_issue(project=foreign)
    assert check(stranger_api, foreign_issue.pk, ["a.py"]).json() == {"conflicts": []}
    # And theirs is not ours.
    claim_paths(other_workspace, foreign_issue, ["b.py"])
    assert check(api, mine.pk, ["a.py", "b.py"]).json()["conflicts"] == [
        {
            "path": "a.py",
            "held_path": "a.py",
            "issue": theirs.pk,
            "session": FileClaim.objects.get(path="a.py").session_id,
            "agent": "ours",
        }
    ]
