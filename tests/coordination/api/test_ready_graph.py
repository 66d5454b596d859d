"""The ready queue and the work graph (invariant 16 (the work graph)): blocked issues are not ready,
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


def test_blocked_and_colliding_together_each_form_counts_what_it_lists(
    api, workspace, queued, holder
):
    holder(["hot/"])
    blocker = queued("blocker", ["docs/b.md"], age=9)
    queued("unblocked colliding", ["hot/a.py"], age=8)
    queued("unblocked free", ["cold/a.py"], age=7)
    for title, paths in (("blocked colliding", ["hot/b.py"]), ("blocked free", ["cold/b.py"])):
        blocked = queued(title, paths, age=6)
        graph.link_issues(
            workspace=workspace, source_id=blocker.pk, type="blocks", target_id=blocked.pk
        )
    for query, titles in (
        ("?free=true", ["blocker", "unblocked free"]),
        ("", ["blocker", "unblocked free", "unblocked colliding"]),
        ("?avoid_collisions=false", ["blocker", "unblocked colliding", "unblocked free"]),
    ):
        body = api.get(f"{V1}/issues/ready/{query}").json()
        assert [row["title"] for row in body["results"]] == titles, query
        assert body["count"] == len(titles), query


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

    def page_costs(query=""):
        with django_assert_num_queries(expected):
            rows = ready(api, query)
        return rows

    holder(["a/"], title="h0")
    queued("q0", ["a/x.py"])
    assert len(page_costs()[0]["collisions"]) == 1
    for n in range(1, 30):
        holder([f"d{n}/", f"f{n}.py"], title=f"h{n}")
        queued(f"q{n}", [f"d{n}/x.py", f"f{n}.py", "free/"])
    queued("unheld", ["free/"])
    rows = page_costs()
    assert sum(len(row["collisions"]) for row in rows) == 1 + 29 * 2
    assert [row["title"] for row in page_costs("?free=true")] == ["unheld"]
    assert len(page_costs("?avoid_collisions=false")) == 31


def test_the_collisions_are_index_lookups_of_the_live_claims(workspace):
    """The claims are probed through their partial index of unreleased paths, by
    equality and by range, never scanned: the cost is flat in the claims held."""
    from coordination.db import sql
    from coordination.db.rows import dialect
    from tests.coordination.api.test_issues_ready import plan_of

    queue = sql.Queue(workspace_id=workspace.pk, avoid_collisions=True)
    plan = plan_of(sql.queue_page(dialect(), queue, limit=100, offset=0))
    assert "one_unreleased_claim_per_path" in plan, plan
    if connection.vendor == "sqlite":
        assert "SCAN c " not in plan and "SCAN issue_file_claims" not in plan, plan
    else:
        assert "Seq Scan on issue_file_claims" not in plan, plan


# --- how the queue's statements run (PostgreSQL's plans, as its planner chooses them) --


def plan_nodes(statement, *, analyze=False):
    """Every node of PostgreSQL's plan for a statement, subplans included."""
    sql, params = statement
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN ({'ANALYZE, ' if analyze else ''}FORMAT JSON) {sql}", params)
        (plan,) = cursor.fetchone()[0]
    found, todo = [], [plan["Plan"]]
    while todo:
        node = todo.pop()
        found.append(node)
        todo += node.get("Plans", [])
    return found


def queue_statements(workspace, **flags):
    from coordination.db import sql
    from coordination.db.rows import dialect

    queue = sql.Queue(workspace_id=workspace.pk, **flags)
    return {
        "count": sql.queue_count(dialect(), queue),
        "page": sql.queue_page(dialect(), queue, limit=100, offset=0),
    }


@pytest.mark.postgres
def test_with_free_only_the_issues_the_blocked_ones_leave_have_their_paths_checked(
    workspace, queued, holder
):
    """Checking an issue's paths costs index probes for each path; a blocked issue is
    out whatever they find. Here 2 of 7 ready issues are not blocked: the expected
    paths are read for those 2 only (once for the check, once for the page's rows)."""
    holder(["held/"])
    blocker = queued("blocker", ["src/blocker.py"], age=9)
    queued("free", ["docs/free.md"], age=8)
    for n in range(5):
        blocked = queued(f"blocked {n}", [f"src/b{n}.py", "src/"], age=n)
        graph.link_issues(
            workspace=workspace, source_id=blocker.pk, type="blocks", target_id=blocked.pk
        )
    for name, statement in queue_statements(workspace, free=True).items():
        loops = [
            node["Actual Loops"]
            for node in plan_nodes(statement, analyze=True)
            if node.get("Relation Name") == "issue_expected_paths"
        ]
        assert loops and max(loops) == 2, (name, loops)


@pytest.mark.postgres
def test_the_claims_are_probed_from_each_expected_path_whatever_the_statistics(
    workspace, make_issue, make_session
):
    """With thousands of live claims and fresh statistics, PostgreSQL's planner, left
    free, once read every live claim for each issue and probed its expected paths from
    them (seconds a page). The claims are read only by index, from an expected path:
    each read of the claims is a probe of their partial index on a path the expected
    path gives (equality or its subtree's range)."""
    from coordination.models import AgentSession, FileClaim

    holding = make_issue(title="holding", status=S.IN_PROGRESS)
    sessions = [make_session(f"holder-{n}") for n in range(20)]
    FileClaim.objects.bulk_create(
        FileClaim(
            workspace=workspace,
            issue=holding,
            session=sessions[n % 20],
            agent=sessions[n % 20].agent,
            path=f"lib/h{n}/file.py",
        )
        for n in range(2_000)
    )
    for n in range(30):
        issue = make_issue(title=f"ready {n}", status=S.TODO)
        graph.set_expected_paths(issue=issue, paths=[f"src/m{n}.py", f"src/m{n}/", "lib/h7/"])
    with connection.cursor() as cursor:
        for model in (FileClaim, AgentSession, Issue):
            cursor.execute(f"ANALYZE {model._meta.db_table}")
        cursor.execute("ANALYZE issue_expected_paths")
    checked = [
        ("default", "page", queue_statements(workspace, avoid_collisions=True)["page"]),
        *(("free", name, sql) for name, sql in queue_statements(workspace, free=True).items()),
    ]
    for label, name, statement in checked:
        claims = [
            node
            for node in plan_nodes(statement)
            if node.get("Relation Name") == FileClaim._meta.db_table
        ]
        assert claims, (label, name)
        for node in claims:
            assert node.get("Index Name") == "one_unreleased_claim_per_path", (label, name, node)
            assert ".probe" in node.get("Index Cond", ""), (label, name, node)
