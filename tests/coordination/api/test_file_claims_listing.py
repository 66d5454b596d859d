"""REST API of file claims and the claim-conflict log, listing: shapes, filters, the
number of queries; the log is read-only."""

from urllib.parse import urlencode

import pytest

from coordination.models import ClaimConflict, FileClaim
from tests.api_helpers import V1, assert_error, post
from tests.coordination.api.file_claims_helpers import listed

pytestmark = pytest.mark.django_db


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
