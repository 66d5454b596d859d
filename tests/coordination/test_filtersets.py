"""The FilterSets: strict booleans, and times with any offset a 400 or an answer."""

import pytest

from tests.api_helpers import V1, assert_error

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "since",
    ["1643-12-17T22:55:02-20:28", "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"],
)
def test_times_with_odd_offsets_are_a_400_or_an_answer_never_a_500(api, workspace, since):
    for url in ("/claim-conflicts/", "/wip-cap-denials/", "/messages/"):
        response = api.get(f"{V1}{url}", {"since": since})
        assert response.status_code in (200, 400), response.content
        assert response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize(
    "url", ["/sessions/?live=maybe", "/issues/?leased=yes", "/leases/?active=2"]
)
def test_a_boolean_filter_with_another_value_is_400(api, url):
    assert_error(api.get(f"{V1}{url}"), 400, "invalid")
