"""The demo's work graph: chains and an epic, and a ready queue that leaves the
blocked links of each chain out (invariant 16 (the work graph))."""

import pytest

from coordination.models import Event, EventType, IssueLink, LinkType, Workspace
from coordination.selectors.graph import graph_of
from coordination.selectors.issues import issues, ready_issues
from tests.demo.test_seed_demo import seed_demo

pytestmark = pytest.mark.django_db


def test_the_demo_seeds_chains_and_an_epic_that_its_queue_respects():
    seed_demo()
    workspace = Workspace.objects.get(slug="demo")
    blocks = IssueLink.objects.filter(workspace=workspace, type=LinkType.BLOCKS)
    parents = IssueLink.objects.filter(workspace=workspace, type=LinkType.PARENT_OF)
    assert blocks.count() == 6 and parents.count() == 4
    assert len({link.source_id for link in parents}) == 1  # one epic
    queue = ready_issues(workspace)
    ready = queue[: queue.count()]
    assert ready and all(not graph_of(issue).blocked_by for issue in ready)
    blocked = [issue for issue in issues(workspace) if graph_of(issue).blocked_by]
    assert blocked and not {issue.pk for issue in blocked} & {issue.pk for issue in ready}
    linked = Event.objects.filter(workspace=workspace, type=EventType.ISSUE_LINKED)
    assert linked.count() == 10  # each link announced, as an orchestrator's would be
