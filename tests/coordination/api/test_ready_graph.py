"""The ready queue and the work graph (invariant 16): blocked issues are not ready,
and each issue names its collisions with live claims; collision-free work first."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from coordination.models import Issue
from coordination.services import file_claims, graph
from tests.api_helpers import V1, post
from tests.conftest import expire

pytestmark = pytest.mark.django_db
S = Issue.Status


def ready(api, query=""):
    response = api.get(f"{V1}/issues/ready/{query}")
    assert response.status_code == 200, response.content
    return response.json()["results"]


@pytest.fixture
def queued(make_issue):
    """Make a ready issue expecting ``paths``, older the larger ``age`` (days)."""

    def make(title, paths=(), age=0, priority=0, **fields):
        issue = make_issue(title=title, status=S.TODO, priority=priority, **fields)
        Issue.objects.filter(pk=issue.pk).update(created_at=timezone.now() - timedelta(days=age))
        graph.set_expected_paths(issue=issue, paths=graph.checked_expected_paths(list(paths)))
        return issue

    return make


@pytest.fixture
def holder(workspace, make_issue, make_session):
    """Claim ``paths`` for a holding issue in progress, by a live session (or none)."""

    def hold(paths, *, session=True, title="holder"):
        issue = make_issue(title=title, status=S.IN_PROGRESS)
        agent_session = make_session("atlas") if session else None
        file_claims.claim_files(
            workspace=workspace,
            issue_id=issue.pk,
            paths=paths,
            session_id=agent_session.pk if agent_session else None,
        )
        return issue, agent_session

    return hold


def test_a_blocked_issue_is_not_ready_and_follows_with_its_blockers(api, queued):
    blocker, blocked = queued("blocker", age=1), queued("blocked", age=2)
    post(api, f"/issues/{blocker.pk}/links/", {"type": "blocks", "target": blocked.pk})
    assert [row["title"] for row in ready(api)] == ["blocker"]
    rows = {row["title"]: row for row in ready(api, "?include_not_ready=true")}
    assert [row["title"] for row in ready(api, "?include_not_ready=true")] == ["blocker", "blocked"]
    assert rows["blocked"]["missing"] == ["blockers"]
    assert rows["blocked"]["blocked_by"] == [
        {"id": blocker.pk, "title": "blocker", "status": "todo"}
    ]
    assert rows["blocker"]["blocks"] == [blocked.pk] and rows["blocker"]["missing"] == []
    # Resolved: ready again.
    Issue.objects.filter(pk=blocker.pk).update(status=S.DONE)
    assert [row["title"] for row in ready(api)] == ["blocked"]


def test_collisions_follow_the_overlap_rule(api, queued, holder):
    held_issue, session = holder(["src/api/", "docs/a.md", "lib/x.py"])
    queued("file under a held directory", ["src/api/v2/views.py"])
    queued("directory over a held file", ["lib/"])
    queued("the same file", ["docs/a.md", "free.py"])
    queued("a sibling, not under", ["src/apiv2.py", "src/api"])
    rows = {row["title"]: row["collisions"] for row in ready(api)}
    who = {"issue": held_issue.pk, "agent": "atlas"}
    assert rows["file under a held directory"] == [
        {"path": "src/api/v2/views.py", "held_path": "src/api/", **who}
    ]
    assert rows["directory over a held file"] == [{"path": "lib/", "held_path": "lib/x.py", **who}]
    assert rows["the same file"] == [{"path": "docs/a.md", "held_path": "docs/a.md", **who}]
    assert rows["a sibling, not under"] == []


def test_own_claims_and_dead_holders_do_not_collide_a_claim_without_session_does(
    api, workspace, queued, holder
):
    mine = queued("mine", ["src/a.py"])
    file_claims.claim_files(workspace=workspace, issue_id=mine.pk, paths=["src/a.py"])
    _, dead = holder(["dead/"], title="dead holder")
    expire(dead)
    queued("under a dead holder", ["dead/x.py"])
    holder(["nobody/"], session=False, title="no session")
    queued("under a claim without session", ["nobody/x.py"])
    rows = {row["title"]: row["collisions"] for row in ready(api)}
    assert rows["mine"] == [] and rows["under a dead holder"] == []
    assert [c["held_path"] for c in rows["under a claim without session"]] == ["nobody/"]
    assert rows["under a claim without session"][0]["agent"] is None


def test_collision_free_first_within_a_priority_free_and_the_plain_order(api, queued, holder):
    holder(["hot/"])
    queued("urgent colliding", ["hot/a.py"], age=9, priority=1)
    queued("urgent free", ["cold/a.py"], age=1, priority=1)
    queued("high colliding, oldest", ["hot/b.py"], age=20, priority=2)
    queued("high free", [], age=2, priority=2)
    assert [row["title"] for row in ready(api)] == [
        "urgent free",
        "urgent colliding",
        "high free",
        "high colliding, oldest",
    ]
    assert [row["title"] for row in ready(api, "?avoid_collisions=false")] == [
        "urgent colliding",
        "urgent free",
        "high colliding, oldest",
        "high free",
    ]
    assert [row["title"] for row in ready(api, "?free=true")] == ["urgent free", "high free"]
    assert api.get(f"{V1}/issues/ready/?free=maybe").status_code == 400
    assert api.get(f"{V1}/issues/ready/?avoid_collisions=2").status_code == 400


def test_the_head_of_the_queue_does_not_collide_now(api, queued, holder):
    holder(["src/"])
    queued("older, colliding", ["src/models.py"], age=5)
    queued("newer, free", ["web/page.html"], age=1)
    head = ready(api)[0]
    started = post(api, "/work/start/", {"agent": "next", "issue": head["id"]})
    assert started.status_code == 201, started.content
    assert [c["path"] for c in started.json()["claims"]] == ["web/page.html"]


def test_the_collision_check_is_one_statement_however_many_claims(
    api, queued, holder, django_assert_num_queries, settings
):
    """The page statement carries every issue's collisions and graph: the key, the
    count and the page, with 1 or 30 claims held and 1 or 30 issues queued (as
    test_query_counts counts them: rate limits off)."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"key": None, "anon": None},
    }
    expected = 3

    def page_costs():
        with django_assert_num_queries(expected):
            rows = ready(api)
        return rows

    holder(["a/"], title="h0")
    queued("q0", ["a/x.py"])
    assert len(page_costs()[0]["collisions"]) == 1
    for n in range(1, 30):
        holder([f"d{n}/", f"f{n}.py"], title=f"h{n}")
        queued(f"q{n}", [f"d{n}/x.py", f"f{n}.py", "free/"])
    rows = page_costs()
    assert sum(len(row["collisions"]) for row in rows) == 1 + 29 * 2


def test_the_collisions_are_index_lookups_of_the_live_claims(workspace):
    """The claims are probed through their partial index of unreleased paths, by
    equality and by range, never scanned: the cost is flat in the claims held."""
    from coordination.liveness import dialect
    from coordination.services import sql
    from tests.coordination.api.test_issues_ready import plan_of

    queue = sql.Queue(workspace_id=workspace.pk, avoid_collisions=True)
    plan = plan_of(sql.queue_page(dialect(), queue, limit=100, offset=0))
    assert "one_unreleased_claim_per_path" in plan, plan
    if connection.vendor == "sqlite":
        assert "SCAN c " not in plan and "SCAN issue_file_claims" not in plan, plan
    else:
        assert "Seq Scan on issue_file_claims" not in plan, plan
