"""REST API of file claims across workspaces (invariant 9 (workspace isolation)): another
workspace's key sees and changes no claims; error bodies are JSON with the error shape."""

import json

import pytest

from coordination.models import ClaimConflict, FileClaim, Project
from tests.api_helpers import V1, assert_error, post

pytestmark = pytest.mark.django_db


# --- workspace isolation (invariant 9 (workspace isolation))
# ---------------------------------------------------


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
