"""POST /work/start/ [start_work] and POST /work/finish/ [finish_work]."""

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from coordination.api.access import key_of
from coordination.api.auth import workspace_of
from coordination.api.base import parse
from coordination.api.reference import refusals as r
from coordination.api.serializers.work import (
    FinishedSerializer,
    FinishWorkInput,
    StartedSerializer,
    StartWorkInput,
)
from coordination.selectors.issues import issue_as_shown
from coordination.services import access, work


class StartWorkView(APIView):
    @extend_schema(
        tags=["Work"],
        summary="Start work on an issue",
        description="In one transaction: registers a session for `agent`, takes the issue's lease "
        "(invariants 2 (one live lease per issue), 3 (the WIP cap) and 4 (stale reclaim)), claims "
        "`paths` for it, moves a `todo` issue to `in_progress` and posts `<agent> started work on "
        "issue <id>.` to `issue:<id>`. All or nothing (invariant 5 (all-or-nothing)): on any "
        "refusal no session, lease or claim is left; a WIP denial or the conflict rows are still "
        "logged, naming the agent (invariant 8 (append-only logs)). Keep `session.id` and "
        "heartbeat it within the TTL (invariant 1 (liveness)); keep `lease.fence` for "
        "finish_work. With an agent key, `agent` may be omitted (the key's agent) and another "
        "name is 403 (invariant 13 (the key is the actor)).",
        request=StartWorkInput,
        responses={
            201: StartedSerializer,
            **r.errors(
                r.ISSUE_NOT_FOUND,
                r.BLOCKED,
                r.LEASE_HELD,
                r.WIP_LIMIT_REACHED,
                r.FILE_CONFLICT,
                r.ISSUE_CLOSED,
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = parse(StartWorkInput, request)
        key = key_of(request)
        started = work.start_work(
            workspace=workspace_of(request),
            agent_name=access.acting_agent(key, data.get("agent")),
            issue_id=data["issue"],
            paths=data.get("paths"),
            role=data.get("role"),
            department=data.get("department"),
            worktree_slug=data.get("worktree"),
            api_key=key,
        )
        return Response(StartedSerializer(started).data, status=status.HTTP_201_CREATED)


class FinishWorkView(APIView):
    @extend_schema(
        tags=["Work"],
        summary="Finish work on an issue",
        description="In one transaction: moves the issue to `to` (default `in_review`; the "
        "workflow's rules apply, and an issue that was leased needs a `report`, given now or "
        "before), releases this session's file claims on it and its lease `released`, and ends the "
        "session, anything else it holds being released `agent_ended` "
        "(invariant 7 (release reasons)). With `fence`, only while that lease is the issue's "
        "current one: otherwise `stale_fence` and nothing changes.",
        request=FinishWorkInput,
        responses={
            200: FinishedSerializer,
            **r.errors(
                r.HUMAN_GATE,
                r.ISSUE_NOT_FOUND,
                r.NOT_ALLOWED,
                r.NOT_READY,
                r.NO_REPORT,
                r.LEASE_NOT_HELD,
                r.STALE_FENCE,
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = parse(FinishWorkInput, request)
        finished = work.finish_work(
            workspace=workspace_of(request),
            session_id=data["session"],
            issue_id=data["issue"],
            to=data["to"],
            report=dict(data["report"]) if "report" in data else None,
            fence=data.get("fence"),
        )
        issue_as_shown(finished.issue)  # its lease and relations, as listed
        return Response(FinishedSerializer(finished).data)
