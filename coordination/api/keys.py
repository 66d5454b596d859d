"""API keys over the API [whoami]: who am I, and (fleet keys) mint, list and revoke.

An orchestrator mints a key for each agent it spawns (``kind: agent``, bound to that
agent's name, maybe with ``expires_at``), hands it the raw key, and revokes it when
the agent is done. Who may call each route is the rule of coordination/api/access.py
(invariant 13 (the key is the actor)); another workspace's keys are not found (invariant 9
(workspace isolation)).
"""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from coordination.api.access import key_of
from coordination.api.base import FilteredListViewSet, parse
from coordination.api.reference import examples as x
from coordination.api.serializers.keys import (
    CreatedKeySerializer,
    KeyInput,
    KeySerializer,
    MyKeySerializer,
)
from coordination.filtersets import KeyFilter
from coordination.selectors.access import api_key_list, api_keys
from coordination.services import keys


@extend_schema(tags=["Keys"])
@extend_schema_view(
    list=extend_schema(
        summary="List API keys",
        description="The workspace's keys, newest first (fleet keys only): never a raw key "
        "or its hash, a `prefix` of a few characters tells them apart. `kind` and `agent` "
        "match exactly; `revoked=true` keeps the revoked ones. Read-only.",
    ),
)
class KeyViewSet(FilteredListViewSet):
    selector = api_keys
    list_selector = api_key_list
    serializer_class = KeySerializer
    filterset_class = KeyFilter

    @extend_schema(
        summary="Who am I",
        description="The key this request authenticated with: its kind, the agent it acts "
        "as (an agent key) and whether it may force, its workspace and when it expires "
        "(invariant 13 (the key is the actor)). Any key may ask. Read-only.",
        responses=MyKeySerializer,
    )
    @action(detail=False, methods=["get"], filterset_class=None, pagination_class=None)
    def me(self, request: Request) -> Response:
        key = key_of(request)
        if key is None:
            raise NotAuthenticated("This call was not made with an API key.")
        return Response(MyKeySerializer(key).data)

    @extend_schema(
        summary="Mint an API key",
        description="A new key of this workspace (fleet keys only). `kind`: `fleet` acts "
        "for any agent, `agent` as the one `agent` named (created if new), `read` only "
        "reads. `can_force` defaults to true for fleet keys, else false; a key that may "
        "not force cannot mint one that may (403). `expires_at` must be in the future. The "
        "answer is the only one that shows the raw `key`: only its hash is stored.",
        request=KeyInput,
        responses={201: CreatedKeySerializer},
    )
    def create(self, request: Request) -> Response:
        data = parse(KeyInput, request)
        key, raw = keys.mint_key(
            workspace=self.workspace,
            name=data["name"],
            kind=data["kind"],
            agent_name=data.get("agent"),
            can_force=data.get("can_force"),
            expires_at=data.get("expires_at"),
            by=key_of(request),
        )
        key.raw = raw  # type: ignore[attr-defined]
        return Response(CreatedKeySerializer(key).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Revoke an API key",
        description="From the next request on, on every app server, the key is 401 "
        "`unauthenticated` (nothing caches it). A fleet key revokes any key of its "
        "workspace; any key may revoke itself. Revoking twice keeps the first time.",
        request=None,
        responses=KeySerializer,
        examples=[x.shown("revoked", x.REVOKED_KEY)],
    )
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str) -> Response:
        key = keys.revoke_key(workspace=self.workspace, key_id=int(pk))
        return Response(KeySerializer(key).data)
