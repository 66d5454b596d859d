"""The webhook worker against a real receiver (http.server on 127.0.0.1, allowed by
``PROJEKTOR_WEBHOOK_ALLOW_PRIVATE``): signed bodies, retries, order under failure,
deactivation after the retry window, addresses refused at delivery, isolation.

Every wait is on a condition with a generous deadline; the retry delays are scaled
down (``FIRST_RETRY_SECONDS``) where a test only needs them to pass."""

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.utils.encoders import JSONEncoder

from coordination import feed
from coordination.api.serializers.events import EventSerializer
from coordination.errors import ResourceBusy
from coordination.models import Event, EventType, Webhook, WebhookDelivery, Workspace
from coordination.services import events, messages, resources, webhooks
from coordination.webhook_worker import HttpSender, Worker, run_in_thread
from tests.api_helpers import V1
from tests.coordination.webhook_receiver import DEADLINE, Receiver, receiving, wait_until

pytestmark = pytest.mark.django_db(transaction=True)
State = WebhookDelivery.State


@pytest.fixture(autouse=True)
def _fast(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.PROJEKTOR_WEBHOOK_ALLOW_PRIVATE = True
    monkeypatch.setattr(webhooks, "FIRST_RETRY_SECONDS", 0.05)
    # No LISTEN thread of the test process on the test database: the worker polls.
    monkeypatch.setattr(feed.Wakeups, "ensure_listener", lambda self: None)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as receiver:
        yield receiver


@pytest.fixture
def worker() -> Iterator[Worker]:
    """A worker running in the background until the test ends."""
    worker = Worker(threads=4, poll=0.05)
    thread, done = run_in_thread(worker)
    yield worker
    worker.stop.set()
    feed.wakeups.wake()
    thread.join(DEADLINE)
    assert not thread.is_alive(), "the worker did not stop"
    done.result()


def emit(workspace: Workspace, count: int = 1, type: str = EventType.MESSAGE_POSTED) -> list[int]:
    """``count`` events of ``type``, committed; their ids."""
    before = Event.objects.filter(workspace=workspace).order_by("-id").values_list("id").first()
    with events.change():
        for n in range(count):
            events.record(workspace.pk, type, data={"n": n})
    after = Event.objects.filter(workspace=workspace, id__gt=before[0] if before else 0)
    return list(after.order_by("id").values_list("id", flat=True))


def hook(workspace: Workspace, receiver: Receiver, path: str = "/hook", **fields: Any) -> Webhook:
    return webhooks.create_webhook(workspace=workspace, url=receiver.url + path, **fields)


def sent_events(receiver: Receiver, path: str = "/hook") -> list[int]:
    return [request.event["id"] for request in receiver.requests(path)]


def states(webhook: Webhook) -> dict[int, str]:
    rows = WebhookDelivery.objects.filter(webhook=webhook).values_list("event_id", "state")
    return dict(rows)


def test_each_event_is_posted_as_its_json_signed_with_the_secret(
    api, workspace, receiver, make_session
):
    make_session("coder-1")
    created = api.post(f"{V1}/webhooks/", {"url": receiver.url + "/hook"}, format="json")
    assert created.status_code == 201, created.content
    secret = created.json()["secret"]
    message = messages.post_message(workspace=workspace, scope="agent:coder-1", body="Hi")
    Worker(threads=2).run(once=True)

    [request] = receiver.requests()
    event = Event.objects.select_related("project", "agent").get(data__message=message.pk)
    assert request.signed_with(secret)
    assert not request.signed_with(secret + "x")
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-projektor-event"] == "message.posted"
    expected = json.loads(json.dumps(EventSerializer(event).data, cls=JSONEncoder))
    assert request.event == expected
    listed = api.get(f"{V1}/events/").json()["events"]
    assert request.event == listed[-1]  # what /events/ shows, byte for byte in meaning
    delivery = WebhookDelivery.objects.get()
    assert request.delivery == delivery.pk
    assert (delivery.state, delivery.attempts, delivery.last_status) == (State.DELIVERED, 1, 200)
    assert delivery.delivered_at is not None


def test_only_the_chosen_types_and_only_events_after_creation_are_sent(workspace, receiver):
    emit(workspace, 2)  # before the webhook: not sent
    webhook = hook(workspace, receiver, types=[EventType.LEASE_RELEASED])
    emit(workspace, 2, EventType.MESSAGE_POSTED)
    wanted = emit(workspace, 1, EventType.LEASE_RELEASED)
    Worker(threads=2).run(once=True)
    assert sent_events(receiver) == wanted
    latest = Event.objects.filter(workspace=workspace).order_by("-id").first()
    assert latest is not None
    assert Webhook.objects.get(pk=webhook.pk).cursor == latest.pk  # past the others too


def test_resource_events_are_subscribed_to_and_sent_as_any_other(
    api, workspace, receiver, make_session
):
    """resource.acquired, .refused and .released: types a webhook may choose (the API
    checks them against EventType), sent with their data as /events/ shows it."""
    chosen = [EventType.RESOURCE_ACQUIRED, EventType.RESOURCE_REFUSED, EventType.RESOURCE_RELEASED]
    body = {"url": receiver.url + "/hook", "types": chosen}
    created = api.post(f"{V1}/webhooks/", body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["types"] == sorted(chosen)
    atlas, boreas = make_session("atlas"), make_session("boreas")
    resources.create_resource(workspace=workspace, name="db:test")
    resources.acquire(workspace=workspace, name="db:test", session_id=atlas.pk)
    with pytest.raises(ResourceBusy):
        resources.acquire(workspace=workspace, name="db:test", session_id=boreas.pk)
    resources.release(workspace=workspace, name="db:test", session_id=atlas.pk)
    messages.post_message(workspace=workspace, scope="agent:atlas", body="not chosen")
    Worker(threads=2).run(once=True)

    sent = receiver.requests()
    assert [request.headers["x-projektor-event"] for request in sent] == [
        "resource.acquired",
        "resource.refused",
        "resource.released",
    ]
    assert {request.event["data"]["resource"] for request in sent} == {"db:test"}
    assert [holder["agent"] for holder in sent[1].event["data"]["holders"]] == ["atlas"]
    assert sent[2].event["data"]["reason"] == "released"
    listed = api.get(f"{V1}/events/", {"type": ",".join(chosen)}).json()["events"]
    assert [request.event for request in sent] == listed


def test_a_refused_delivery_is_retried_with_backoff_until_it_is_taken(workspace, receiver, worker):
    webhook = hook(workspace, receiver)
    answers = iter([500, 503, 200])
    receiver.answer = lambda request: next(answers)
    [event] = emit(workspace)

    wait_until(lambda: states(webhook) == {event: State.DELIVERED}, "the third attempt")
    delivery = WebhookDelivery.objects.get()
    assert delivery.attempts == 3 and delivery.last_status == 200 and delivery.last_error == ""
    assert sent_events(receiver) == [event, event, event]


def test_the_first_retry_is_a_second_later_and_the_error_is_kept(workspace, receiver, monkeypatch):
    monkeypatch.setattr(webhooks, "FIRST_RETRY_SECONDS", 1)
    webhook = hook(workspace, receiver)
    receiver.answer = lambda request: 500
    emit(workspace)
    Worker(threads=1).run(once=True)  # the retry is not due yet: once stops there
    delivery = WebhookDelivery.objects.get(webhook=webhook)
    assert delivery.state == State.PENDING and delivery.attempts == 1
    assert delivery.last_status == 500 and delivery.last_error.startswith("HTTP 500")
    assert delivery.next_attempt_at - delivery.first_attempt_at == webhooks.backoff(1)
    assert len(receiver.requests()) == 1


def test_no_later_event_is_sent_while_an_earlier_one_is_retried(workspace, receiver, worker):
    webhook = hook(workspace, receiver)
    first, *rest = emit(workspace, 4)
    failures = {"left": 3}

    def answer(request: Any) -> int:
        if request.event["id"] == first and failures["left"]:
            failures["left"] -= 1
            return 500
        return 200

    receiver.answer = answer
    wait_until(lambda: set(states(webhook).values()) == {State.DELIVERED}, "every delivery")
    assert len(states(webhook)) == 4
    assert sent_events(receiver) == [first] * 4 + rest
    assert receiver.most_in_flight["/hook"] == 1


def test_a_hanging_receiver_does_not_hold_up_other_webhooks(workspace, receiver, worker):
    let_go = threading.Event()
    slow = hook(workspace, receiver, "/slow")
    quick = hook(workspace, receiver, "/quick")
    receiver.answer = lambda request: (
        200 if request.path == "/quick" or let_go.wait(DEADLINE) else 500
    )
    ids = emit(workspace, 5)

    wait_until(lambda: len(receiver.requests("/quick")) == 5, "the quick webhook's events")
    # On a busy machine the slow webhook's first request may not have arrived yet.
    wait_until(lambda: len(receiver.requests("/slow")) >= 1, "the slow webhook's first event")
    assert sent_events(receiver, "/quick") == ids
    # Still held, and nothing after it (a send that timed out meanwhile is retried:
    # at least once, so the same event may come twice, never a later one).
    assert set(sent_events(receiver, "/slow")) == set(ids[:1])
    let_go.set()
    wait_until(lambda: set(states(slow).values()) == {State.DELIVERED}, "the slow one")
    assert list(dict.fromkeys(sent_events(receiver, "/slow"))) == ids
    assert set(states(quick).values()) == {State.DELIVERED}


def test_no_answer_within_the_timeout_is_a_failure_that_is_retried(workspace, receiver):
    let_go = threading.Event()
    webhook = hook(workspace, receiver)
    receiver.answer = lambda request: 200 if let_go.wait(DEADLINE) else 500
    emit(workspace)
    Worker(threads=1, sender=HttpSender(timeout=0.3)).run(once=True)
    let_go.set()
    delivery = WebhookDelivery.objects.get(webhook=webhook)
    assert delivery.state == State.PENDING and delivery.attempts == 1
    assert delivery.last_status is None and "No answer within 0.3 s" in delivery.last_error


def test_failing_for_the_whole_retry_window_fails_and_deactivates_the_webhook(
    settings, workspace, receiver, worker
):
    settings.PROJEKTOR_WEBHOOK_RETRY_HOURS = 0.5 / 3600  # half a second
    webhook = hook(workspace, receiver)
    receiver.answer = lambda request: 500
    first, second = emit(workspace, 2)

    wait_until(lambda: not Webhook.objects.get(pk=webhook.pk).active, "the deactivation")
    webhook.refresh_from_db()
    delivery = WebhookDelivery.objects.get(event_id=first)
    assert delivery.state == State.FAILED and delivery.attempts >= 2
    assert f"Delivery {delivery.pk} (event {first}) failed" in webhook.deactivated_reason
    assert "HTTP 500" in webhook.deactivated_reason
    assert states(webhook)[second] == State.PENDING  # waits: nothing skips a failure
    assert set(sent_events(receiver)) == {first}

    # Turned back on, it goes on from where it stopped.
    receiver.answer = lambda request: 200
    webhooks.update_webhook(webhook=webhook, changes={"active": True})
    assert Webhook.objects.get(pk=webhook.pk).deactivated_reason == ""
    wait_until(lambda: states(webhook)[second] == State.DELIVERED, "the waiting delivery")
    assert sent_events(receiver)[-1] == second


def test_a_redelivered_delivery_is_sent_again(workspace, receiver):
    webhook = hook(workspace, receiver)
    [event] = emit(workspace)
    Worker(threads=1).run(once=True)
    waiting = webhooks.redeliver(deliveries=WebhookDelivery.objects.filter(webhook=webhook))
    assert waiting == []
    assert states(webhook) == {event: State.PENDING}
    Worker(threads=1).run(once=True)
    assert sent_events(receiver) == [event, event]
    assert states(webhook) == {event: State.DELIVERED}


def test_an_address_that_turned_private_is_refused_at_delivery(
    settings, workspace, receiver, monkeypatch
):
    settings.PROJEKTOR_WEBHOOK_ALLOW_PRIVATE = False
    answers = {"hooks.example.test": ["93.184.216.34"]}
    monkeypatch.setattr(webhooks, "resolve", lambda host, port: answers[host])
    webhook = webhooks.create_webhook(workspace=workspace, url="http://hooks.example.test/hook")
    answers["hooks.example.test"] = ["10.1.2.3"]  # DNS answers otherwise now
    emit(workspace)
    Worker(threads=1).run(once=True)

    delivery = WebhookDelivery.objects.get(webhook=webhook)
    assert delivery.state == State.PENDING and delivery.attempts == 1
    assert "10.1.2.3, a private address" in delivery.last_error
    assert receiver.requests() == []


def test_a_pruned_event_fails_its_delivery_without_deactivating(workspace, receiver):
    webhook = hook(workspace, receiver)
    [gone, kept] = emit(workspace, 2)
    webhooks.enqueue(webhook.pk)
    Event.objects.filter(pk=gone).delete()
    Worker(threads=1).run(once=True)
    assert states(webhook) == {gone: State.FAILED, kept: State.DELIVERED}
    assert Webhook.objects.get(pk=webhook.pk).active
    assert sent_events(receiver) == [kept]


def test_a_webhook_hears_only_its_own_workspace(workspace, other_workspace, receiver):
    ours = hook(workspace, receiver, "/ours")
    theirs = hook(other_workspace, receiver, "/theirs")
    mine = emit(workspace, 2)
    others = emit(other_workspace, 3)
    Worker(threads=2).run(once=True)
    assert sent_events(receiver, "/ours") == mine
    assert sent_events(receiver, "/theirs") == others
    assert set(states(ours)) == set(mine) and set(states(theirs)) == set(others)


def test_an_inactive_webhook_is_sent_nothing(workspace, receiver):
    webhook = hook(workspace, receiver, active=False)
    emit(workspace, 2)
    Worker(threads=1).run(once=True)
    assert receiver.requests() == [] and states(webhook) == {}
