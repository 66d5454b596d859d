"""GET /issues/ready/ [get_ready_issues]: what an agent should take next."""

from datetime import timedelta

import pytest
from django.utils import timezone

from coordination.models import Issue, Project
from coordination.services import leases
from tests.api_helpers import V1, assert_error, post
from tests.conftest import expire

pytestmark = pytest.mark.django_db
S = Issue.Status


def titles(response):
    assert response.status_code == 200, response.content
    return [row["title"] for row in response.json()["results"]]


@pytest.fixture
def queue(make_issue):
    """Ready issues of every priority; the later in this list, the older."""
    made = {}
    for age, (title, priority) in enumerate(
        [
            ("none-new", 0),
            ("low", 4),
            ("urgent-new", 1),
            ("high", 2),
            ("urgent-old", 1),
            ("medium", 3),
            ("none-old", 0),
        ]
    ):
        issue = make_issue(title=title, status=S.TODO, priority=priority)
        Issue.objects.filter(pk=issue.pk).update(created_at=timezone.now() - timedelta(days=age))
        made[title] = issue
    return made


def test_urgent_first_none_last_oldest_first_within(api, queue):
    assert titles(api.get(f"{V1}/issues/ready/")) == [
        "urgent-old",
        "urgent-new",
        "high",
        "medium",
        "low",
        "none-old",
        "none-new",
    ]


def test_leased_closed_and_unready_issues_are_left_out(
    api, workspace, queue, make_issue, make_session
):
    leases.claim_issue(workspace=workspace, issue_id=queue["high"].pk, session_id=make_session().pk)
    make_issue(title="backlog", status=S.BACKLOG)
    make_issue(title="undescribed", status=S.TODO, description="   ")
    make_issue(title="done", status=S.DONE)
    listed = titles(api.get(f"{V1}/issues/ready/"))
    assert "high" not in listed and len(listed) == 6


def test_an_issue_whose_holder_died_is_ready_again(api, workspace, queue, make_session):
    holder = make_session()
    leases.claim_issue(workspace=workspace, issue_id=queue["high"].pk, session_id=holder.pk)
    expire(holder)
    rows = {row["title"]: row for row in api.get(f"{V1}/issues/ready/").json()["results"]}
    # Shown with its dead holder's lease, as the issue itself shows it.
    assert rows["high"]["lease"]["live"] is False
    assert rows["high"]["lease"]["agent"] == holder.agent.name
    shown = api.get(f"{V1}/issues/{queue['high'].pk}/").json()
    assert rows["high"] == {**shown, "missing": [], "collisions": []}


def test_every_page_of_a_long_queue(api, project, workspace):
    Issue.objects.bulk_create(
        Issue(
            workspace=workspace,
            project=project,
            title=f"issue {n:03d}",
            description="Done when it is done.",
            status=S.TODO,
            priority=1 + n % 2,
        )
        for n in range(105)
    )
    first = api.get(f"{V1}/issues/ready/").json()
    second = api.get(first["next"]).json()
    assert first["count"] == second["count"] == 105
    assert (len(first["results"]), len(second["results"])) == (100, 5)
    assert second["next"] is None and second["previous"] is not None
    listed = [row["title"] for row in first["results"] + second["results"]]
    urgent = [f"issue {n:03d}" for n in range(0, 105, 2)]  # priority 1, then 2
    assert listed == urgent + [f"issue {n:03d}" for n in range(1, 105, 2)]
    assert_error(api.get(f"{V1}/issues/ready/?page=3"), 404, "not_found")


def test_include_not_ready_lists_the_rest_with_what_each_misses(api, make_issue, queue):
    make_issue(title="backlog", status=S.BACKLOG, priority=1)
    make_issue(title="undescribed", status=S.TODO, description="")
    make_issue(title="closed", status=S.CANCELLED)
    rows = api.get(f"{V1}/issues/ready/?include_not_ready=true").json()["results"]
    assert [row["title"] for row in rows][:7] == [
        "urgent-old",
        "urgent-new",
        "high",
        "medium",
        "low",
        "none-old",
        "none-new",
    ]
    rest = {row["title"]: row["missing"] for row in rows[7:]}
    assert rest == {"backlog": ["status"], "undescribed": ["description"]}
    assert all(row["missing"] == [] for row in rows[:7])


def test_project_filter_and_bad_queries(api, workspace, project, queue, make_issue):
    other = Project.objects.create(workspace=workspace, key="web", name="Web")
    make_issue(title="web-one", status=S.TODO, project=other)
    assert titles(api.get(f"{V1}/issues/ready/?project=web")) == ["web-one"]
    assert_error(api.get(f"{V1}/issues/ready/?project=nope"), 400, "invalid")
    assert_error(api.get(f"{V1}/issues/ready/?include_not_ready=maybe"), 400, "invalid")


def test_priority_is_set_through_the_api_and_validated(api, project):
    body = {"project": "core", "title": "T", "description": "D", "priority": 2}
    created = post(api, "/issues/", body)
    assert created.status_code == 201 and created.json()["priority"] == 2
    issue_id = created.json()["id"]
    assert (
        api.patch(f"{V1}/issues/{issue_id}/", {"priority": 1}, format="json").json()["priority"]
        == 1
    )
    for bad in (5, -1, "1", True, None):
        assert_error(
            api.patch(f"{V1}/issues/{issue_id}/", {"priority": bad}, format="json"), 400, "invalid"
        )
    assert Issue.objects.get(pk=issue_id).priority == 1


def test_another_workspace_sees_its_own_queue(stranger_api, queue):
    assert titles(stranger_api.get(f"{V1}/issues/ready/")) == []


def plan_of(statement) -> str:
    """The database's plan for a statement, as text (rows forced off a sequential scan
    and a sort on PostgreSQL: a test database is too small to need the index)."""
    from django.db import connection, transaction

    sql, params = statement
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("SET LOCAL enable_sort = off")
            cursor.execute(f"EXPLAIN {sql}", params)
        else:
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(row) for row in cursor.fetchall())


def test_the_queue_is_read_off_its_partial_index_in_order(workspace, queue):
    # The statements' filter and order are the index's own expressions (sql.queue's
    # READY and RANK, the model's READY and READY_RANK): were they to drift apart, the
    # database would sort every open issue again. (The page's 100 rows are sorted again
    # after their joins: that sort is not this one.)
    from coordination.db import sql
    from coordination.db.rows import dialect

    ready = sql.Queue(workspace_id=workspace.pk)
    plan = plan_of(sql.queue_window(dialect(), ready, limit=100, offset=0))
    assert "issue_ready_queue_idx" in plan, plan
    assert "Sort" not in plan and "TEMP B-TREE FOR ORDER BY" not in plan, plan
