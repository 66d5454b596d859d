"""The admin index, the operators' fleet dashboard: each workspace's last 24 h, from
the same workspace overview as the managers' pages, at a fixed number of queries."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from coordination.models import ClaimConflict, Issue, Project, Run, WipCapDenial, Workspace
from coordination.services import agents, leases

pytestmark = pytest.mark.django_db
# The session, the user, the workspace overview, the project loads, the runs that did
# not start, the admin's recent actions: however many workspaces there are.
INDEX_QUERIES = 6


def busy_workspace(slug: str, *, troubled: int = 2) -> Workspace:
    """A workspace with one live lease, a rejected and a forced conflict, a WIP-cap
    denial, ``troubled`` skipped runs in the last 24 h and one older one."""
    workspace = Workspace.objects.create(slug=slug, name=slug.title())
    project = Project.objects.create(workspace=workspace, key=f"{slug}-p", name="P")

    def issue() -> Issue:
        return Issue.objects.create(workspace=workspace, project=project, title="I")

    session = agents.register_session(workspace=workspace, agent_name=f"{slug}-agent")
    held = issue()
    leases.claim_issue(workspace=workspace, issue_id=held.pk, session_id=session.pk)
    for forced in (False, True):
        ClaimConflict.objects.create(
            workspace=workspace,
            path="x.py",
            rejected_issue=issue(),
            holding_issue=held,
            forced=forced,
        )
    WipCapDenial.objects.create(workspace=workspace, project=project, issue=issue(), limit=1)
    for _ in range(troubled):
        Run.objects.create(workspace=workspace, issue=held, status=Run.Status.SKIPPED)
    old = Run.objects.create(workspace=workspace, issue=held, status=Run.Status.CANCELLED)
    Run.objects.filter(pk=old.pk).update(started_at=timezone.now() - timedelta(days=2))
    return workspace


def operator_client(**flags: bool) -> Client:
    flags = {"is_staff": True, "is_superuser": True, **flags}
    user = get_user_model().objects.create_user("ops", password="pw-ops-123", **flags)
    client = Client()
    client.force_login(user)
    return client


def index_queries(client: Client) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(reverse("admin:index")).status_code == 200
    return len(queries)


def test_the_dashboard_costs_the_same_queries_for_one_workspace_or_many(
    django_assert_num_queries,
):
    busy_workspace("first")
    client = operator_client()
    one = index_queries(client)
    for index in range(7):
        busy_workspace(f"w{index}")
    assert index_queries(client) == one
    with django_assert_num_queries(INDEX_QUERIES):
        response = client.get(reverse("admin:index"))
    assert len(response.context["dashboards"]) == 8


def test_each_board_shows_its_own_workspace_only():
    busy_workspace("acme", troubled=7)
    busy_workspace("globex", troubled=1)
    response = operator_client().get(reverse("admin:index"))
    boards = {board.workspace.slug: board for board in response.context["dashboards"]}
    assert list(boards) == ["acme", "globex"]  # by name
    for slug, shown in (("acme", 5), ("globex", 1)):  # the five newest, the old one never
        board = boards[slug]
        assert (board.live_agents, board.rejected, board.forced, board.denials) == (1, 1, 1, 1)
        assert [(load.key, load.live, load.stale) for load in board.loads] == [(f"{slug}-p", 1, 0)]
        runs = board.troubled_runs
        assert len(runs) == shown and {run.workspace_id for run in runs} == {board.workspace.pk}
        assert all(run.status == Run.Status.SKIPPED for run in runs)
        assert [run.pk for run in runs] == sorted((run.pk for run in runs), reverse=True)


def test_a_staff_operator_sees_the_boards_of_their_workspaces():
    busy_workspace("acme")
    member_of = busy_workspace("globex")
    client = operator_client(is_superuser=False)
    member_of.members.add(get_user_model().objects.get(username="ops"))
    response = client.get(reverse("admin:index"))
    assert [board.workspace.slug for board in response.context["dashboards"]] == ["globex"]
