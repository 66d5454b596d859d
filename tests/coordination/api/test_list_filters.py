"""Every filtered list reads its query through its selector's FilterSet: a bad value is
the same 400 everywhere, naming the parameter, and a good one filters."""

import pytest

from coordination.api import urls  # noqa: F401  (imports every viewset)
from coordination.api.base import FilteredListViewSet, WorkspaceViewSet
from coordination.models import Agent, AgentSession
from tests.api_helpers import V1

pytestmark = pytest.mark.django_db

BAD_QUERIES = [
    ("/sessions/", {"live": "maybe"}, "live", "Use true or false."),
    (
        "/issues/",
        {"status": "nope"},
        "status",
        "Select a valid choice. nope is not one of the available choices.",
    ),
    ("/issues/", {"leased": "yes"}, "leased", "Use true or false."),
    ("/leases/", {"session": "0"}, "session", "Ensure this value is greater than or equal to 1."),
    ("/wip-cap-denials/", {"since": "yesterday"}, "since", "Enter a valid date/time."),
    (
        "/keys/",
        {"kind": "root"},
        "kind",
        "Select a valid choice. root is not one of the available choices.",
    ),
    (
        "/runs/",
        {"error": "oops"},
        "error",
        "Select a valid choice. oops is not one of the available choices.",
    ),
    ("/file-claims/", {"active": "2"}, "active", "Use true or false."),
    ("/claim-conflicts/", {"forced": "perhaps"}, "forced", "Use true or false."),
    ("/messages/", {"since": "soon"}, "since", "Enter a valid date/time."),
]


@pytest.mark.parametrize(("url", "query", "field", "message"), BAD_QUERIES)
def test_a_bad_filter_value_is_a_400_naming_the_parameter(api, url, query, field, message):
    response = api.get(f"{V1}{url}", query)
    assert response.status_code == 400, response.content
    assert response.json() == {
        "code": "invalid",
        "detail": f"{field}: {message}",
        "errors": {field: [message]},
    }


def test_a_filter_value_filters_the_list(api, workspace):
    for name, role in (("ada", "engineer"), ("bob", "reviewer")):
        agent = Agent.objects.create(workspace=workspace, name=name, role=role)
        AgentSession.objects.create(workspace=workspace, agent=agent)
    response = api.get(f"{V1}/sessions/", {"role": "reviewer"})
    assert response.status_code == 200, response.content
    assert [row["agent"] for row in response.json()["results"]] == ["bob"]


def subclasses(cls: type) -> list[type]:
    return [sub for direct in cls.__subclasses__() for sub in [direct, *subclasses(direct)]]


def test_a_viewset_that_documents_filters_has_a_list_selector_that_reads_them():
    # The filter backend only documents a FilterSet; a list that names one without a
    # list selector would show filters it ignores.
    views = subclasses(WorkspaceViewSet)
    named = [view for view in views if getattr(view, "filterset_class", None)]
    assert len(named) >= 8
    assert [view for view in named if not issubclass(view, FilteredListViewSet)] == []
    assert all(callable(getattr(view, "list_selector", None)) for view in named)
