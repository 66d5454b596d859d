"""REST API of file claims, releasing: by path, by session or all of an issue's, its
errors, and the releases of an ended agent and a closed issue."""

import pytest

from coordination.models import FileClaim, ReleaseReason
from tests.api_helpers import assert_error, post
from tests.coordination.api.file_claims_helpers import listed
from tests.coordination.conftest import held

pytestmark = pytest.mark.django_db


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
