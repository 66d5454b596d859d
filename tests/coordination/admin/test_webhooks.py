"""The webhooks' admin: added and edited through the service (the address check, the
secret shown once, never listed), and the deliveries read-only with "redeliver"."""

import pytest

from coordination.models import Event, Webhook, WebhookDelivery
from coordination.services import webhooks
from tests.coordination.admin_helpers import act, bar, url

pytestmark = pytest.mark.django_db


@pytest.fixture
def webhook(workspace, settings):
    settings.PROJEKTOR_WEBHOOK_ALLOW_PRIVATE = True
    return webhooks.create_webhook(workspace=workspace, url="http://127.0.0.1:9/hook")


def deliveries(webhook, states):
    rows = []
    for state in states:
        event = Event.objects.create(workspace=webhook.workspace, type="lease.released")
        rows.append(
            WebhookDelivery.objects.create(
                workspace=webhook.workspace, webhook=webhook, event=event, state=state, attempts=3
            )
        )
    return rows


def test_the_list_shows_url_state_reason_and_types_but_never_the_secret(operator, webhook):
    Webhook.objects.filter(pk=webhook.pk).update(
        active=False, deactivated_reason="Delivery 4 failed for 24 h", types=["run.finished"]
    )
    page = operator.get(url(Webhook)).content.decode()
    assert "http://127.0.0.1:9/hook" in page and "Delivery 4 failed for 24 h" in page
    assert "run.finished" in page
    change = operator.get(url(Webhook, "change", webhook.pk)).content.decode()
    assert webhook.secret not in page and webhook.secret not in change
    assert "Delivery 4 failed for 24 h" in change


def test_adding_checks_the_address_and_shows_the_secret_once(operator, workspace, settings):
    refused = operator.post(
        url(Webhook, "add"), {"workspace": workspace.pk, "url": "http://10.0.0.1/", "active": "on"}
    )
    assert refused.status_code == 200 and "a private address" in refused.content.decode()
    assert not Webhook.objects.exists()
    settings.PROJEKTOR_WEBHOOK_ALLOW_PRIVATE = True
    added = operator.post(
        url(Webhook, "add"),
        {"workspace": workspace.pk, "url": "http://127.0.0.1:9/in", "types": ["lease.released"]},
        follow=True,
    )
    webhook = Webhook.objects.get()
    assert webhook.types == ["lease.released"] and webhook.active is False
    assert any(webhook.secret in text for text in bar(added))


def test_turning_a_webhook_back_on_clears_its_reason(operator, webhook):
    Webhook.objects.filter(pk=webhook.pk).update(active=False, deactivated_reason="It failed.")
    operator.post(
        url(Webhook, "change", webhook.pk),
        {"url": webhook.url, "active": "on"},
    )
    webhook.refresh_from_db()
    assert webhook.active and webhook.deactivated_reason == ""


def test_deliveries_are_read_only(operator, webhook):
    [delivery] = deliveries(webhook, ["failed"])
    assert operator.get(url(WebhookDelivery, "add")).status_code == 403
    assert operator.post(url(WebhookDelivery, "change", delivery.pk), {}).status_code == 403
    page = operator.get(url(WebhookDelivery)).content.decode()
    assert f"{delivery.event_id} · lease.released" in page


def test_redeliver_sends_the_chosen_deliveries_again(operator, webhook):
    failed, delivered = deliveries(webhook, ["failed", "delivered"])
    response = act(operator, WebhookDelivery, "redeliver", [failed, delivered])
    assert any("Redelivering 2" in text for text in bar(response))
    for row in (failed, delivered):
        row.refresh_from_db()
        assert (row.state, row.attempts, row.next_attempt_at) == ("pending", 0, None)
    Webhook.objects.filter(pk=webhook.pk).update(active=False)
    again = act(operator, WebhookDelivery, "redeliver", [failed])
    assert any("inactive webhook" in text for text in bar(again))
