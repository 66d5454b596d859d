"""Progress beside liveness (invariant 17 (stalled is derived)): stamped by every change a session
makes and by POST /sessions/{id}/progress/, never by a heartbeat; stalled derived when read."""

from datetime import timedelta

import pytest
from django.utils import timezone

from coordination.models import AgentSession
from tests.api_helpers import V1, assert_error, post
from tests.conftest import expire

pytestmark = pytest.mark.django_db

STALL_AFTER = 60


@pytest.fixture(autouse=True)
def _short_stall(settings):
    settings.PROJEKTOR_STALL_AFTER_SECONDS = STALL_AFTER
    # Off: their counter is a statement of its own on PostgreSQL's database cache.
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"key": None, "anon": None},
    }


def set_back(session: AgentSession, seconds: int = STALL_AFTER + 5) -> None:
    """Move the session's last progress back ``seconds``: past the threshold by default."""
    stamp = timezone.now() - timedelta(seconds=seconds)
    AgentSession.objects.filter(pk=session.pk).update(last_progress_at=stamp)


def progress_of(session: AgentSession):
    return AgentSession.objects.values_list("last_progress_at", flat=True).get(pk=session.pk)


def shown(api, session: AgentSession) -> dict:
    response = api.get(f"{V1}/sessions/{session.pk}/")
    assert response.status_code == 200
    return response.json()


def test_a_new_session_has_made_progress_and_states_it(api, make_session):
    body = post(api, "/sessions/", {"agent": "coder-1"}).json()
    assert body["last_progress_at"] and body["stalled"] is False
    assert body["ttl_seconds"] == 120 and body["progress_note"] == ""


def test_a_heartbeat_never_counts_as_progress(api, make_session):
    session = make_session()
    set_back(session)
    before = progress_of(session)
    beat = post(api, f"/sessions/{session.pk}/heartbeat/").json()
    assert progress_of(session) == before
    assert beat["live"] is True and beat["stalled"] is True


def test_reported_progress_ends_the_stall_and_shows_its_note(api, make_session):
    session = make_session()
    set_back(session)
    assert shown(api, session)["stalled"] is True
    response = post(api, f"/sessions/{session.pk}/progress/", {"note": "tests pass"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["stalled"] is False and body["progress_note"] == "tests pass"
    assert progress_of(session) > timezone.now() - timedelta(seconds=STALL_AFTER)


def test_progress_does_not_revive_a_lapsed_session(api, make_session):
    session = make_session()
    expire(session)
    body = post(api, f"/sessions/{session.pk}/progress/").json()
    assert body["live"] is False and body["stalled"] is False


def test_a_dead_session_is_not_stalled(api, make_session):
    session = make_session()
    set_back(session)
    expire(session)
    assert shown(api, session)["stalled"] is False


@pytest.mark.parametrize(
    "body", [{"note": "x" * 501}, {"note": 5}, {"note": ["x"]}, {"note": "a\x00b"}]
)
def test_bad_progress_is_400_and_changes_nothing(api, make_session, body):
    session = make_session()
    set_back(session)
    before = progress_of(session)
    assert_error(post(api, f"/sessions/{session.pk}/progress/", body), 400, "invalid")
    assert progress_of(session) == before


def test_progress_of_an_ended_or_unknown_session_is_refused(api, make_session):
    session = make_session()
    post(api, f"/sessions/{session.pk}/end/")
    before = progress_of(session)
    assert_error(post(api, f"/sessions/{session.pk}/progress/"), 409, "session_ended")
    assert progress_of(session) == before
    assert_error(post(api, "/sessions/424242/progress/"), 404, "not_found")


def test_the_stalled_filter_lists_the_stalled_only(api, make_session):
    stalled, moving, dead = make_session("a"), make_session("b"), make_session("c")
    set_back(stalled)
    set_back(dead)
    expire(dead)
    listed = api.get(f"{V1}/sessions/?stalled=true").json()
    assert [row["id"] for row in listed["results"]] == [stalled.pk]
    others = api.get(f"{V1}/sessions/?stalled=false").json()
    assert sorted(row["id"] for row in others["results"]) == sorted([moving.pk, dead.pk])
    assert_error(api.get(f"{V1}/sessions/?stalled=maybe"), 400, "invalid")


@pytest.mark.parametrize("rows", [2, 10])
def test_the_stalled_list_costs_the_same_however_many_sessions(
    api, make_session, rows, django_assert_num_queries
):
    for i in range(rows):
        set_back(make_session(f"agent-{i}"))
    for i in range(rows):
        make_session(f"moving-{i}")
    # The key's lookup, the count and the page.
    with django_assert_num_queries(3):
        response = api.get(f"{V1}/sessions/?stalled=true")
    assert response.json()["count"] == rows


def test_every_change_a_session_makes_is_progress(api, issue, make_session):
    session = make_session()

    def moved(call) -> bool:
        set_back(session)
        before = progress_of(session)
        response = call()
        assert response.status_code < 300, response.content
        return progress_of(session) > before

    assert moved(lambda: post(api, f"/issues/{issue.pk}/claim/", {"session": session.pk}))
    assert moved(
        lambda: post(
            api, "/messages/", {"scope": "project:core", "body": "hi", "session": session.pk}
        )
    )
    # A transition made with the key names no session: the lease's holder moved.
    assert moved(lambda: post(api, f"/issues/{issue.pk}/transition/", {"to": "todo"}))
    assert moved(lambda: post(api, f"/issues/{issue.pk}/release/", {"session": session.pk}))


def test_what_others_do_to_a_session_is_not_its_progress(api, issue, make_session):
    holder, other = make_session("holder"), make_session("other")
    post(api, f"/issues/{issue.pk}/claim/", {"session": holder.pk})
    set_back(holder)
    expire(holder)
    before = progress_of(holder)
    assert post(api, f"/issues/{issue.pk}/claim/", {"session": other.pk}).status_code == 201
    assert progress_of(holder) == before  # its lease was reclaimed, not released by it
