"""What every viewset shares: ids past the bigint range are a plain 404, after the key."""

import pytest

from tests.api_helpers import V1, assert_error

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "pk", ["9223372036854775807", "9223372036854775808", "9999999999999999999"]
)
def test_a_19_digit_id_is_a_plain_404(api, project, pk):
    assert_error(api.patch(f"{V1}/projects/{pk}/", {"name": "x"}, format="json"), 404, "not_found")
    assert_error(api.get(f"{V1}/issues/{pk}/"), 404, "not_found")
    assert_error(
        api.post(f"{V1}/issues/{pk}/claim/", {"session": 1}, format="json"), 404, "not_found"
    )


def test_an_absurd_id_still_needs_a_key(client):
    assert_error(client.get(f"{V1}/issues/9999999999999999999/"), 401, "unauthenticated")
