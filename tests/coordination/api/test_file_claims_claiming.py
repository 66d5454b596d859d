"""REST API of file claims, claiming: shapes, conflicts, forcing, reclaiming, errors,
and the fence of the issue's lease."""

import pytest

from coordination.models import ClaimConflict, FileClaim, ReleaseReason
from coordination.services import file_claims
from tests.api_helpers import V1, assert_error, post
from tests.conftest import expire
from tests.coordination.api.file_claims_helpers import listed
from tests.coordination.conftest import INVALID_PATHS, claim_lease, held, state

pytestmark = pytest.mark.django_db


# --- claiming --------------------------------------------------------------------------


def test_claim_returns_201_with_claims_reclaimed_and_overridden(api, issue, make_session):
    session = make_session("coder")

    response = post(
        api, "/file-claims/", {"issue": issue.pk, "paths": ["./src//a.py"], "session": session.pk}
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["reclaimed"] == [] and body["overridden"] == []
    [claim] = body["claims"]
    row = FileClaim.objects.get()
    assert claim == {
        "id": row.pk,
        "path": "src/a.py",
        "issue": issue.pk,
        "session": session.pk,
        "agent": "coder",
        "claimed_at": claim["claimed_at"],
        "released_at": None,
        "release_reason": None,
    }
    assert claim["claimed_at"]


def test_claim_without_a_session_is_held_by_nobody(api, issue):
    response = post(api, "/file-claims/", {"issue": issue.pk, "paths": ["a.py"], "session": None})
    assert response.status_code == 201, response.content
    assert response.json()["claims"][0]["session"] is None
    assert FileClaim.objects.get().agent_id is None


def test_claiming_the_same_paths_again_is_idempotent(api, issue, make_session):
    body = {"issue": issue.pk, "paths": ["a.py", "b.py"], "session": make_session().pk}
    first = post(api, "/file-claims/", body).json()["claims"]

    again = post(api, "/file-claims/", body)

    assert again.status_code == 201
    assert again.json()["claims"] == first
    assert FileClaim.objects.count() == 2 and not ClaimConflict.objects.exists()


def test_conflict_is_409_naming_every_holder_and_claims_nothing(api, make_issue, make_session):
    mine, theirs = make_issue(), make_issue()
    them = make_session("them")
    post(api, "/file-claims/", {"issue": theirs.pk, "paths": ["a.py", "b.py"], "session": them.pk})

    response = post(
        api,
        "/file-claims/",
        {"issue": mine.pk, "paths": ["free.py", "b.py", "a.py"], "session": make_session("me").pk},
    )

    body = assert_error(response, 409, "file_conflict")
    assert body["conflicts"] == [
        {
            "path": "a.py",
            "held_path": "a.py",
            "issue": theirs.pk,
            "session": them.pk,
            "agent": "them",
        },
        {
            "path": "b.py",
            "held_path": "b.py",
            "issue": theirs.pk,
            "session": them.pk,
            "agent": "them",
        },
    ]
    assert held() == {"a.py": theirs.pk, "b.py": theirs.pk}
    assert list(ClaimConflict.objects.order_by("path").values_list("path", "forced")) == [
        ("a.py", False),
        ("b.py", False),
    ]


def test_force_via_api_reports_what_it_overrode(api, make_issue, make_session):
    mine, theirs = make_issue(), make_issue()
    them = make_session("them")
    post(api, "/file-claims/", {"issue": theirs.pk, "paths": ["a.py"], "session": them.pk})

    response = post(
        api,
        "/file-claims/",
        {"issue": mine.pk, "paths": ["a.py"], "session": make_session("me").pk, "force": True},
    )

    assert response.status_code == 201, response.content
    assert response.json()["overridden"] == [
        {
            "path": "a.py",
            "held_path": "a.py",
            "issue": theirs.pk,
            "session": them.pk,
            "agent": "them",
        }
    ]
    assert held() == {"a.py": mine.pk}
    assert FileClaim.objects.get(issue=theirs).release_reason == ReleaseReason.OVERRIDDEN
    assert ClaimConflict.objects.get().forced is True
    messages = listed(api, f"/messages/?scope=issue:{mine.pk}")
    assert len(messages) == 1 and f"issue {theirs.pk}" in messages[0]["body"]


def test_dead_holder_is_reported_reclaimed(api, make_issue, make_session):
    mine, theirs = make_issue(), make_issue()
    dead = make_session("dead")
    post(api, "/file-claims/", {"issue": theirs.pk, "paths": ["a.py"], "session": dead.pk})
    expire(dead)

    response = post(
        api, "/file-claims/", {"issue": mine.pk, "paths": ["a.py"], "session": make_session().pk}
    )

    assert response.status_code == 201, response.content
    assert response.json()["reclaimed"] == ["a.py"]
    assert FileClaim.objects.get(issue=theirs).release_reason == ReleaseReason.EXPIRED
    assert not ClaimConflict.objects.exists()


def test_a_claimer_that_is_not_live_gets_409(api, issue, make_session):
    session = make_session()
    expire(session)
    response = post(
        api, "/file-claims/", {"issue": issue.pk, "paths": ["a.py"], "session": session.pk}
    )
    assert_error(response, 409, "session_not_live")
    assert not FileClaim.objects.exists()


def test_a_closed_issue_gets_409_invalid_transition(api, issue):
    assert post(api, f"/issues/{issue.pk}/transition/", {"to": "cancelled"}).status_code == 200
    response = post(api, "/file-claims/", {"issue": issue.pk, "paths": ["a.py"]})
    assert_error(response, 409, "invalid_transition")
    assert not FileClaim.objects.exists()


def test_101_paths_is_400_and_nothing_is_claimed(api, issue):
    paths = [f"f{n}.py" for n in range(101)]
    assert_error(post(api, "/file-claims/", {"issue": issue.pk, "paths": paths}), 400, "invalid")
    assert not FileClaim.objects.exists()
    assert post(api, "/file-claims/", {"issue": issue.pk, "paths": paths[:100]}).status_code == 201


@pytest.mark.parametrize("raw", [*INVALID_PATHS, "x" * 1025])
def test_every_invalid_path_is_400_naming_it(api, issue, raw):
    response = post(api, "/file-claims/", {"issue": issue.pk, "paths": ["ok.py", raw]})
    body = assert_error(response, 400, "invalid")
    assert body["path"] == raw
    assert not FileClaim.objects.exists()


def test_a_path_that_is_not_unicode_text_is_400_not_500(api, issue):
    raw_json = '{"issue": ISSUE, "paths": ["bad\\ud800.py"]}'.replace("ISSUE", str(issue.pk))
    response = api.post(f"{V1}/file-claims/", raw_json, content_type="application/json")
    body = assert_error(response, 400, "invalid")
    assert body["path"] == "bad\\ud800.py"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"paths": ["a.py"]},
        {"issue": "one", "paths": ["a.py"]},
        {"issue": 1},
        {"issue": 1, "paths": []},
        {"issue": 1, "paths": "a.py"},
        {"issue": 1, "paths": [1]},
        {"issue": 1, "paths": [None]},
        {"issue": 1, "paths": [["a.py"]]},
        {"issue": 1, "paths": ["a.py"], "force": "yes"},
        {"issue": 1, "paths": ["a.py"], "force": 1},
        {"issue": 1, "paths": ["a.py"], "session": "me"},
        {"issue": 1, "paths": ["a.py"], "session": 0},
        {"issue": 1, "paths": ["a.py"], "session": 2**70},
        {"issue": 2**70, "paths": ["a.py"]},
    ],
)
def test_malformed_claim_bodies_are_400(api, issue, body):
    body = {
        key: (issue.pk if value == 1 and key == "issue" else value) for key, value in body.items()
    }
    assert_error(post(api, "/file-claims/", body), 400, "invalid")
    assert not FileClaim.objects.exists()


def test_unknown_issue_is_404_and_unknown_session_is_400(api, issue):
    assert_error(post(api, "/file-claims/", {"issue": 999999, "paths": ["a.py"]}), 404, "not_found")
    assert_error(
        post(api, "/file-claims/", {"issue": issue.pk, "paths": ["a.py"], "session": 999999}),
        400,
        "invalid",
    )
    assert not FileClaim.objects.exists()


# --- fences ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_lost_holder_cannot_claim_files_with_its_old_fence(
    api, workspace, issue, make_issue, make_session, lost_lease
):
    old, first, new, second = lost_lease
    # A path held by another issue: a stale claim must not even log a conflict.
    file_claims.claim_files(
        workspace=workspace,
        issue_id=make_issue().pk,
        paths=["src/held.py"],
        session_id=make_session("other").pk,
    )
    before = state()

    for session in (old.pk, None):
        body = assert_error(
            post(
                api,
                "/file-claims/",
                {
                    "issue": issue.pk,
                    "paths": ["src/a.py", "src/held.py"],
                    "session": session,
                    "fence": first.fence,
                },
            ),
            409,
            "stale_fence",
        )
        assert body["current_fence"] == 2
        assert state() == before

    response = post(
        api,
        "/file-claims/",
        {"issue": issue.pk, "paths": ["src/a.py"], "session": new.pk, "fence": 2},
    )
    assert response.status_code == 201, response.content
    assert FileClaim.objects.get(path="src/a.py").session_id == new.pk


@pytest.mark.django_db
def test_a_file_claim_fence_needs_an_unreleased_lease(api, workspace, issue, make_session, roomy):
    session = make_session()
    before = state()
    body = assert_error(
        post(api, "/file-claims/", {"issue": issue.pk, "paths": ["a.py"], "fence": 1}),
        409,
        "stale_fence",
    )
    assert body["current_fence"] is None and state() == before
    fence = claim_lease(workspace, issue, session).fence
    response = post(api, "/file-claims/", {"issue": issue.pk, "paths": ["a.py"], "fence": fence})
    assert response.status_code == 201, response.content
