"""Directory claims over REST (docs/api.md "File claims", invariant 11 (overlap)): the 409's
``held_path`` and ``conflicts_total``, globs refused, exact releases, ``?covering=``,
``?path_prefix=`` with a trailing ``/``, the check and the events."""

import pytest

from coordination.models import ClaimConflict, Event
from tests.api_helpers import V1, assert_error, post
from tests.coordination.conftest import held

pytestmark = pytest.mark.django_db


def listed(client, url):
    response = client.get(f"{V1}{url}")
    assert response.status_code == 200, response.content
    return sorted(row["path"] for row in response.json()["results"])


def claim(api, issue, paths, session=None, **extra):
    body = {"issue": issue.pk, "paths": paths, "session": session.pk if session else None}
    return post(api, "/file-claims/", {**body, **extra})


def test_a_directory_claim_comes_back_as_a_directory(api, issue):
    response = claim(api, issue, ["./src//api/", "src/api/v2/./"])
    assert response.status_code == 201, response.content
    assert [c["path"] for c in response.json()["claims"]] == ["src/api/", "src/api/v2/"]


def test_a_file_under_another_issues_directory_is_a_409_naming_the_directory(
    api, make_issue, make_session
):
    mine, theirs = make_issue(), make_issue()
    them = make_session("them")
    assert claim(api, theirs, ["src/api/"], them).status_code == 201

    body = assert_error(claim(api, mine, ["src/api/x.py", "src/apiv2.py"]), 409, "file_conflict")

    assert body["conflicts"] == [
        {
            "path": "src/api/x.py",
            "held_path": "src/api/",
            "issue": theirs.pk,
            "session": them.pk,
            "agent": "them",
        }
    ]
    assert body["conflicts_total"] == 1
    assert held() == {"src/api/": theirs.pk}
    assert list(ClaimConflict.objects.values_list("path", flat=True)) == ["src/api/x.py"]


def test_forcing_a_directory_reports_each_holder_it_displaced(api, make_issue, make_session):
    mine, theirs = make_issue(), make_issue()
    them = make_session("them")
    claim(api, theirs, ["lib/a.py", "lib/b/"], them)

    response = claim(api, mine, ["lib/"], make_session("me"), force=True)

    assert response.status_code == 201, response.content
    assert [(o["path"], o["held_path"]) for o in response.json()["overridden"]] == [
        ("lib/", "lib/a.py"),
        ("lib/", "lib/b/"),
    ]
    assert held() == {"lib/": mine.pk}


@pytest.mark.parametrize("raw", ["src/*.py", "src/api/test_?.py", "docs/[a-z]*.md", "**"])
def test_a_glob_is_a_400_saying_to_claim_the_directory(api, issue, raw):
    body = assert_error(claim(api, issue, ["ok.py", raw]), 400, "invalid")
    assert body["path"] == raw
    assert "globs are not claims" in body["detail"] and "claim the directory" in body["detail"]
    assert held() == {}


@pytest.mark.parametrize("raw", ["/", "./", "."])
def test_a_directory_claim_needs_a_segment(api, issue, raw):
    assert assert_error(claim(api, issue, [raw]), 400, "invalid")["path"] == raw


def test_release_takes_a_directory_by_its_spelling_and_nothing_under_it(api, issue):
    claim(api, issue, ["d/", "d/x.py", "d"])

    response = post(api, "/file-claims/release/", {"issue": issue.pk, "paths": ["d//"]})

    assert response.json() == {"released": ["d/"]}
    assert held() == {"d/x.py": issue.pk, "d": issue.pk}
    refused = post(api, "/file-claims/release/", {"issue": issue.pk, "paths": ["d/*"]})
    assert "globs are not claims" in assert_error(refused, 400, "invalid")["detail"]


def test_covering_lists_the_claims_that_hold_a_path(api, make_issue):
    first, second = make_issue(), make_issue()
    claim(api, first, ["src/", "docs/a.md"])
    claim(api, second, ["other/src/a/b.py", "srcs/"])
    claim(api, first, ["src/a/b.py"])  # the same issue may hold a file under its directory

    assert listed(api, "/file-claims/?covering=src/a/b.py") == ["src/", "src/a/b.py"]
    assert listed(api, "/file-claims/?covering=./src//a/") == ["src/"]
    assert listed(api, "/file-claims/?covering=src") == []  # a file called src: nobody
    assert listed(api, "/file-claims/?covering=srcs/x[1].py") == ["srcs/"]  # literal name
    post(api, "/file-claims/release/", {"issue": first.pk, "paths": ["src/"]})
    assert listed(api, "/file-claims/?covering=src/a/b.py") == ["src/a/b.py"]  # unreleased only


def test_path_prefix_selects_alike_with_or_without_the_slash(api, issue):
    claim(api, issue, ["d/", "d/x.py", "d", "dx/y.py"])

    for prefix in ("d", "d/", "./d//"):
        assert listed(api, f"/file-claims/?path_prefix={prefix}") == ["d", "d/", "d/x.py"]
    assert listed(api, "/file-claims/?path=d/") == ["d/"]
    assert listed(api, "/file-claims/?path=d") == ["d"]


def test_the_check_treats_a_file_under_a_directory_claim_as_a_conflict(
    api, make_issue, make_session
):
    mine, theirs = make_issue(), make_issue()
    them = make_session("them")
    claim(api, theirs, ["src/api/"], them)

    response = post(
        api,
        "/file-claims/check/",
        {"issue": mine.pk, "paths": ["src/api/a[1].py", "src/apiv2/x.py", "README.md"]},
    )

    assert response.status_code == 200, response.content
    assert response.json() == {
        "conflicts": [
            {
                "path": "src/api/a[1].py",
                "held_path": "src/api/",
                "issue": theirs.pk,
                "session": them.pk,
                "agent": "them",
            }
        ]
    }
    assert not ClaimConflict.objects.exists()


def test_the_events_carry_the_paths_and_the_holders(api, make_issue, make_session):
    mine, theirs = make_issue(), make_issue()
    claim(api, theirs, ["src/"], make_session("them"))
    claim(api, mine, ["src/a.py"], make_session("me"))

    granted = Event.objects.get(type="claims.granted")
    refused = Event.objects.get(type="claims.refused")
    assert granted.data == {"paths": ["src/"]}
    assert refused.data["paths"] == ["src/a.py"]
    assert [(c["path"], c["held_path"]) for c in refused.data["conflicts"]] == [
        ("src/a.py", "src/")
    ]
    assert refused.data["conflicts_total"] == 1
