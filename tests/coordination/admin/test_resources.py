"""Resources in the admin (invariant 20 (resources are counted)): a resource is added and
edited through the services, their checks shown as the form's errors (never a 500);
its name and workspace stay; it is never deleted here. Holds are read-only, and the
force-release action releases them ``released`` through the services, naming the
person who did it."""

from unittest import mock

import pytest

from coordination.models import Event, Resource, ResourceHold
from coordination.services import resources
from tests.conftest import expire
from tests.coordination.admin_helpers import act, bar, url

pytestmark = pytest.mark.django_db


def add(operator, workspace, **fields):
    data = {"workspace": workspace.pk, "name": "db:test", "capacity": "1", "description": ""}
    data.update(fields)
    data.update(
        {  # the holds inline's management form: none added
            "holds-TOTAL_FORMS": "0",
            "holds-INITIAL_FORMS": "0",
            "holds-MIN_NUM_FORMS": "0",
            "holds-MAX_NUM_FORMS": "0",
        }
    )
    return operator.post(url(Resource, "add"), data)


def field_errors(response, name) -> list[str]:
    return list(response.context["adminform"].form.errors.get(name, []))


def test_an_operator_adds_a_resource_through_the_services(operator, workspace):
    with mock.patch.object(
        resources, "create_resource", wraps=resources.create_resource
    ) as created:
        response = add(operator, workspace, name="ports", capacity="8", description="8100-8107")
    assert response.status_code == 302, response.content.decode()[:2000]
    created.assert_called_once_with(
        workspace=workspace, name="ports", capacity=8, description="8100-8107"
    )
    resource = Resource.objects.get()
    assert (resource.name, resource.capacity, resource.description) == ("ports", 8, "8100-8107")
    page = operator.get(url(Resource)).content.decode()
    assert "ports" in page and "0 of 8" in page


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"name": "Bad Name!"}, "name", "A resource's name is 1 to 64 of a-z"),
        ({"name": "-leading"}, "name", "starting with a letter or a digit"),
        ({"capacity": "0"}, "capacity", "capacity is 1 to 10000."),
        ({"capacity": "10001"}, "capacity", "capacity is 1 to 10000."),
        ({"capacity": "-3"}, "capacity", ""),
        ({"capacity": "many"}, "capacity", ""),
    ],
)
def test_a_bad_resource_is_the_form_s_error_in_the_services_words(
    operator, workspace, fields, field, words
):
    response = add(operator, workspace, **fields)
    assert response.status_code == 200  # the form again, not a 500
    errors = field_errors(response, field)
    assert errors and words in " ".join(errors), errors
    assert len(errors) == 1, errors  # said once, not also by the model's validators
    assert not Resource.objects.exists()


def test_a_name_taken_in_the_workspace_is_refused_another_workspace_s_is_not(
    operator, workspace, other_workspace
):
    resources.create_resource(workspace=workspace, name="db:test")
    response = add(operator, workspace, name="db:test")
    assert response.status_code == 200
    assert field_errors(response, "name") == ["A resource named 'db:test' exists already."]
    assert add(operator, other_workspace, name="db:test").status_code == 302
    assert Resource.objects.count() == 2


def test_editing_changes_capacity_and_description_through_the_services(operator, workspace):
    resource = resources.create_resource(workspace=workspace, name="db:test", capacity=1)
    change = url(Resource, "change", resource.pk)
    page = operator.get(change)
    assert page.status_code == 200
    assert {"workspace", "name"} <= set(page.context["adminform"].readonly_fields)
    management = {
        "holds-TOTAL_FORMS": "0",
        "holds-INITIAL_FORMS": "0",
        "holds-MIN_NUM_FORMS": "0",
        "holds-MAX_NUM_FORMS": "0",
    }
    with mock.patch.object(
        resources, "update_resource", wraps=resources.update_resource
    ) as updated:
        response = operator.post(
            change,
            {"name": "renamed", "capacity": "3", "description": "the CI database", **management},
        )
    assert response.status_code == 302
    updated.assert_called_once_with(
        workspace=workspace, name="db:test", capacity=3, description="the CI database"
    )
    resource.refresh_from_db()
    assert (resource.name, resource.capacity, resource.description) == (
        "db:test",  # the name is fixed: the holds and the log name it
        3,
        "the CI database",
    )
    bad = operator.post(change, {"capacity": "0", "description": "", **management})
    assert bad.status_code == 200 and field_errors(bad, "capacity") == ["capacity is 1 to 10000."]
    assert Resource.objects.get().capacity == 3


def test_a_resource_is_never_deleted_here(operator, workspace):
    resource = resources.create_resource(workspace=workspace, name="db:test")
    assert operator.post(url(Resource, "delete", resource.pk), {"post": "yes"}).status_code == 403
    assert Resource.objects.exists()


def test_a_resource_s_page_shows_in_use_of_capacity_and_its_holds(
    operator, workspace, issue, make_session
):
    resources.create_resource(workspace=workspace, name="ports", capacity=2)
    live, dead = make_session("coder-1"), make_session("coder-2")
    held = resources.acquire(
        workspace=workspace, name="ports", session_id=live.pk, issue_id=issue.pk
    ).hold
    resources.acquire(workspace=workspace, name="ports", session_id=dead.pk)
    expire(dead)  # its unit is free at once
    listing = operator.get(url(Resource)).content.decode()
    assert "1 of 2" in listing
    page = operator.get(url(Resource, "change", held.resource_id)).content.decode()
    assert f"ports · hold {held.pk}" in page and "coder-1" in page and "coder-2" in page
    assert 'class="state state-live">live<' in page and 'class="state state-stale">stale<' in page
    resources.acquire(workspace=workspace, name="ports", session_id=make_session("coder-3").pk)
    full = operator.get(url(Resource)).content.decode()
    assert "2 of 2" in full and ">full<" in full


def test_force_release_of_a_hold_is_released_through_the_services_naming_the_operator(
    operator, workspace, issue, make_session
):
    resources.create_resource(workspace=workspace, name="db:test")
    session = make_session("coder-1")
    hold = resources.acquire(
        workspace=workspace, name="db:test", session_id=session.pk, issue_id=issue.pk
    ).hold
    page = operator.get(url(ResourceHold, "change", hold.pk)).content.decode()
    assert f"<h2>db:test · hold {hold.pk}</h2>" in page and "Force-release" not in page
    with mock.patch.object(resources, "force_release", wraps=resources.force_release) as forced:
        response = act(operator, ResourceHold, "force_release", [hold])
    assert forced.call_args.kwargs["operator"] == "ops"
    hold.refresh_from_db()
    assert hold.released_at is not None and hold.release_reason == "released"
    event = Event.objects.get(type="resource.released")
    assert event.data["operator"] == "ops" and event.data["reason"] == "released"
    assert event.issue_id == issue.pk
    assert bar(response) == [f"Force-released 1: hold {hold.pk} of db:test."]
    again = act(operator, ResourceHold, "force_release", [hold])
    assert bar(again) == [f"Not done (1): hold {hold.pk} of db:test: already released."]
    assert Event.objects.filter(type="resource.released").count() == 1
    # The unit is free again: the next agent gets it.
    other = make_session("coder-2")
    assert resources.acquire(workspace=workspace, name="db:test", session_id=other.pk).created


def test_holds_filter_by_holder_state_and_resource(operator, workspace, make_session):
    for name in ("db:test", "ports"):
        resources.create_resource(workspace=workspace, name=name, capacity=2)
    live, dead = make_session("coder-1"), make_session("coder-2")
    for session in (live, dead):
        resources.acquire(workspace=workspace, name="ports", session_id=session.pk)
    resources.acquire(workspace=workspace, name="db:test", session_id=live.pk)
    expire(dead)

    def listed(query: str) -> list[tuple[str, int]]:
        rows = operator.get(url(ResourceHold) + query).context["cl"].result_list
        return sorted((row.resource.name, row.session_id) for row in rows)

    assert listed("?holder=live") == [("db:test", live.pk), ("ports", live.pk)]
    assert listed("?holder=stale") == [("ports", dead.pk)]
    ports = Resource.objects.get(name="ports")
    assert listed(f"?resource__id__exact={ports.pk}") == [("ports", live.pk), ("ports", dead.pk)]
