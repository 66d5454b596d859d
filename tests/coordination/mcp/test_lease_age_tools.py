"""The age cap through the SDK client (invariant 17 (stalled is derived)): the holder of an aged-out
lease passing its fence to release_issue or claim_files gets stale_fence, and nothing
changes; claiming again gives it a new fence that it may release with."""

from datetime import timedelta

import pytest
from django.utils import timezone

from coordination.models import FileClaim, IssueLease, Project
from tests.coordination.conftest import claim_lease
from tests.coordination.mcp.conftest import call, connect, refused, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_aged_out_holders_fenced_tools_are_stale(
    mcp_url, raw_key, workspace, project, issue, make_session
):
    Project.objects.filter(pk=project.pk).update(max_lease_age_seconds=600)
    session = make_session("atlas")
    lease = claim_lease(workspace, issue, session)
    past = timezone.now() - timedelta(seconds=1)
    IssueLease.objects.filter(pk=lease.pk).update(ages_out_at=past)

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            release = await refused(
                client, "release_issue", issue=issue.pk, session=session.pk, fence=lease.fence
            )
            assert release["code"] == "stale_fence" and release["current_fence"] is None
            files = await refused(
                client,
                "claim_files",
                issue=issue.pk,
                paths=["src/a.py"],
                session=session.pk,
                fence=lease.fence,
            )
            assert files["code"] == "stale_fence"
            again = await call(client, "claim_issue", issue=issue.pk, session=session.pk)
            assert again["fence"] == lease.fence + 1
            released = await call(
                client, "release_issue", issue=issue.pk, session=session.pk, fence=again["fence"]
            )
            assert released["release_reason"] == "released"

    run(scenario)
    old = IssueLease.objects.get(pk=lease.pk)
    assert old.release_reason == "max_age"  # by the claim again, not by the fenced release
    assert not FileClaim.objects.filter(issue=issue).exists()
