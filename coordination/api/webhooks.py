"""Webhooks: the resource, and each webhook's deliveries (the worker sends them:
``manage.py deliver_webhooks``)."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from coordination.api.base import WorkspaceViewSet, parse
from coordination.api.reference import examples as x
from coordination.api.serializers.webhooks import (
    CreatedWebhookSerializer,
    DeliveryQuery,
    WebhookDeliverySerializer,
    WebhookInput,
    WebhookSerializer,
)
from coordination.selectors.webhooks import webhook_deliveries
from coordination.selectors.webhooks import webhooks as listed_webhooks
from coordination.services import webhooks

SIGNED = (
    "Each matching event is POSTed as its JSON with `X-Projektor-Event`, "
    "`X-Projektor-Delivery` and `X-Projektor-Signature: sha256=<hex HMAC-SHA256 of the raw "
    "body, keyed with the secret>`, in event order, at least once."
)
ADDRESS = (
    "`url` must be http(s) and resolve to public addresses only: a loopback, private or "
    "link-local one is a 400 naming `url` (unless PROJEKTOR_WEBHOOK_ALLOW_PRIVATE=true)."
)


@extend_schema(tags=["Webhooks"])
@extend_schema_view(
    list=extend_schema(
        summary="List webhooks",
        description="The workspace's webhooks, oldest first: each with its event types "
        "(empty: all), whether it is active, and why it was deactivated if it was. Never "
        "a secret. Read-only.",
    ),
    retrieve=extend_schema(
        summary="Get a webhook",
        description="One webhook. An inactive one with a `deactivated_reason` was turned "
        "off after a delivery failed for the whole retry window; PATCH `active: true` to "
        "send again, from where it stopped.",
    ),
)
class WebhookViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, WorkspaceViewSet):
    selector = listed_webhooks
    serializer_class = WebhookSerializer

    @extend_schema(
        summary="Create a webhook",
        description="Sends the events written from now on whose type is in `types` (empty: "
        f"all) to `url`. {SIGNED} The answer is the only one that shows the `secret`, "
        f"generated when omitted: keep it to check signatures. {ADDRESS}",
        request=WebhookInput,
        responses={201: CreatedWebhookSerializer},
    )
    def create(self, request: Request) -> Response:
        webhook = webhooks.create_webhook(workspace=self.workspace, **parse(WebhookInput, request))
        return Response(CreatedWebhookSerializer(webhook).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Update a webhook",
        description="Changes the given fields only (a new `secret` is not shown). `active: "
        "true` clears `deactivated_reason`, and the deliveries that waited are sent in "
        f"order. {ADDRESS}",
        request=WebhookInput,
        responses=WebhookSerializer,
        examples=[
            x.sent("turn it back on", {"active": True}),
            x.shown("active again", x.WEBHOOK),
        ],
    )
    def partial_update(self, request: Request, pk: str) -> Response:
        changes = parse(WebhookInput, request, partial=True)
        webhook = webhooks.update_webhook(webhook=self.get_object(), changes=changes)
        return Response(WebhookSerializer(webhook).data)

    @extend_schema(
        summary="Delete a webhook",
        description="Deletes the webhook and its deliveries; one being sent at that moment "
        "finishes first. Nothing more is sent to it.",
        responses={204: None},
    )
    def destroy(self, request: Request, pk: str) -> Response:
        webhooks.delete_webhook(webhook=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="List a webhook's deliveries",
        description="Newest first: each delivery's event and type, its state (`pending`, "
        "`delivered`, `failed`), attempts, the last status and error, and when it is tried "
        "next (1 s after the first failure, doubling, at most 10 min apart, for "
        "PROJEKTOR_WEBHOOK_RETRY_HOURS). `state` keeps one state. Read-only.",
        parameters=[DeliveryQuery],
        responses=WebhookDeliverySerializer(many=True),
    )
    @action(detail=True, methods=["get"])
    def deliveries(self, request: Request, pk: str) -> Response:
        query = DeliveryQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = webhook_deliveries(self.get_object(), state=query.validated_data.get("state"))
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(WebhookDeliverySerializer(page, many=True).data)
