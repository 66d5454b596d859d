"""GET /events/ and GET /events/stream/: the cursor, the filters and their bounds, the
wait, pruning, isolation between workspaces, and the stream's frames and resume."""

import json
import threading
import time
from typing import Any
from urllib.parse import urlencode

import pytest
from django.db import connections

from coordination import feed
from coordination.models import MAX_ID, Event, Workspace
from coordination.services import agents, file_claims, leases, messages
from tests.api_helpers import V1, assert_error
from tests.coordination.conftest import claim_lease

WAIT_SECONDS = 30
WOKEN_WITHIN = 15  # a waiter woken by a commit answers long before its wait ends
DEADLINE = 60


def get_events(client: Any, **query: Any) -> Any:
    return client.get(f"{V1}/events/?{urlencode(query)}")


def page(client: Any, **query: Any) -> dict[str, Any]:
    response = get_events(client, **query)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("application/json")
    return response.json()


def ids(body: dict[str, Any]) -> list[int]:
    return [event["id"] for event in body["events"]]


def all_ids(workspace: Workspace) -> list[int]:
    return list(
        Event.objects.filter(workspace=workspace).order_by("id").values_list("id", flat=True)
    )


@pytest.fixture
def history(workspace, project, make_issue, make_session):
    """Two agents at work on two issues: grants, a refusal, a release, a post."""
    coder, tester = make_session("coder-1"), make_session("tester")
    one, two = make_issue(title="One"), make_issue(title="Two")
    claim_lease(workspace, one, coder)
    claim_lease(workspace, two, tester)
    file_claims.claim_files(
        workspace=workspace, issue_id=one.pk, paths=["a.py"], session_id=coder.pk
    )
    with pytest.raises(Exception):  # noqa: B017 - the refusal is what is announced
        file_claims.claim_files(
            workspace=workspace, issue_id=two.pk, paths=["a.py"], session_id=tester.pk
        )
    leases.release_issue(workspace=workspace, issue_id=two.pk, session_id=tester.pk)
    messages.post_message(workspace=workspace, scope="project:core", body="Standup at ten.")
    return {"coder": coder, "tester": tester, "one": one, "two": two}


# --- GET /events/ ---------------------------------------------------------------------

pytestmark = pytest.mark.django_db


def test_an_event_is_shown_with_every_field(api, workspace, history):
    body = page(api, type="lease.granted", agent="coder-1")
    [granted] = body["events"]
    lease = history["one"].leases.get()
    assert granted == {
        "id": granted["id"],
        "type": "lease.granted",
        "occurred_at": granted["occurred_at"],
        "project": "core",
        "issue": history["one"].pk,
        "session": history["coder"].pk,
        "agent": "coder-1",
        "data": {"lease": lease.pk, "fence": 1},
    }
    assert granted["occurred_at"].endswith("Z") or "+" in granted["occurred_at"]
    assert (body["next"], body["missed"]) == (granted["id"], False)


def test_following_next_pages_through_everything_once_in_order(api, workspace, history):
    seen: list[int] = []
    after = 0
    while True:
        body = page(api, after=after, limit=2)
        if not body["events"]:
            break
        assert len(body["events"]) <= 2 and body["next"] == body["events"][-1]["id"]
        seen += ids(body)
        after = body["next"]
    assert seen == all_ids(workspace)
    # Nothing new: next is the after that was passed.
    assert page(api, after=after) == {"events": [], "next": after, "missed": False}
    assert page(api, after=after + 1000) == {"events": [], "next": after + 1000, "missed": False}


def test_filters_by_type_list_project_issue_agent_and_session(api, workspace, history):
    every = Event.objects.filter(workspace=workspace).order_by("id")

    def expected(**filters: Any) -> list[int]:
        return list(every.filter(**filters).values_list("id", flat=True))

    leases = ["lease.granted", "lease.released"]
    assert ids(page(api, type="lease.granted, lease.released")) == expected(type__in=leases)
    assert ids(page(api, type="claims.refused")) == expected(type="claims.refused")
    assert ids(page(api, project="core")) == expected(project__key="core")
    assert ids(page(api, issue=history["two"].pk)) == expected(issue=history["two"])
    assert ids(page(api, agent="tester")) == expected(agent__name="tester")
    assert ids(page(api, session=history["coder"].pk)) == expected(session=history["coder"])
    both = page(api, agent="tester", type="lease.released", issue=history["two"].pk)
    [released] = both["events"]
    assert released["data"]["reason"] == "released" and released["session"] == history["tester"].pk
    # The refusal is the refused agent's, and names the holder in its conflicts.
    [refused] = page(api, type="claims.refused")["events"]
    assert refused["agent"] == "tester" and refused["data"]["conflicts"][0]["agent"] == "coder-1"
    # A filter that matches nothing leaves the cursor where it was.
    assert page(api, issue=history["one"].pk, type="message.posted", after=3)["next"] == 3


def test_limit_is_1_to_1000(api, workspace, history):
    assert len(page(api, limit=1)["events"]) == 1
    assert ids(page(api, limit=1000)) == all_ids(workspace)
    for bad in (0, -1, 1001, "many", "1.5"):
        body = assert_error(get_events(api, limit=bad), 400, "invalid")
        assert "limit" in body["errors"], bad


def test_wait_is_0_to_30_seconds(api, workspace, history):
    newest = all_ids(workspace)[-1]
    # A short wait with nothing new ends empty, the cursor unchanged.
    assert page(api, after=newest, wait=0.2) == {"events": [], "next": newest, "missed": False}
    # With events there already, it answers at once.
    assert ids(page(api, wait=WAIT_SECONDS, limit=1)) == all_ids(workspace)[:1]
    for bad in (-1, 30.5, 31, "soon", "nan"):
        body = assert_error(get_events(api, wait=bad), 400, "invalid")
        assert "wait" in body["errors"], bad


def test_bad_input_is_a_400_that_names_it(api, workspace, history):
    for query, field in (
        ({"type": "lease.stolen"}, "type"),
        ({"type": "lease.granted,nope"}, "type"),
        ({"type": ","}, "type"),
        ({"after": -1}, "after"),
        ({"after": MAX_ID + 1}, "after"),
        ({"after": "x"}, "after"),
        ({"issue": "one"}, "issue"),
        ({"session": "0"}, "session"),
        ({"agnet": "coder-1"}, "agnet"),  # a misspelt filter is refused, never ignored
        ({"wait": 1, "stream": 1}, "stream"),
    ):
        body = assert_error(get_events(api, **query), 400, "invalid")
        assert field in body.get("errors", {}), (query, body)
    assert "lease.stolen" in get_events(api, type="lease.stolen").json()["errors"]["type"][0]
    for query in ({"project": "nope"}, {"agent": "nobody"}):
        body = assert_error(get_events(api, **query), 400, "invalid")
        assert "does not exist" in body["detail"], body
        assert body["field"] == next(iter(query)), body


def test_another_workspace_sees_none_of_it(api, stranger_api, workspace, history, other_workspace):
    assert page(stranger_api) == {"events": [], "next": 0, "missed": False}
    # Our project and agents are unknown there, as if they did not exist.
    assert_error(get_events(stranger_api, project="core"), 400, "invalid")
    assert_error(get_events(stranger_api, agent="coder-1"), 400, "invalid")
    # By id, our issue's and session's events stay ours.
    assert page(stranger_api, issue=history["one"].pk)["events"] == []
    assert page(stranger_api, session=history["coder"].pk)["events"] == []
    # Their own event is theirs alone.
    agents.register_session(workspace=other_workspace, agent_name="spy")
    theirs = page(stranger_api)
    assert [e["type"] for e in theirs["events"]] == ["session.registered"]
    assert theirs["events"][0]["id"] not in ids(page(api, limit=1000))


def test_a_key_is_required(client, history):
    response = client.get(f"{V1}/events/")
    assert response.status_code in (401, 403)
    assert response["Content-Type"].startswith("application/json")


def test_a_cursor_older_than_what_was_pruned_is_told_it_missed_events(api, workspace, history):
    written = all_ids(workspace)
    pruned_through = written[2]
    Event.objects.filter(workspace=workspace, id__lte=pruned_through).delete()
    Workspace.objects.filter(pk=workspace.pk).update(events_pruned_through=pruned_through)

    body = page(api)
    assert body["missed"] is True and ids(body) == written[3:]
    assert page(api, after=written[1])["missed"] is True
    assert page(api, after=pruned_through)["missed"] is False
    # Everything pruned: next moves past it, and the next call misses nothing more.
    Event.objects.filter(workspace=workspace).delete()
    Workspace.objects.filter(pk=workspace.pk).update(events_pruned_through=written[-1])
    assert page(api, after=written[0]) == {"events": [], "next": written[-1], "missed": True}
    assert page(api, after=written[-1]) == {"events": [], "next": written[-1], "missed": False}


def test_reading_events_changes_nothing(api, workspace, history):
    before = all_ids(workspace)
    page(api, limit=1000)
    page(api, after=before[-1], wait=0.1)
    assert all_ids(workspace) == before


# --- the wait, in-process: a commit answers a waiting request at once -----------------


@pytest.mark.django_db(transaction=True)
def test_a_waiting_request_answers_as_soon_as_an_event_commits(
    api, workspace, project, monkeypatch
):
    newest = messages.post_message(workspace=workspace, scope="project:core", body="First")
    after = Event.objects.get(data__message=newest.pk).pk
    asleep = threading.Event()
    sleep = feed.wakeups.wait

    def noting(seen: int, *, timeout: float) -> None:
        asleep.set()
        sleep(seen, timeout=timeout)

    monkeypatch.setattr(feed.wakeups, "wait", noting)
    answer: dict[str, Any] = {}

    def waiter() -> None:
        try:
            started = time.monotonic()
            answer["response"] = get_events(api, after=after, wait=WAIT_SECONDS)
            answer["seconds"] = time.monotonic() - started
        finally:
            connections.close_all()

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    assert asleep.wait(DEADLINE), "the request never waited"
    posted = messages.post_message(workspace=workspace, scope="project:core", body="Second")
    thread.join(DEADLINE)
    assert not thread.is_alive()

    response = answer["response"]
    assert response.status_code == 200, response.content
    [event] = response.json()["events"]
    assert event["type"] == "message.posted" and event["data"]["message"] == posted.pk
    print(f"answered {answer['seconds']:.3f} s after the request")
    assert answer["seconds"] < WOKEN_WITHIN


# --- GET /events/stream/, in-process --------------------------------------------------


def parse_stream(text: str) -> list[dict[str, Any]]:
    """SSE frames as dicts: {"id", "event", "data"} for events, {"comment"} for
    comments, {"retry"} for the reconnection delay."""
    frames = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        frame: dict[str, Any] = {}
        for line in block.split("\n"):
            if line.startswith(":"):
                frame["comment"] = line[1:].strip()
            else:
                name, _, value = line.partition(": ")
                frame[name] = json.loads(value) if name == "data" else value
        frames.append(frame)
    return frames


def stream(client: Any, *, headers: dict[str, str] | None = None, **query: Any) -> Any:
    return client.get(
        f"{V1}/events/stream/?{urlencode(query)}",
        HTTP_ACCEPT="text/event-stream",
        **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in (headers or {}).items()},
    )


def read_stream(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    assert response["Cache-Control"] == "no-cache"
    return parse_stream(b"".join(response.streaming_content).decode())


@pytest.fixture
def short_streams(settings):
    settings.PROJEKTOR_EVENT_STREAM_SECONDS = 1
    settings.PROJEKTOR_EVENT_STREAM_KEEPALIVE_SECONDS = 1


def test_the_stream_sends_each_event_as_a_frame_then_ends(api, workspace, history, short_streams):
    frames = read_stream(stream(api))
    assert frames[0] == {"retry": "1000"}
    shown = [frame for frame in frames if "id" in frame]
    assert [int(frame["id"]) for frame in shown] == all_ids(workspace)
    listed = page(api, limit=1000)["events"]
    assert [frame["data"] for frame in shown] == listed
    assert [frame["event"] for frame in shown] == [event["type"] for event in listed]
    assert {"comment": "keep-alive"} in frames


def test_the_stream_resumes_after_last_event_id_with_filters(
    api, workspace, history, short_streams
):
    every = all_ids(workspace)
    resumed = read_stream(stream(api, headers={"Last-Event-ID": str(every[2])}, after=every[0]))
    assert [int(f["id"]) for f in resumed if "id" in f] == every[3:]  # the header wins
    after = read_stream(stream(api, after=every[-2]))
    assert [int(f["id"]) for f in after if "id" in f] == every[-1:]
    filtered = read_stream(stream(api, type="lease.granted", agent="tester"))
    assert [f["event"] for f in filtered if "id" in f] == ["lease.granted"]
    assert [f["data"]["agent"] for f in filtered if "id" in f] == ["tester"]
    quiet = read_stream(stream(api, headers={"Last-Event-ID": str(every[-1])}))
    assert not [f for f in quiet if "id" in f] and {"comment": "keep-alive"} in quiet


def test_the_stream_tells_a_cursor_before_the_pruned_events(api, workspace, history, short_streams):
    every = all_ids(workspace)
    Event.objects.filter(workspace=workspace).delete()
    Workspace.objects.filter(pk=workspace.pk).update(events_pruned_through=every[-1])
    frames = read_stream(stream(api, after=every[0]))
    [missed] = [frame for frame in frames if frame.get("event") == "missed"]
    assert missed == {
        "id": str(every[-1]),
        "event": "missed",
        "data": {"after": every[0], "next": every[-1]},
    }


def test_the_stream_refuses_bad_input_as_json(api, stranger_api, history):
    for value in ("abc", "-1", "1.5", str(MAX_ID + 1)):
        response = stream(api, headers={"Last-Event-ID": value})
        body = assert_error(response, 400, "invalid")
        assert "Last-Event-ID" in body["detail"], value
    for query in ({"type": "nope"}, {"limit": 5}, {"wait": 1}, {"project": "nope"}):
        assert_error(stream(api, **query), 400, "invalid")
    assert_error(stream(stranger_api, agent="coder-1"), 400, "invalid")


def test_another_workspaces_stream_shows_none_of_ours(stranger_api, history, short_streams):
    frames = read_stream(stream(stranger_api))
    assert not [frame for frame in frames if "id" in frame]


def test_a_member_s_browser_reads_the_log_and_the_stream_with_its_session(
    client, alice, workspace, other_workspace, history, short_streams
):
    # EventSource sends no headers of its own: the session cookie and ?workspace= it is.
    client.force_login(alice)
    listed = client.get(f"{V1}/events/", {"workspace": workspace.slug, "limit": 1000})
    assert listed.status_code == 200, listed.content
    assert ids(listed.json()) == all_ids(workspace)
    frames = read_stream(stream(client, workspace=workspace.slug))
    assert [int(frame["id"]) for frame in frames if "id" in frame] == all_ids(workspace)
    assert_error(stream(client, workspace=other_workspace.slug), 404, "not_found")
    assert_error(stream(client), 400, "invalid")  # which workspace, then?
