"""The rules of webhooks that need no receiver: the address check, the signature, the
backoff, the pinned target, and what the resource's changes keep."""

import hashlib
import hmac
from typing import Any

import pytest

from coordination.errors import InvalidInput
from coordination.models import Event, EventType, Webhook
from coordination.services import events, webhooks


@pytest.mark.parametrize(
    "address, kind",
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.5", "private"),
        ("172.16.3.4", "private"),
        ("192.168.1.1", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.169.254", "link-local"),  # the cloud metadata address
        ("fe80::1", "link-local"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("224.0.0.1", "multicast"),
    ],
)
def test_addresses_that_are_not_public_are_refused(address, kind):
    assert webhooks.refusal_of(address) == kind


@pytest.mark.parametrize("address", ["0.0.0.0", "100.64.0.1", "192.0.2.1", "::"])
def test_unspecified_shared_and_documentation_addresses_are_refused(address):
    assert webhooks.refusal_of(address) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"])
def test_public_addresses_pass(address):
    assert webhooks.refusal_of(address) is None


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/x",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "example.com/hook",
        "http://",
        "http://[::1/x",
    ],
)
def test_only_http_and_https_urls_with_a_host_are_targets(url):
    with pytest.raises(InvalidInput) as refused:
        webhooks.check_url(url)
    assert refused.value.extra["field"] == "url"


def test_a_name_is_refused_if_any_address_it_resolves_to_is_private(monkeypatch):
    monkeypatch.setattr(webhooks, "resolve", lambda host, port: ["93.184.216.34", "10.0.0.7"])
    with pytest.raises(InvalidInput, match="10.0.0.7, a private address"):
        webhooks.check_url("https://hooks.example.test/in")


def test_a_name_that_does_not_resolve_is_refused(monkeypatch):
    def fail(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    monkeypatch.setattr(webhooks, "resolve", fail)
    with pytest.raises(InvalidInput, match="does not resolve"):
        webhooks.check_url("https://nowhere.example.test/")


def test_localhost_is_refused_by_what_it_resolves_to():
    with pytest.raises(InvalidInput, match="loopback"):
        webhooks.check_url("http://localhost:8000/hook")


def test_allowing_private_addresses_lets_them_through_unresolved(settings):
    settings.PROJEKTOR_WEBHOOK_ALLOW_PRIVATE = True
    target = webhooks.check_url("http://127.0.0.1:9000/hook")
    assert target.address is None
    assert target.pinned() == ("http://127.0.0.1:9000/hook", {}, {})


def test_the_target_connects_to_the_checked_address_under_the_receivers_name(monkeypatch):
    monkeypatch.setattr(webhooks, "resolve", lambda host, port: ["93.184.216.34"])
    url, headers, extensions = webhooks.check_url("https://hooks.example.test:8443/in?x=1").pinned()
    assert url == "https://93.184.216.34:8443/in?x=1"
    assert headers == {"Host": "hooks.example.test:8443"}
    assert extensions == {"sni_hostname": "hooks.example.test"}
    monkeypatch.setattr(webhooks, "resolve", lambda host, port: ["2606:4700::6810:84e5"])
    url, headers, extensions = webhooks.check_url("http://hooks.example.test/in").pinned()
    assert url == "http://[2606:4700::6810:84e5]/in"
    assert headers == {"Host": "hooks.example.test"} and extensions == {}


def test_the_signature_is_the_hex_hmac_sha256_of_the_body():
    body = b'{"id":1}'
    expected = hmac.new(b"k" * 20, body, hashlib.sha256).hexdigest()
    assert webhooks.signature("k" * 20, body) == f"sha256={expected}"


def test_backoff_doubles_from_one_second_to_at_most_ten_minutes():
    seconds = [webhooks.backoff(n).total_seconds() for n in range(1, 13)]
    assert seconds == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600]


@pytest.fixture
def allowed(settings: Any) -> None:
    settings.PROJEKTOR_WEBHOOK_ALLOW_PRIVATE = True


@pytest.mark.django_db
def test_a_new_webhook_starts_after_the_last_event_with_a_generated_secret(workspace, allowed):
    with events.change():
        events.record(workspace.pk, EventType.MESSAGE_POSTED)
    last = Event.objects.get()
    made = webhooks.create_webhook(
        workspace=workspace, url="http://127.0.0.1/h", types=["lease.released"] * 2
    )
    assert made.cursor == last.pk and made.types == ["lease.released"]
    assert len(made.secret) >= 40
    other = webhooks.create_webhook(workspace=workspace, url="http://127.0.0.1/h")
    assert other.secret != made.secret


@pytest.mark.django_db
def test_an_update_leaves_the_cursor_the_worker_moved(workspace, allowed):
    webhook = webhooks.create_webhook(workspace=workspace, url="http://127.0.0.1/h")
    Webhook.objects.filter(pk=webhook.pk).update(cursor=42, active=False, deactivated_reason="x")
    webhooks.update_webhook(webhook=webhook, changes={"active": True, "types": []})
    webhook.refresh_from_db()
    assert (webhook.cursor, webhook.active, webhook.deactivated_reason) == (42, True, "")
