"""FileClaimSerializer writes its mapping out (a claim's answer lists up to 1,000
claims): each claim renders exactly as DRF's fields render it, whatever its state."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from rest_framework import serializers

from coordination.api.serializers.fields import iso_datetime
from coordination.api.serializers.file_claims import FileClaimSerializer
from coordination.models import FileClaim, ReleaseReason
from coordination.services import file_claims


def drf_rendering(claim: FileClaim) -> dict:
    """The claim through the serializer's declared fields, as DRF renders them."""
    return dict(serializers.ModelSerializer.to_representation(FileClaimSerializer(), claim))


@pytest.fixture
def claims(workspace, issue, make_session) -> list[FileClaim]:
    session = make_session("coder-1")
    held = file_claims.claim_files(
        workspace=workspace,
        issue_id=issue.pk,
        paths=["src/a.py", "src/lib/"],
        session_id=session.pk,
    ).claims
    sessionless = file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["docs/readme.md"]
    ).claims
    file_claims.release_files(workspace=workspace, issue_id=issue.pk, paths=["src/a.py"])
    released = FileClaim.objects.get(path="src/a.py")
    assert released.release_reason == ReleaseReason.RELEASED and released.released_at
    return [*held, *sessionless, released]


def test_every_claim_renders_as_drfs_fields_render_it(claims):
    rendered = FileClaimSerializer(claims, many=True).data
    assert [dict(claim) for claim in rendered] == [drf_rendering(claim) for claim in claims]
    assert all(list(claim) == FileClaimSerializer.Meta.fields for claim in rendered)
    assert {claim["agent"] for claim in rendered} == {"coder-1", None}
    assert {claim["release_reason"] for claim in rendered} == {None, "released"}


def test_claims_loaded_by_the_orm_render_the_same(claims):
    loaded = list(FileClaim.objects.filter(pk__in=[c.pk for c in claims]).order_by("pk"))
    assert [FileClaimSerializer(c).data for c in loaded] == [drf_rendering(c) for c in loaded]


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 12, 5, 3, 4, 5, 123456, tzinfo=UTC),
        datetime(2026, 12, 5, 3, 4, 5, tzinfo=UTC),
        datetime(2026, 12, 5, 3, 4, 5, tzinfo=ZoneInfo("Europe/Berlin")),
        datetime(2026, 1, 1, tzinfo=timezone.get_fixed_timezone(timedelta(hours=-5))),
        None,
    ],
)
@pytest.mark.parametrize("current", ["UTC", "Asia/Kolkata"])
def test_a_datetime_is_written_as_drfs_datetime_field_writes_it(value, current):
    with timezone.override(ZoneInfo(current)):
        expected = None if value is None else serializers.DateTimeField().to_representation(value)
        assert iso_datetime(value) == expected
