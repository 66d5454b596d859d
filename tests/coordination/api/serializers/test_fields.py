"""The API's fields and output serializers: fences, release fields, fields bound once."""

from typing import Any

import pytest

from coordination.api.serializers import (
    ClaimedFilesSerializer,
    FieldsBoundOnce,
    FileClaimSerializer,
    IssueSerializer,
    LeaseSerializer,
    SessionSerializer,
)
from coordination.models import IssueLease
from coordination.selectors import claims, issues, sessions
from coordination.services import file_claims, leases
from tests.api_helpers import V1, assert_error, post
from tests.coordination.conftest import claim_lease, dispatch_run, state

pytestmark = pytest.mark.django_db


REPORT = {"summary": "Done.", "verification": "Tests pass."}


BAD_FENCES = ["1", "", 0, -1, 1.5, 1.0, True, [1], {"fence": 1}, 2**31, 2**63]


@pytest.mark.django_db
@pytest.mark.parametrize("fence", BAD_FENCES)
def test_a_bad_fence_is_400_everywhere_and_changes_nothing(
    api, workspace, issue, make_issue, make_session, tree, roomy, fence
):
    session = make_session()
    claim_lease(workspace, issue, session)
    run = dispatch_run(workspace, session, make_issue(worktree=tree))
    before = state()
    calls = [
        (f"/issues/{issue.pk}/release/", {"session": session.pk}),
        ("/file-claims/", {"issue": issue.pk, "paths": ["a.py"], "session": session.pk}),
        (f"/runs/{run.pk}/finish/", {"outcome": "succeeded"}),
        ("/work/finish/", {"session": session.pk, "issue": issue.pk, "report": REPORT}),
    ]
    for url, body in calls:
        response = assert_error(post(api, url, {**body, "fence": fence}), 400, "invalid")
        assert "fence" in str(response), (url, response)
    assert state() == before


def test_unreleased_rows_show_null_release_fields(api, workspace, issue, make_session):
    session = make_session()
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["a.py"], session_id=session.pk
    )
    lease = api.get(f"{V1}/leases/").json()["results"][0]
    claim = api.get(f"{V1}/file-claims/").json()["results"][0]
    assert (lease["released_at"], lease["release_reason"]) == (None, None)
    assert (claim["released_at"], claim["release_reason"]) == (None, None)
    issue_body = api.get(f"{V1}/issues/{issue.pk}/").json()
    assert issue_body["lease"]["release_reason"] is None
    leases.release_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    assert api.get(f"{V1}/leases/").json()["results"][0]["release_reason"] == "released"
    assert IssueLease.objects.get().release_reason == "released"


def drf_rendering(serializer: Any, instance: Any) -> Any:
    """What DRF's own ``to_representation`` gives, with per-instance fields."""
    base = next(c for c in type(serializer).__mro__[1:] if c is not FieldsBoundOnce)
    return base.to_representation(serializer, instance)


def test_fields_bound_once_render_as_drf_does(workspace, issue, make_session):
    session = make_session("ada")
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk).lease
    claimed = file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["a", "b"], session_id=session.pk
    )
    cases = [
        (SessionSerializer, sessions.sessions(workspace).get(pk=session.pk)),
        (LeaseSerializer, claims.leases(workspace).get(pk=lease.pk)),
        (IssueSerializer, issues.issues(workspace).get(pk=issue.pk)),
        (FileClaimSerializer, claimed.claims[0]),
        (ClaimedFilesSerializer, claimed),
    ]
    for serializer_class, instance in cases:
        serializer = serializer_class(instance)
        assert serializer.data == drf_rendering(serializer, instance), serializer_class
