"""Messages: scopes that must exist, body bounds, the signing session, list filters."""

from urllib.parse import urlencode

import pytest

from coordination.models import Message, Project
from tests.api_helpers import V1, assert_error, post

pytestmark = pytest.mark.django_db


def post_message(client, body):
    return post(client, "/messages/", body)


def test_post_to_each_scope_kind(api, project, issue, make_session):
    session = make_session("writer")
    for scope in (f"issue:{issue.pk}", "agent:writer", f"project:{project.key}"):
        response = post_message(
            api, {"scope": scope, "body": "Taking src/a.py next.", "session": session.pk}
        )
        assert response.status_code == 201, response.content
        body = response.json()
        assert body == {
            "id": body["id"],
            "scope": scope,
            "body": "Taking src/a.py next.",
            "session": session.pk,
            "agent": "writer",
            "created_at": body["created_at"],
        }
    assert sorted(Message.objects.values_list("scope", flat=True)) == sorted(
        [f"issue:{issue.pk}", "agent:writer", "project:core"]
    )


def test_post_without_a_session_is_unsigned(api, issue):
    response = post_message(api, {"scope": f"issue:{issue.pk}", "body": "From the operator."})
    assert response.status_code == 201, response.content
    assert response.json()["session"] is None and response.json()["agent"] is None
    assert Message.objects.get().agent_id is None


def test_an_agent_name_may_contain_a_colon(api, make_session):
    make_session("team:alpha")
    assert post_message(api, {"scope": "agent:team:alpha", "body": "hi"}).status_code == 201
    assert Message.objects.get().scope == "agent:team:alpha"


@pytest.mark.parametrize(
    "scope",
    [
        "",
        "issue",
        "issue:",
        "ticket:1",
        "ISSUE:1",
        "issue:abc",
        "issue:-1",
        "issue:007",
        "issue:99999999999999999999",
        "issue:999999",
        "agent:nobody",
        "project:nope",
        "agent:",
    ],
)
def test_a_bad_scope_or_an_unknown_target_is_400(api, issue, make_session, scope):
    make_session("somebody")
    assert_error(post_message(api, {"scope": scope, "body": "hello"}), 400, "invalid")
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"body": ""},
        {"body": "x" * 10_001},
        {"body": "nul \x00 inside"},
        {"body": 5},
        {"body": ["text"]},
        {},
        {"body": "ok", "session": 999999},
        {"body": "ok", "session": "me"},
        {"body": "ok", "session": True},
    ],
)
def test_bad_message_bodies_are_400(api, issue, body):
    assert_error(post_message(api, {"scope": f"issue:{issue.pk}", **body}), 400, "invalid")
    assert not Message.objects.exists()


def test_body_bounds_are_1_and_10000_characters(api, issue):
    for text in ("x", "é" * 10_000, "  padded  "):
        response = post_message(api, {"scope": f"issue:{issue.pk}", "body": text})
        assert response.status_code == 201, response.content
    assert sorted(len(b) for b in Message.objects.values_list("body", flat=True)) == [
        1,
        10,
        10_000,
    ]


def test_a_body_that_is_not_unicode_text_is_400_not_500(api, issue):
    raw = '{"scope": "issue:ID", "body": "bad \\ud800"}'.replace("ID", str(issue.pk))
    response = api.post(f"{V1}/messages/", raw, content_type="application/json")
    assert_error(response, 400, "invalid")
    assert not Message.objects.exists()


def test_list_filters_by_scope_and_since(api, make_issue):
    first, second = make_issue(), make_issue()
    post_message(api, {"scope": f"issue:{first.pk}", "body": "one"})
    post_message(api, {"scope": f"issue:{second.pk}", "body": "two"})
    post_message(api, {"scope": f"issue:{first.pk}", "body": "three"})

    def bodies(query):
        response = api.get(f"{V1}/messages/{query}")
        assert response.status_code == 200, response.content
        return [row["body"] for row in response.json()["results"]]

    assert bodies("") == ["three", "two", "one"]
    assert bodies(f"?scope=issue:{first.pk}") == ["three", "one"]
    assert bodies("?scope=issue:999999") == []

    last = Message.objects.get(body="three").created_at
    since = urlencode({"since": last.isoformat()})
    assert bodies(f"?{since}") == ["three"]
    assert_error(api.get(f"{V1}/messages/?since=yesterday"), 400, "invalid")


def test_messages_are_scoped_to_the_workspace(
    api, stranger_api, other_workspace, issue, make_session
):
    session = make_session("ours")
    post_message(api, {"scope": f"issue:{issue.pk}", "body": "ours"})
    Project.objects.create(workspace=other_workspace, key="theirs", name="Theirs")

    # Our issue, agent and project do not exist for their key; our session is unknown.
    for scope in (f"issue:{issue.pk}", "agent:ours", "project:core"):
        assert_error(post_message(stranger_api, {"scope": scope, "body": "spy"}), 400, "invalid")
    assert_error(
        post_message(stranger_api, {"scope": "project:theirs", "body": "x", "session": session.pk}),
        400,
        "invalid",
    )
    assert stranger_api.get(f"{V1}/messages/").json()["count"] == 0
    assert stranger_api.get(f"{V1}/messages/?scope=issue:{issue.pk}").json()["count"] == 0
    assert list(Message.objects.values_list("body", flat=True)) == ["ours"]
