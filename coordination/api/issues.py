"""Projects, issues (and the ready queue), leases, WIP-cap denials and the workflow."""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from coordination import filtersets, selectors
from coordination.api import serializers as s
from coordination.api.auth import is_human
from coordination.api.base import WorkspaceViewSet, parse
from coordination.services import leases, projects, workflow


class ProjectViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, WorkspaceViewSet):
    selector = selectors.projects
    serializer_class = s.ProjectSerializer

    @extend_schema(request=s.ProjectInput, responses={201: s.ProjectSerializer})
    def create(self, request: Request) -> Response:
        project = projects.create_project(
            workspace=self.workspace, **parse(s.ProjectInput, request)
        )
        return Response(s.ProjectSerializer(project).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.ProjectInput, responses=s.ProjectSerializer)
    def partial_update(self, request: Request, pk: str) -> Response:
        changes = parse(s.ProjectInput, request, partial=True)
        project = projects.update_project(
            workspace=self.workspace, project=self.get_object(), changes=changes
        )
        return Response(s.ProjectSerializer(project).data)


class IssueViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, WorkspaceViewSet):
    selector = selectors.issues
    serializer_class = s.IssueSerializer
    filterset_class = filtersets.IssueFilter

    def render_issue(self, issue_id: int, **kwargs: Any) -> Response:
        issue = selectors.issues(self.workspace).get(pk=issue_id)
        return Response(s.IssueSerializer(issue).data, **kwargs)

    @extend_schema(parameters=[s.ReadyQuery], responses=s.QueuedIssueSerializer(many=True))
    @action(detail=False, methods=["get"], filterset_class=None)
    def ready(self, request: Request) -> Response:
        query = s.ReadyQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        key = query.validated_data.get("project")
        rows = selectors.ready_issues(
            self.workspace,
            project=selectors.get_project(self.workspace, key) if key else None,
            include_not_ready=query.validated_data["include_not_ready"],
        )
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(s.QueuedIssueSerializer(page, many=True).data)

    @extend_schema(request=s.IssueInput, responses={201: s.IssueSerializer})
    def create(self, request: Request) -> Response:
        issue = projects.create_issue(workspace=self.workspace, fields=parse(s.IssueInput, request))
        return self.render_issue(issue.pk, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.IssueInput, responses=s.IssueSerializer)
    def partial_update(self, request: Request, pk: str) -> Response:
        fields = parse(s.IssueInput, request, partial=True)
        issue = projects.update_issue(
            workspace=self.workspace, issue=self.get_object(), fields=fields
        )
        return self.render_issue(issue.pk)

    @extend_schema(request=s.TransitionInput, responses=s.IssueSerializer)
    @action(detail=True, methods=["post"])
    def transition(self, request: Request, pk: str) -> Response:
        data = parse(s.TransitionInput, request)
        issue = workflow.transition_issue(
            workspace=self.workspace,
            issue_id=int(pk),
            to=data["to"],
            by_human=is_human(request),
            report=dict(data["report"]) if "report" in data else None,
        )
        return self.render_issue(issue.pk)

    @extend_schema(request=s.SessionRefInput, responses={201: s.LeaseSerializer})
    @action(detail=True, methods=["post"])
    def claim(self, request: Request, pk: str) -> Response:
        data = parse(s.SessionRefInput, request)
        claimed = leases.claim_issue(
            workspace=self.workspace, issue_id=int(pk), session_id=data["session"]
        )
        code = status.HTTP_201_CREATED if claimed.created else status.HTTP_200_OK
        return Response(s.LeaseSerializer(claimed.lease).data, status=code)

    @extend_schema(request=s.LeaseReleaseInput, responses=s.LeaseSerializer)
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


class LeaseViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, WorkspaceViewSet):
    selector = selectors.leases
    serializer_class = s.LeaseSerializer
    filterset_class = filtersets.LeaseFilter


class WipCapDenialViewSet(mixins.ListModelMixin, WorkspaceViewSet):
    selector = selectors.wip_cap_denials
    serializer_class = s.WipCapDenialSerializer
    filterset_class = filtersets.WipCapDenialFilter


class WorkflowView(APIView):
    @extend_schema(responses=s.WorkflowSerializer)
    def get(self, request: Request) -> Response:
        return Response(workflow.get_workflow())
