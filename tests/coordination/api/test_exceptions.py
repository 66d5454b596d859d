"""The one exception handler: malformed, non-JSON and oversized bodies answer the error shape."""

import pytest

from coordination.models import FileClaim
from tests.api_helpers import V1, assert_error

pytestmark = pytest.mark.django_db


def test_an_oversized_body_is_413_json(api, issue, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    body = {"issue": issue.pk, "paths": ["a" * 100] * 50}
    assert_error(api.post(f"{V1}/file-claims/", body, format="json"), 413, "payload_too_large")
    assert not FileClaim.objects.exists()


def test_malformed_json_is_400(api):
    response = api.post(f"{V1}/sessions/", "{bad", content_type="application/json")
    assert_error(response, 400, "invalid")


def test_non_json_body_is_415(api):
    response = api.post(
        f"{V1}/sessions/", "agent=x", content_type="application/x-www-form-urlencoded"
    )
    assert_error(response, 415, "unsupported_media_type")
