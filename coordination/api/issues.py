"""Projects, issues (and the ready queue), leases, WIP-cap denials and the workflow."""

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from coordination.api import serializers as s
from coordination.api.access import key_of
from coordination.api.auth import is_human
from coordination.api.base import FilteredListViewSet, WorkspaceViewSet, parse
from coordination.api.reference import examples as x
from coordination.api.reference import refusals as r
from coordination.filtersets import IssueFilter, LeaseFilter, WipCapDenialFilter
from coordination.selectors import claims, issues, lookups
from coordination.services import access, leases, projects, workflow


@extend_schema(tags=["Projects and issues"])
@extend_schema_view(
    list=extend_schema(
        summary="List projects",
        description="The workspace's projects, ordered by key, each with its WIP cap and "
        "primary worktree. Read-only.",
    ),
    retrieve=extend_schema(
        summary="Get a project",
        description="One project, with its WIP cap (invariant 3 (the WIP cap)) and its primary "
        "worktree (invariant 10 (lock mode per run)).",
    ),
)
class ProjectViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, WorkspaceViewSet):
    selector = issues.projects
    serializer_class = s.ProjectSerializer

    @extend_schema(
        summary="Create a project",
        description="`agent_wip_limit` (default 3) caps the project's leases whose holder is live "
        "(invariant 3 (the WIP cap)); `primary_worktree` is where a run that needs a filesystem "
        "locks when neither the issue nor the agent names a worktree "
        "(invariant 10 (lock mode per run)). A taken key is a 400 naming `key`.",
        request=s.ProjectInput,
        responses={201: s.ProjectSerializer},
    )
    def create(self, request: Request) -> Response:
        project = projects.create_project(
            workspace=self.workspace, **parse(s.ProjectInput, request)
        )
        return Response(s.ProjectSerializer(project).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Update a project",
        description="Changes the given fields only. A new WIP limit admits or refuses the "
        "next claims (invariant 3 (the WIP cap)); leases held already are kept.",
        request=s.ProjectInput,
        responses=s.ProjectSerializer,
        examples=[
            x.sent("a higher WIP limit", {"agent_wip_limit": 5}),
            x.shown("core", {**x.PROJECT, "agent_wip_limit": 5}),
        ],
    )
    def partial_update(self, request: Request, pk: str) -> Response:
        changes = parse(s.ProjectInput, request, partial=True)
        project = projects.update_project(
            workspace=self.workspace, project=self.get_object(), changes=changes
        )
        return Response(s.ProjectSerializer(project).data)


@extend_schema(tags=["Projects and issues"])
@extend_schema_view(
    list=extend_schema(
        summary="List issues",
        description="Newest first, each with its unreleased lease (`live`: whether its "
        "holder is live now) and its report. `leased=true` keeps the issues whose lease "
        "has a live holder; `project` is a key. Read-only.",
    ),
    retrieve=extend_schema(
        summary="Get an issue",
        description="With its unreleased lease, if any, and whether its holder is live "
        "(invariant 1 (liveness)), and its completion report.",
    ),
)
class IssueViewSet(mixins.RetrieveModelMixin, FilteredListViewSet):
    selector = issues.issues
    list_selector = issues.issue_list
    serializer_class = s.IssueSerializer
    filterset_class = IssueFilter

    def render_issue(self, issue_id: int, **kwargs: Any) -> Response:
        issue = issues.issues(self.workspace).get(pk=issue_id)
        return Response(s.IssueSerializer(issue).data, **kwargs)

    @extend_schema(
        tags=["Work"],
        summary="List the ready queue",
        description="What to pick next: issues in `todo` that meet the definition of ready and "
        "have no live lease, urgent first (priority 1, 2, 3, 4, then 0), oldest first within a "
        "priority; a blocked issue is never ready (invariant 16 (the work graph)). Each issue "
        "names its `collisions`: its expected `paths` that another issue's live claim holds now; "
        "within a priority the issues without any come first (`avoid_collisions=false`: the plain "
        "order), and `free=true` lists only those. With `include_not_ready=true` the other open "
        "issues without a live lease follow, each with what it lacks in `missing` (`blockers` "
        "while blocked). Read-only.",
        parameters=[s.ReadyQuery],
        responses=s.QueuedIssueSerializer(many=True),
    )
    @action(detail=False, methods=["get"], filterset_class=None)
    def ready(self, request: Request) -> Response:
        query = s.ReadyQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        key = query.validated_data.get("project")
        rows = issues.ready_issues(
            self.workspace,
            project=lookups.get_project(self.workspace, key) if key else None,
            include_not_ready=query.validated_data["include_not_ready"],
            avoid_collisions=query.validated_data["avoid_collisions"],
            free=query.validated_data["free"],
        )
        page = self.paginate_queryset(rows)  # type: ignore[arg-type]  # paged as a queryset
        return self.get_paginated_response(s.QueuedIssueSerializer(page, many=True).data)

    @extend_schema(
        summary="Create an issue",
        description="A new issue starts in `backlog`, or in `todo` when asked and it meets "
        "the definition of ready (GET /workflow/). `project`, `worktree` and `assignee` "
        "name rows of this workspace by key, slug and name: another workspace's are "
        "unknown here, a 400 naming the field (invariant 9 (workspace isolation)).",
        request=s.IssueInput,
        responses={201: s.IssueSerializer, **r.errors(r.NOT_READY, r.NEW_ISSUE_STATUS)},
        examples=[
            x.sent("a ready issue", x.NEW_ISSUE),
            x.shown("created in todo", x.NEW_ISSUE_SHOWN),
        ],
    )
    def create(self, request: Request) -> Response:
        issue = projects.create_issue(workspace=self.workspace, fields=parse(s.IssueInput, request))
        return self.render_issue(issue.pk, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Update an issue",
        description="Changes the given fields only, and never the status (which moves "
        "through /transition/, so that the workflow's rules hold) nor the project: either "
        "in the body is a 400.",
        request=s.IssueInput,
        responses=s.IssueSerializer,
        examples=[
            x.sent("a higher priority", {"priority": 1}),
            x.shown("an issue in progress", {**x.ISSUE, "priority": 1}),
        ],
    )
    def partial_update(self, request: Request, pk: str) -> Response:
        fields = parse(s.IssueInput, request, partial=True)
        issue = projects.update_issue(
            workspace=self.workspace, issue=self.get_object(), fields=fields
        )
        return self.render_issue(issue.pk)

    @extend_schema(
        summary="Move an issue through the workflow",
        description="Moves the issue to `to` if GET /workflow/ allows it: entering `todo` checks "
        "the definition of ready; `in_review → done` is a human gate (an API key gets 403); "
        "entering `in_review` or `done` needs a completion report if the issue was ever leased, "
        "given now or before. A report is kept on the issue and posted to `issue:<id>`. Closing "
        "(`done`, `cancelled`) releases the issue's lease and file claims `issue_closed` "
        "(invariant 7 (release reasons)); a closed issue can be neither leased nor claimed on "
        "until it is reopened.",
        request=s.TransitionInput,
        responses={
            200: s.IssueSerializer,
            **r.errors(r.HUMAN_GATE, r.NOT_ALLOWED, r.NOT_READY, r.NO_REPORT, r.BLOCKED),
        },
        examples=[
            x.sent("to review, with a report", {"to": "in_review", "report": x.REPORT}),
            x.sent("back to todo", {"to": "todo"}),
            x.shown("in review", {**x.REVIEWED_ISSUE, "lease": x.LEASE}),
        ],
    )
    @action(detail=True, methods=["post"])
    def transition(self, request: Request, pk: str) -> Response:
        data = parse(s.TransitionInput, request)
        issue = workflow.transition_issue(
            workspace=self.workspace,
            issue_id=int(pk),
            to=data["to"],
            by_human=is_human(request),
            report=dict(data["report"]) if "report" in data else None,
            author=access.author_of(key_of(request)),
            operator=request.user.get_username() if is_human(request) else None,
            key=key_of(request),
        )
        return self.render_issue(issue.pk)

    @extend_schema(
        tags=["Leases"],
        summary="Claim an issue (take its lease)",
        description="Takes the issue's exclusive lease for a live session: one unreleased lease "
        "per issue (invariant 2 (one live lease per issue)), admitted only while the project's "
        "leases with a live holder are under its WIP cap, a refusal being logged in "
        "/wip-cap-denials/ (invariants 3 (the WIP cap) and 8 (append-only logs)). A dead holder's "
        "lease is reclaimed `expired` in the same call (invariant 4 (stale reclaim)). Keep the "
        "lease's `fence`: release, file claims and finish_work take it back, and refuse once the "
        "lease is no longer this one.",
        request=s.SessionRefInput,
        responses={
            201: OpenApiResponse(s.LeaseSerializer, description="A new lease."),
            200: OpenApiResponse(
                s.LeaseSerializer, description="This session holds the lease already."
            ),
            **r.errors(r.LEASE_HELD, r.WIP_LIMIT_REACHED, r.SESSION_NOT_LIVE, r.ISSUE_CLOSED),
        },
    )
    @action(detail=True, methods=["post"])
    def claim(self, request: Request, pk: str) -> Response:
        data = parse(s.SessionRefInput, request)
        claimed = leases.claim_issue(
            workspace=self.workspace, issue_id=int(pk), session_id=data["session"]
        )
        code = status.HTTP_201_CREATED if claimed.created else status.HTTP_200_OK
        return Response(s.LeaseSerializer(claimed.lease).data, status=code)

    @extend_schema(
        tags=["Leases"],
        summary="Release an issue's lease",
        description="Releases this session's unreleased lease on the issue as `released` "
        "(invariant 7 (release reasons)); its file claims stay (release them with "
        "/file-claims/release/). With `fence`, only the lease of that fence, in one "
        "compare-and-set: a holder whose lease was reclaimed meanwhile gets `stale_fence` and "
        "changes nothing.",
        request=s.LeaseReleaseInput,
        responses={200: s.LeaseSerializer, **r.errors(r.LEASE_NOT_HELD, r.STALE_FENCE)},
        examples=[
            x.sent("with its fence", {"session": x.SESSION_ID, "fence": x.FENCE}),
            x.shown("released", x.RELEASED_LEASE),
        ],
    )
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk: str) -> Response:
        data = parse(s.LeaseReleaseInput, request)
        lease = leases.release_issue(
            workspace=self.workspace,
            issue_id=int(pk),
            session_id=data["session"],
            fence=data.get("fence"),
        )
        return Response(s.LeaseSerializer(lease).data)


@extend_schema(tags=["Leases"])
@extend_schema_view(
    list=extend_schema(
        summary="List leases",
        description="Newest first. `active=true` keeps the unreleased ones. A lease's `live` "
        "is its holder session's (invariant 1 (liveness)): a lease has no expiry of its own, and a "
        "dead holder's is reclaimed by the next claimer (invariant 4 (stale reclaim)). Read-only.",
    ),
    retrieve=extend_schema(
        summary="Get a lease",
        description="One lease, released or not, with its fence and whether its holder is "
        "live now (invariant 1 (liveness)).",
    ),
)
class LeaseViewSet(mixins.RetrieveModelMixin, FilteredListViewSet):
    selector = claims.leases
    list_selector = claims.lease_list
    serializer_class = s.LeaseSerializer
    filterset_class = LeaseFilter


@extend_schema(tags=["Contention logs"])
@extend_schema_view(
    list=extend_schema(
        summary="List WIP-cap denials",
        description="Every claim the WIP cap refused (invariant 3 (the WIP cap)), newest first: "
        "append-only, never updated or deleted (invariant 8 (append-only logs)). A refused "
        "start_work is logged naming the agent and no session. Read-only.",
    ),
)
class WipCapDenialViewSet(FilteredListViewSet):
    selector = claims.wip_cap_denials
    list_selector = claims.wip_cap_denial_list
    serializer_class = s.WipCapDenialSerializer
    filterset_class = WipCapDenialFilter


class WorkflowView(APIView):
    @extend_schema(
        tags=["Projects and issues"],
        summary="Get the workflow",
        description="The rules /transition/ and finish_work enforce: the states, the "
        "transitions (`human_only`: an API key may not make them), the definition of "
        "ready, the gates and when a completion report is needed. Read it first. Read-only.",
        responses=s.WorkflowSerializer,
    )
    def get(self, request: Request) -> Response:
        return Response(workflow.get_workflow())
