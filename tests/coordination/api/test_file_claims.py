"""REST API of file claims and the claim-conflict log: shapes, errors, filters, isolation."""

import json
from urllib.parse import urlencode

import pytest

from coordination.models import ClaimConflict, FileClaim, Project, ReleaseReason
from coordination.services import file_claims
from tests.api_helpers import V1, assert_error, post
from tests.conftest import expire
from tests.coordination.conftest import INVALID_PATHS, claim_lease, held, state

pytestmark = pytest.mark.django_db


def listed(client, url):
    response = client.get(f"{V1}{url}")
    assert response.status_code == 200, response.content
    return response.json()["results"]


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


# --- releasing -------------------------------------------------------------------------


def test_release_endpoint(api, issue, make_session):
    one, two = make_session("one"), make_session("two")
    post(api, "/file-claims/", {"issue": issue.pk, "paths": ["a.py", "b.py"], "session": one.pk})
    post(api, "/file-claims/", {"issue": issue.pk, "paths": ["c.py"], "session": two.pk})

    some = post(api, "/file-claims/release/", {"issue": issue.pk, "paths": ["./a.py", "zzz.py"]})
    assert some.status_code == 200 and some.json() == {"released": ["a.py"]}

    mine = post(api, "/file-claims/release/", {"issue": issue.pk, "session": two.pk})
    assert mine.status_code == 200 and mine.json() == {"released": ["c.py"]}

    rest = post(api, "/file-claims/release/", {"issue": issue.pk})
    assert rest.status_code == 200 and rest.json() == {"released": ["b.py"]}

    assert not held()
    assert set(FileClaim.objects.values_list("release_reason", flat=True)) == {"released"}


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"issue": 999999}, 404),
        ({}, 400),
        ({"issue": "x"}, 400),
        ({"issue": 1, "paths": []}, 400),
        ({"issue": 1, "paths": ["/abs"]}, 400),
        ({"issue": 1, "session": 999999}, 400),
    ],
)
def test_release_errors(api, issue, make_session, body, status):
    post(api, "/file-claims/", {"issue": issue.pk, "paths": ["abs"], "session": make_session().pk})
    body = {key: (issue.pk if value == 1 else value) for key, value in body.items()}
    assert_error(
        post(api, "/file-claims/release/", body),
        status,
        "not_found" if status == 404 else "invalid",
    )
    assert held() == {"abs": issue.pk}


def test_ending_the_agent_releases_its_claims_agent_ended(api, issue, make_session):
    session = make_session()
    post(api, "/file-claims/", {"issue": issue.pk, "paths": ["a.py"], "session": session.pk})

    assert post(api, f"/sessions/{session.pk}/end/").status_code == 200

    assert FileClaim.objects.get().release_reason == ReleaseReason.AGENT_ENDED
    assert listed(api, "/file-claims/?release_reason=agent_ended")[0]["path"] == "a.py"


def test_closing_the_issue_releases_its_claims_issue_closed(api, issue, make_session):
    post(api, "/file-claims/", {"issue": issue.pk, "paths": ["a.py"], "session": make_session().pk})

    response = post(api, f"/issues/{issue.pk}/transition/", {"to": "cancelled"})

    assert response.status_code == 200, response.content
    assert FileClaim.objects.get().release_reason == ReleaseReason.ISSUE_CLOSED


# --- listing -----------------------------------------------------------------------------


def test_list_file_claims_filters(api, make_issue, make_session):
    first, second = make_issue(), make_issue()
    a, b = make_session("a"), make_session("b")
    post(api, "/file-claims/", {"issue": first.pk, "paths": ["src/a.py", "src"], "session": a.pk})
    post(
        api,
        "/file-claims/",
        {"issue": second.pk, "paths": ["srcs/b.py", "SRC/c.py"], "session": b.pk},
    )
    post(api, "/file-claims/release/", {"issue": second.pk, "paths": ["SRC/c.py"]})

    def paths(query):
        return sorted(row["path"] for row in listed(api, f"/file-claims/{query}"))

    assert paths("") == ["SRC/c.py", "src", "src/a.py", "srcs/b.py"]
    assert paths("?active=true") == ["src", "src/a.py", "srcs/b.py"]
    assert paths("?active=false") == ["SRC/c.py"]
    assert paths(f"?issue={second.pk}") == ["SRC/c.py", "srcs/b.py"]
    assert paths(f"?session={a.pk}") == ["src", "src/a.py"]
    assert paths("?path=./src//a.py") == ["src/a.py"]
    assert paths("?path_prefix=src") == ["src", "src/a.py"]
    assert paths("?path_prefix=src/") == ["src", "src/a.py"]
    assert paths("?path_prefix=SRC") == ["SRC/c.py"]
    assert paths("?release_reason=released") == ["SRC/c.py"]
    assert_error(api.get(f"{V1}/file-claims/?path=../x"), 400, "invalid")
    assert_error(api.get(f"{V1}/file-claims/?path_prefix=/abs"), 400, "invalid")
    assert_error(api.get(f"{V1}/file-claims/?issue=abc"), 400, "invalid")
    assert_error(api.get(f"{V1}/file-claims/?release_reason=bogus"), 400, "invalid")

    claim_id = FileClaim.objects.get(path="src").pk
    detail = api.get(f"{V1}/file-claims/{claim_id}/")
    assert detail.status_code == 200 and detail.json()["agent"] == "a"


def test_listing_file_claims_takes_a_fixed_number_of_queries(
    api, make_issue, make_session, django_assert_max_num_queries
):
    for n in range(5):
        post(
            api,
            "/file-claims/",
            {"issue": make_issue().pk, "paths": [f"{n}.py"], "session": make_session(f"a{n}").pk},
        )
    with django_assert_max_num_queries(4):
        response = api.get(f"{V1}/file-claims/")
    assert response.json()["count"] == 5


def test_claim_conflicts_list_and_filters(api, make_issue, make_session):
    mine, theirs, third = make_issue(), make_issue(), make_issue()
    me, them = make_session("me"), make_session("them")
    post(
        api,
        "/file-claims/",
        {"issue": theirs.pk, "paths": ["src/a.py", "lib/b.py"], "session": them.pk},
    )
    post(
        api,
        "/file-claims/",
        {"issue": mine.pk, "paths": ["src/a.py", "lib/b.py"], "session": me.pk},
    )
    post(api, "/file-claims/", {"issue": third.pk, "paths": ["src/a.py"], "force": True})

    rows = listed(api, "/claim-conflicts/")
    assert len(rows) == 3
    forced = next(row for row in rows if row["forced"])
    assert forced == {
        "id": forced["id"],
        "path": "src/a.py",
        "rejected_issue": third.pk,
        "rejected_session": None,
        "rejected_agent": None,
        "holding_issue": theirs.pk,
        "holding_session": them.pk,
        "holding_agent": "them",
        "forced": True,
        "occurred_at": forced["occurred_at"],
    }

    def paths(query):
        return sorted(
            (row["path"], row["forced"]) for row in listed(api, f"/claim-conflicts/{query}")
        )

    assert paths("?forced=true") == [("src/a.py", True)]
    assert paths("?forced=false") == [("lib/b.py", False), ("src/a.py", False)]
    assert paths("?path=src//a.py") == [("src/a.py", False), ("src/a.py", True)]
    assert paths("?path_prefix=lib") == [("lib/b.py", False)]
    assert paths(f"?issue={mine.pk}") == [("lib/b.py", False), ("src/a.py", False)]
    assert len(paths(f"?issue={theirs.pk}")) == 3  # the holding side counts too

    first = ClaimConflict.objects.order_by("occurred_at", "id").first()
    at = urlencode({"t": first.occurred_at.isoformat()})[2:]
    assert len(paths(f"?since={at}")) == 3
    assert paths(f"?until={at}") == []
    assert_error(api.get(f"{V1}/claim-conflicts/?since=yesterday"), 400, "invalid")


def test_claim_conflicts_is_read_only(api):
    response = post(api, "/claim-conflicts/", {"path": "a.py"})
    assert_error(response, 405, "method_not_allowed")


# --- workspace isolation (invariant 9) ---------------------------------------------------


def test_another_workspaces_key_sees_and_changes_no_claims(
    api, stranger_api, other_workspace, issue, make_issue, make_session
):
    session = make_session("mine")
    theirs = make_issue()
    post(api, "/file-claims/", {"issue": theirs.pk, "paths": ["a.py"], "session": session.pk})
    post(api, "/file-claims/", {"issue": issue.pk, "paths": ["a.py"], "session": session.pk})
    claim_id = FileClaim.objects.get().pk

    assert_error(stranger_api.get(f"{V1}/file-claims/{claim_id}/"), 404, "not_found")
    for listing in ("/file-claims/", "/claim-conflicts/", "/messages/"):
        assert stranger_api.get(f"{V1}{listing}").json()["count"] == 0
    assert_error(
        post(stranger_api, "/file-claims/", {"issue": issue.pk, "paths": ["b.py"], "force": True}),
        404,
        "not_found",
    )
    assert_error(
        post(stranger_api, "/file-claims/release/", {"issue": theirs.pk}), 404, "not_found"
    )

    # Their own issue, our session: an unknown reference in their workspace.
    foreign_project = Project.objects.create(workspace=other_workspace, key="x", name="X")
    foreign_issue = make_issue(project=foreign_project)
    assert_error(
        post(
            stranger_api,
            "/file-claims/",
            {"issue": foreign_issue.pk, "paths": ["a.py"], "session": session.pk},
        ),
        400,
        "invalid",
    )
    # The same path in another workspace is another claim: no conflict across tenants.
    response = post(stranger_api, "/file-claims/", {"issue": foreign_issue.pk, "paths": ["a.py"]})
    assert response.status_code == 201, response.content

    assert FileClaim.objects.get(workspace__slug="acme").issue_id == theirs.pk
    assert FileClaim.objects.get(workspace=other_workspace).issue_id == foreign_issue.pk
    assert ClaimConflict.objects.filter(workspace__slug="acme").count() == 1
    assert not ClaimConflict.objects.filter(workspace=other_workspace).exists()


def test_error_bodies_are_json_with_the_error_shape(api, issue):
    response = api.post(
        f"{V1}/file-claims/",
        json.dumps({"issue": issue.pk, "paths": ["/x"]}),
        content_type="text/plain",
    )
    assert_error(response, 415, "unsupported_media_type")


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
