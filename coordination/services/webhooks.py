"""Webhooks: the rules of the resource and of each delivery (docs/api.md, Webhooks).

Deliveries are made lazily, by the worker (``coordination.webhook_worker``): it reads
the event log after each webhook's ``cursor`` with ``feed.read`` (the cursor reader
that never skips an event) and turns the matching events into pending deliveries, so
an agent's request pays nothing for webhooks.

A webhook's deliveries go out one at a time, in id order (= event order): only its
head, the lowest pending one, is ever sent, and only once its ``next_attempt_at`` has
come. On PostgreSQL the head is claimed ``FOR UPDATE SKIP LOCKED`` and the lock is
held while it is sent: a second worker skips it (never sending it twice at once), and
cannot send the next one either, since the head is still pending. A worker killed
mid-send drops its connection, which rolls back and releases the lock: the delivery
is still pending and is sent again (at least once). On SQLite, whose one writer would
stall every agent for the length of an HTTP call, the send happens outside any
transaction and the outcome is written by a compare-and-set on ``attempts``; run one
worker process there (its threads never take the same webhook at once).
"""

import hashlib
import hmac
import ipaddress
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, Max, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from coordination import feed
from coordination.errors import InvalidInput
from coordination.models import Event, Webhook, WebhookDelivery, Workspace

TIMEOUT_SECONDS = 10.0  # a 2xx later than this is a failure
FIRST_RETRY_SECONDS = 1
MAX_RETRY_SECONDS = 600
MAX_ERROR_CHARS = 500
State = WebhookDelivery.State


# --- the address ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where a delivery goes. ``address``: the checked IP to connect to (None when private
    addresses are allowed and the name is left to the HTTP client)."""

    url: str
    host: str
    port: int
    address: str | None

    def pinned(self) -> tuple[str, dict[str, str], dict[str, Any]]:
        """The URL, headers and httpx extensions that connect to the checked address
        (so DNS cannot answer differently between the check and the connection) while
        the receiver sees its own name (Host header, TLS SNI and certificate check)."""
        if self.address is None:
            return self.url, {}, {}
        parts = urlsplit(self.url)
        ip = ipaddress.ip_address(self.address)
        netloc = f"[{ip}]" if ip.version == 6 else str(ip)
        if parts.port is not None:
            netloc += f":{parts.port}"
        host_header = parts.netloc.rpartition("@")[2]
        url = urlunsplit(parts._replace(netloc=netloc))
        extensions = {"sni_hostname": self.host} if parts.scheme == "https" else {}
        return url, {"Host": host_header}, extensions


def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (a test replaces this)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def refusal_of(address: str) -> str | None:
    """Why an address is no place to send events (None: it is public)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # no IPv6 zone
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for kind, hit in (
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("private", ip.is_private),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved or ip.is_unspecified or not ip.is_global),
    ):
        if hit:
            return kind
    return None


def check_url(url: str) -> Target:
    """``url`` as a delivery target: http(s), with a host that resolves to public
    addresses only unless ``PROJEKTOR_WEBHOOK_ALLOW_PRIVATE``. Raises InvalidInput."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise InvalidInput(f"{url[:200]!r} is not a URL.", field="url") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput("A webhook's url must be an http:// or https:// URL.", field="url")
    host = parts.hostname
    if settings.PROJEKTOR_WEBHOOK_ALLOW_PRIVATE:
        return Target(url, host, port, None)
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            addresses = resolve(host, port)
        except (OSError, UnicodeError):
            raise InvalidInput(f"{host!r} does not resolve to an address.", field="url") from None
    for address in addresses:
        kind = refusal_of(address)
        if kind is not None:
            raise InvalidInput(
                f"{host!r} resolves to {address}, a {kind} address: webhooks are sent to "
                "public addresses only (PROJEKTOR_WEBHOOK_ALLOW_PRIVATE=true allows others).",
                field="url",
            )
    if not addresses:
        raise InvalidInput(f"{host!r} does not resolve to an address.", field="url")
    return Target(url, host, port, addresses[0])


# --- the resource ----------------------------------------------------------------------------


def generate_secret() -> str:
    return secrets.token_urlsafe(32)


def create_webhook(
    *,
    workspace: Workspace,
    url: str,
    types: list[str] | None = None,
    secret: str | None = None,
    active: bool = True,
) -> Webhook:
    """A webhook that receives the events written from now on. Its ``secret`` is on the
    returned instance (the API shows it in this answer only)."""
    check_url(url)
    with transaction.atomic():
        latest = Event.objects.filter(workspace_id=workspace.pk).aggregate(last=Max("id"))["last"]
        return Webhook.objects.create(
            workspace=workspace,
            url=url,
            types=sorted(set(types or [])),
            secret=secret or generate_secret(),
            active=active,
            cursor=latest or 0,
        )


def update_webhook(*, webhook: Webhook, changes: dict[str, Any]) -> Webhook:
    """Changes the given fields. Activating clears the reason of a deactivation; the
    deliveries that waited meanwhile are then sent, in order."""
    if "url" in changes:
        check_url(changes["url"])
    if "types" in changes:
        changes["types"] = sorted(set(changes["types"]))
    if changes.get("active") is True:
        changes["deactivated_reason"] = ""
    for field, value in changes.items():
        setattr(webhook, field, value)
    if changes:  # only these columns: the worker moves ``cursor`` meanwhile
        webhook.save(update_fields=list(changes))
    return webhook


def delete_webhook(*, webhook: Webhook) -> None:
    """With its deliveries (a send in flight finishes first: it holds its row)."""
    webhook.delete()


def redeliver(*, deliveries: QuerySet[WebhookDelivery]) -> list[WebhookDelivery]:
    """Send these again, as soon as their webhook's queue reaches them (an operator's
    action). Returns the deliveries whose webhook is inactive: they wait for it."""
    rows = list(deliveries.select_related("webhook"))
    WebhookDelivery.objects.filter(pk__in=[row.pk for row in rows]).update(
        state=State.PENDING, attempts=0, next_attempt_at=None, first_attempt_at=None
    )
    return [row for row in rows if not row.webhook.active]


# --- the worker's steps ------------------------------------------------------------------------


def webhooks_with_work(*, now: datetime) -> list[int]:
    """Active webhooks with events past their cursor, or whose head is due."""
    newer = Event.objects.filter(workspace_id=OuterRef("workspace_id"), id__gt=OuterRef("cursor"))
    head = WebhookDelivery.objects.filter(webhook_id=OuterRef("pk"), state=State.PENDING).order_by(
        "id"
    )
    rows = (
        Webhook.objects.filter(active=True)
        .annotate(
            head=Subquery(head.values("id")[:1]),
            head_at=Subquery(head.values("next_attempt_at")[:1]),
        )
        .filter(
            Exists(newer)
            | (Q(head__isnull=False) & (Q(head_at__isnull=True) | Q(head_at__lte=now)))
        )
    )
    return list(rows.order_by("id").values_list("id", flat=True))


def enqueue(webhook_id: int) -> int:
    """Turn the events after the webhook's cursor into pending deliveries, and move the
    cursor past them, in one transaction; returns how many were made. Two workers never
    enqueue one webhook at once (its row, ``SKIP LOCKED``), and a delivery per event and
    webhook is unique besides."""
    with transaction.atomic():
        webhook = (
            Webhook.objects.select_for_update(skip_locked=True)
            .select_related("workspace")
            .filter(pk=webhook_id, active=True)
            .first()
        )
        if webhook is None:
            return 0
        page = feed.read(
            webhook.workspace,
            after=webhook.cursor,
            filters=feed.EventFilter(),  # every event: the cursor must pass the others too
            limit=feed.MAX_LIMIT,
        )
        made = [
            WebhookDelivery(workspace_id=webhook.workspace_id, webhook=webhook, event_id=event.pk)
            for event in page.events
            if webhook.wants(event.type)
        ]
        WebhookDelivery.objects.bulk_create(made, ignore_conflicts=True)
        if page.next != webhook.cursor:
            Webhook.objects.filter(pk=webhook.pk).update(cursor=page.next)
        return len(made)


@dataclass(frozen=True)
class Attempt:
    """What one POST came to: the status, if any answer came, and what went wrong."""

    status: int | None
    error: str = ""
    final: bool = False  # no use retrying (the event is gone)

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300 and not self.error


class Sender(Protocol):
    """The worker's side of a delivery: the event's type and body (None: the event is
    gone), and the POST itself."""

    def render(self, event_id: int) -> tuple[str, bytes] | None: ...

    def post(self, target: Target, headers: dict[str, str], body: bytes) -> Attempt: ...


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def backoff(attempts: int) -> timedelta:
    """After the ``attempts``-th failure: 1 s, doubling, at most 10 min."""
    return timedelta(seconds=min(FIRST_RETRY_SECONDS * 2 ** (attempts - 1), MAX_RETRY_SECONDS))


def retry_window() -> timedelta:
    return timedelta(hours=float(settings.PROJEKTOR_WEBHOOK_RETRY_HOURS))


@contextmanager
def claimed_head(webhook_id: int, now: datetime) -> Iterator[WebhookDelivery | None]:
    """The webhook's head delivery if it is due, claimed (see the module docstring);
    None if there is none, it is not due, or another worker holds it."""
    head = (
        WebhookDelivery.objects.select_related("webhook")
        .filter(webhook_id=webhook_id, state=State.PENDING, webhook__active=True)
        .order_by("id")
        .first()
    )
    if head is None or (head.next_attempt_at is not None and head.next_attempt_at > now):
        yield None
        return
    if connection.vendor != "postgresql":
        yield head
        return
    with transaction.atomic():  # held while sending: the lock is the claim
        # Still as read (``attempts`` moves with every outcome written), and not
        # being sent by another worker (then its lock makes us skip it).
        still = WebhookDelivery.objects.filter(
            pk=head.pk, state=State.PENDING, attempts=head.attempts
        ).select_for_update(skip_locked=True)
        yield head if still.values_list("pk").first() is not None else None


def deliver_next(webhook_id: int, *, sender: Sender) -> Attempt | None:
    """Send the webhook's head delivery if it is due; None if nothing was sent."""
    with claimed_head(webhook_id, timezone.now()) as delivery:
        if delivery is None:
            return None
        rendered = sender.render(delivery.event_id)
        if rendered is None:  # pruned (prune_events) before it could be sent
            attempt = Attempt(None, "The event was pruned before it was sent.", final=True)
            record(delivery, attempt)
            return attempt
        event_type, body = rendered
        webhook = delivery.webhook
        try:
            target = check_url(webhook.url)  # again: DNS may answer differently now
        except InvalidInput as refused:
            attempt = Attempt(None, refused.detail)
        else:
            headers = {
                "Content-Type": "application/json",
                "X-Projektor-Event": event_type,
                "X-Projektor-Delivery": str(delivery.pk),
                "X-Projektor-Signature": signature(webhook.secret, body),
            }
            attempt = sender.post(target, headers, body)
        record(delivery, attempt)
        return attempt


def record(delivery: WebhookDelivery, attempt: Attempt) -> bool:
    """Write an attempt's outcome, by compare-and-set on ``attempts`` (on SQLite the row
    was not locked while it was sent). A last failure past the retry window fails the
    delivery and deactivates its webhook, saying why. False: someone else wrote first."""
    now = timezone.now()
    first = delivery.first_attempt_at or now
    changes: dict[str, Any] = {
        "attempts": delivery.attempts + 1,
        "last_status": attempt.status,
        "last_error": attempt.error[:MAX_ERROR_CHARS],
        "first_attempt_at": first,
    }
    reason = ""
    if attempt.delivered:
        changes.update(state=State.DELIVERED, delivered_at=now, next_attempt_at=None)
    elif attempt.final:
        changes.update(state=State.FAILED, next_attempt_at=None)
    elif now - first >= retry_window():
        changes.update(state=State.FAILED, next_attempt_at=None)
        told = attempt.error or f"HTTP {attempt.status}"
        reason = (
            f"Delivery {delivery.pk} (event {delivery.event_id}) failed for "
            f"{settings.PROJEKTOR_WEBHOOK_RETRY_HOURS} h, {delivery.attempts + 1} attempts; "
            f"the last: {told}"
        )[:MAX_ERROR_CHARS]
    else:
        changes["next_attempt_at"] = now + backoff(delivery.attempts + 1)
    with transaction.atomic():  # only the deactivation's two rows need it (savepoint on PG)
        written = WebhookDelivery.objects.filter(
            pk=delivery.pk, state=State.PENDING, attempts=delivery.attempts
        ).update(**changes)
        if written and reason:
            Webhook.objects.filter(pk=delivery.webhook_id).update(
                active=False, deactivated_reason=reason
            )
    return bool(written)
