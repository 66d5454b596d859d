"""Sessions [register_agent, heartbeat_agent, report_progress, end_agent,
list_active_agents]."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from coordination.api.access import key_of
from coordination.api.base import FilteredListViewSet, parse
from coordination.api.reference import examples as x
from coordination.api.reference.refusals import SESSION_ENDED, errors
from coordination.api.serializers.sessions import (
    ProgressInput,
    SessionRegisterInput,
    SessionSerializer,
)
from coordination.filtersets import SessionFilter
from coordination.selectors import sessions
from coordination.services import access, agents


@extend_schema(tags=["Sessions"])
@extend_schema_view(
    list=extend_schema(
        summary="List sessions",
        description="The workspace's sessions, newest first. `live=true` keeps those whose last "
        "heartbeat is younger than the TTL, judged now by the database's clock "
        "(invariant 1 (liveness)); `stalled=true` those live with no progress for "
        "`PROJEKTOR_STALL_AFTER_SECONDS` (invariant 17 (stalled is derived)); `agent` and `role` "
        "match exactly. Read-only.",
    ),
    retrieve=extend_schema(
        summary="Get a session",
        description="One session, with its agent and whether it is live now "
        "(invariant 1 (liveness)).",
    ),
)
class SessionViewSet(mixins.RetrieveModelMixin, FilteredListViewSet):
    selector = sessions.sessions
    list_selector = sessions.session_list  # SQL, paged as a queryset
    serializer_class = SessionSerializer
    filterset_class = SessionFilter

    @extend_schema(
        summary="Register an agent session",
        description="Opens a new session for `agent`, live from now (invariant 1 (liveness)): keep "
        "its `id` and heartbeat it well within the TTL. A known agent name reuses the agent (its "
        "role and department updated when given); `worktree` binds the agent to that worktree, "
        "where its runs lock when the issue names none (invariant 10 (lock mode per run)). With an "
        "agent key, `agent` may be omitted (the key's agent) and another name is 403; the session "
        "records the key that opened it (invariant 13 (the key is the actor)).",
        request=SessionRegisterInput,
        responses={201: SessionSerializer},
    )
    def create(self, request: Request) -> Response:
        data = parse(SessionRegisterInput, request)
        key = key_of(request)
        session = agents.register_session(
            workspace=self.workspace,
            agent_name=access.acting_agent(key, data.get("agent")),
            role=data.get("role"),
            department=data.get("department"),
            worktree_slug=data.get("worktree"),
            api_key=key,
        )
        return Response(SessionSerializer(session).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Heartbeat a session",
        description="Sets `last_heartbeat_at` to the database's clock, so the session is live for "
        "another TTL (invariant 1 (liveness)) and keeps what it holds. A lapsed session is "
        "revived; what was reclaimed from it meanwhile stays lost (invariant 4 (stale reclaim)).",
        request=None,
        responses={200: SessionSerializer, **errors(SESSION_ENDED)},
    )
    @action(detail=True, methods=["post"])
    def heartbeat(self, request: Request, pk: str) -> Response:
        # An agent key's check is folded into the heartbeat's UPDATE (api/access.py).
        session = agents.heartbeat_session(
            workspace=self.workspace,
            session_id=int(pk),
            agent_id=access.session_owner(key_of(request)),
        )
        return Response(SessionSerializer(session).data)

    @extend_schema(
        summary="Report progress",
        description="The session's work moved: sets `last_progress_at` to the database's clock "
        "(and the `note`, shown on the agent's page), so it is not stalled "
        "(invariant 17 (stalled is derived)). Every change the session makes does so too; a "
        "heartbeat never does, and progress never revives a lapsed session.",
        request=ProgressInput,
        responses={200: SessionSerializer, **errors(SESSION_ENDED)},
    )
    @action(detail=True, methods=["post"])
    def progress(self, request: Request, pk: str) -> Response:
        data = parse(ProgressInput, request)
        session = agents.report_progress(
            workspace=self.workspace,
            session_id=int(pk),
            note=data.get("note", ""),
        )
        return Response(SessionSerializer(session).data)

    @extend_schema(
        summary="End a session",
        description="A clean exit: the session ends, its leases, file claims and worktree locks "
        "are released `agent_ended` (invariant 7 (release reasons)) and its running runs "
        "cancelled. Ending twice is harmless. A session that just stops heartbeating is not ended: "
        "what it holds is reclaimed `expired` by the next claimer instead.",
        request=None,
        responses=SessionSerializer,
        examples=[x.shown("ended", x.ENDED_SESSION)],
    )
    @action(detail=True, methods=["post"])
    def end(self, request: Request, pk: str) -> Response:
        session = agents.end_session(workspace=self.workspace, session_id=int(pk))
        return Response(SessionSerializer(session).data)
