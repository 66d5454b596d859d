"""/webhooks/: the resource (the secret shown once, addresses refused, isolation) and
each webhook's deliveries."""

from typing import Any

import pytest

from coordination.models import Event, EventType, Webhook, WebhookDelivery
from coordination.services import events, webhooks
from tests.api_helpers import V1, assert_error, post

pytestmark = pytest.mark.django_db
URL = "https://hooks.example.test/projektor"


@pytest.fixture(autouse=True)
def _public_dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Names resolve without a network: hooks.example.test is public, the others not."""
    answers = {
        "hooks.example.test": ["93.184.216.34"],
        "intranet.example.test": ["10.20.30.40"],
        "localhost": ["127.0.0.1", "::1"],
    }
    monkeypatch.setattr(webhooks, "resolve", lambda host, port: answers[host])
    return answers


def test_a_created_webhook_shows_its_generated_secret_once(api):
    created = post(api, "/webhooks/", {"url": URL, "types": ["lease.released"]})
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["url"] == URL and body["types"] == ["lease.released"]
    assert body["active"] is True and body["deactivated_reason"] == ""
    webhook = Webhook.objects.get()
    assert body["secret"] == webhook.secret and len(webhook.secret) >= 40
    shown = api.get(f"{V1}/webhooks/{webhook.pk}/").json()
    listed = api.get(f"{V1}/webhooks/").json()["results"]
    assert "secret" not in shown and all("secret" not in row for row in listed)
    assert shown == {key: value for key, value in body.items() if key != "secret"}


def test_a_given_secret_is_kept_and_types_default_to_all(api):
    created = post(api, "/webhooks/", {"url": URL, "secret": "s" * 20, "active": False})
    assert created.status_code == 201, created.content
    assert created.json()["secret"] == "s" * 20 and created.json()["types"] == []
    assert Webhook.objects.get().active is False


@pytest.mark.parametrize(
    "body, field",
    [
        ({"url": "ftp://hooks.example.test/x"}, "url"),
        ({"url": "hooks.example.test/x"}, "url"),
        ({"url": "http://127.0.0.1:8080/x"}, "url"),
        ({"url": "http://localhost/x"}, "url"),
        ({"url": "http://[::1]/x"}, "url"),
        ({"url": "http://10.0.0.1/x"}, "url"),
        ({"url": "http://192.168.0.10/x"}, "url"),
        ({"url": "http://169.254.169.254/latest/meta-data"}, "url"),
        ({"url": "http://[fe80::1]/x"}, "url"),
        ({"url": "http://intranet.example.test/x"}, "url"),
        ({"url": URL, "types": ["lease.stolen"]}, "types"),
        ({"url": URL, "secret": "short"}, "secret"),
        ({"url": URL, "active": "yes"}, "active"),
        ({"url": URL, "colour": "red"}, "colour"),
        ({"types": ["lease.released"]}, "url"),
    ],
)
def test_a_bad_webhook_is_a_400_that_changes_nothing(api, body, field):
    refused = assert_error(post(api, "/webhooks/", body), 400, "invalid")
    assert field in refused.get("errors", {}) or refused.get("field") == field, refused
    assert not Webhook.objects.exists()


def test_private_addresses_are_allowed_when_the_setting_says_so(api, settings):
    settings.PROJEKTOR_WEBHOOK_ALLOW_PRIVATE = True
    created = post(api, "/webhooks/", {"url": "http://127.0.0.1:8080/x"})
    assert created.status_code == 201, created.content


def test_patch_changes_the_given_fields_and_activating_clears_the_reason(api, workspace):
    webhook = webhooks.create_webhook(workspace=workspace, url=URL)
    Webhook.objects.filter(pk=webhook.pk).update(active=False, deactivated_reason="It failed.")
    changed = api.patch(
        f"{V1}/webhooks/{webhook.pk}/", {"active": True, "types": ["run.finished"]}, format="json"
    )
    assert changed.status_code == 200, changed.content
    assert changed.json()["active"] is True and changed.json()["deactivated_reason"] == ""
    assert changed.json()["types"] == ["run.finished"] and "secret" not in changed.json()
    assert Webhook.objects.get().url == URL
    refused = api.patch(f"{V1}/webhooks/{webhook.pk}/", {"url": "http://10.0.0.1/"}, format="json")
    assert_error(refused, 400, "invalid")
    assert Webhook.objects.get().url == URL
    rotated = api.patch(f"{V1}/webhooks/{webhook.pk}/", {"secret": "n" * 16}, format="json")
    assert rotated.status_code == 200 and "secret" not in rotated.json()
    assert Webhook.objects.get().secret == "n" * 16


def test_delete_removes_the_webhook_and_its_deliveries(api, workspace):
    webhook = webhooks.create_webhook(workspace=workspace, url=URL)
    record_events(workspace, 2)
    webhooks.enqueue(webhook.pk)
    assert WebhookDelivery.objects.count() == 2
    assert api.delete(f"{V1}/webhooks/{webhook.pk}/").status_code == 204
    assert not Webhook.objects.exists() and not WebhookDelivery.objects.exists()
    assert_error(api.delete(f"{V1}/webhooks/{webhook.pk}/"), 404, "not_found")


def record_events(workspace: Any, count: int) -> list[Event]:
    with events.change():
        for n in range(count):
            events.record(workspace.pk, EventType.LEASE_RELEASED, data={"n": n})
    return list(Event.objects.filter(workspace=workspace).order_by("id"))


def test_deliveries_are_listed_newest_first_and_by_state(api, workspace):
    webhook = webhooks.create_webhook(workspace=workspace, url=URL)
    first, second = record_events(workspace, 2)
    webhooks.enqueue(webhook.pk)
    WebhookDelivery.objects.filter(event_id=first.pk).update(
        state="delivered", attempts=1, last_status=200
    )
    listed = api.get(f"{V1}/webhooks/{webhook.pk}/deliveries/")
    assert listed.status_code == 200, listed.content
    rows = listed.json()["results"]
    assert [row["event"] for row in rows] == [second.pk, first.pk]
    assert rows[1]["state"] == "delivered" and rows[1]["last_status"] == 200
    assert rows[0]["type"] == "lease.released" and rows[0]["attempts"] == 0
    assert set(rows[0]) == {
        "id", "event", "type", "state", "attempts", "last_status", "last_error",
        "next_attempt_at", "delivered_at", "created_at",
    }  # fmt: skip
    pending = api.get(f"{V1}/webhooks/{webhook.pk}/deliveries/?state=pending").json()
    assert [row["event"] for row in pending["results"]] == [second.pk]
    bad = api.get(f"{V1}/webhooks/{webhook.pk}/deliveries/?state=lost")
    assert_error(bad, 400, "invalid")


def test_another_workspaces_webhooks_are_not_found(api, stranger_api, other_workspace):
    theirs = webhooks.create_webhook(workspace=other_workspace, url=URL)
    for call in (
        api.get(f"{V1}/webhooks/{theirs.pk}/"),
        api.get(f"{V1}/webhooks/{theirs.pk}/deliveries/"),
        api.patch(f"{V1}/webhooks/{theirs.pk}/", {"active": False}, format="json"),
        api.delete(f"{V1}/webhooks/{theirs.pk}/"),
    ):
        assert_error(call, 404, "not_found")
    assert api.get(f"{V1}/webhooks/").json()["count"] == 0
    assert stranger_api.get(f"{V1}/webhooks/").json()["count"] == 1
    assert Webhook.objects.get().active is True


def test_webhooks_need_a_key(client):
    assert_error(client.get(f"{V1}/webhooks/"), 401, "unauthenticated")
