"""The managers' pages: who may see them, what they show, and that they stay offline."""

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from coordination.models import ClaimConflict, Run
from coordination.services import agents
from heatmap.selectors import code_heatmap
from tests.conftest import expire
from tests.heatmap.conftest import T0, WINDOW

pytestmark = pytest.mark.django_db
PAGES = ("heatmap", "health")
WINDOW_QUERY = {"since": "2026-11-01T12:00", "until": "2026-11-02T12:00"}


@pytest.fixture
def alice(workspace, django_user_model):
    """A manager: a member of ``workspace``, not staff."""
    user = django_user_model.objects.create_user("alice", password="alice-pw")
    workspace.members.add(user)
    return user


@pytest.fixture
def charlie(other_workspace, django_user_model):
    """A member of another workspace only."""
    user = django_user_model.objects.create_user("charlie", password="charlie-pw")
    other_workspace.members.add(user)
    return user


@pytest.fixture
def root(django_user_model):
    return django_user_model.objects.create_superuser("root", password="root-pw")


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def embedded_json(response, element_id: str):
    match = re.search(
        rf'<script id="{element_id}" type="application/json">(.*?)</script>',
        response.content.decode(),
        re.S,
    )
    assert match, f"no #{element_id} in the page"
    return json.loads(match.group(1))


# --- access -------------------------------------------------------------------------


def test_home_sends_people_to_login_or_to_their_workspaces(client, alice):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert logged_in(alice).get("/")["Location"] == "/workspaces/"


@pytest.mark.parametrize(
    "url", ["/workspaces/", "/workspaces/acme/heatmap/", "/workspaces/acme/health/"]
)
def test_anonymous_gets_the_login_page(client, workspace, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={url}"


@pytest.mark.parametrize("page", PAGES)
def test_a_member_sees_the_pages(alice, workspace, page):
    response = logged_in(alice).get(f"/workspaces/{workspace.slug}/{page}/")
    assert response.status_code == 200


@pytest.mark.parametrize("page", PAGES)
def test_a_non_member_gets_the_same_404_as_for_no_workspace(charlie, workspace, page):
    client = logged_in(charlie)
    hidden = client.get(f"/workspaces/{workspace.slug}/{page}/")
    missing = client.get(f"/workspaces/no-such-workspace/{page}/")
    assert hidden.status_code == missing.status_code == 404
    assert workspace.slug not in hidden.content.decode()


@pytest.mark.parametrize("page", PAGES)
def test_a_superuser_sees_every_workspace(root, workspace, other_workspace, page):
    client = logged_in(root)
    for slug in (workspace.slug, other_workspace.slug):
        assert client.get(f"/workspaces/{slug}/{page}/").status_code == 200


def test_a_member_logs_in_with_the_login_form(client, alice):
    response = client.post("/login/", {"username": "alice", "password": "alice-pw"})
    assert response.status_code == 302 and response["Location"] == "/workspaces/"
    assert client.get("/workspaces/").status_code == 200
    assert client.post("/logout/").status_code == 302
    assert client.get("/workspaces/").status_code == 302


# --- workspace list -------------------------------------------------------------------


def test_workspace_list_shows_own_workspaces_with_live_agents_and_recent_conflicts(
    alice, workspace, other_workspace, make_issue, make_session, add_conflict
):
    make_session("coder-1")
    expire(make_session("coder-2"))
    make_session("elsewhere", workspace=other_workspace)
    a, b = make_issue(), make_issue()
    add_conflict(a, b, "src/x.py", timezone.now() - timedelta(hours=1))
    add_conflict(a, b, "src/x.py", timezone.now() - timedelta(hours=30))
    page = logged_in(alice).get("/workspaces/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "/workspaces/acme/heatmap/" in html and "/workspaces/acme/health/" in html
    assert "globex" not in html
    rows = page.context["workspaces"]
    assert [(ws.slug, ws.live_agents, ws.recent_conflicts) for ws in rows] == [("acme", 1, 1)]


def test_workspace_list_costs_the_same_queries_for_many_workspaces(
    root, django_user_model, django_assert_max_num_queries
):
    from coordination.models import Workspace

    for index in range(12):
        Workspace.objects.create(slug=f"w{index}", name=f"W{index}")
    client = logged_in(root)
    with django_assert_max_num_queries(4):  # session, user, the one list query
        assert client.get("/workspaces/").status_code == 200


# --- heatmap ------------------------------------------------------------------------


def test_treemap_data_is_the_aggregation(alice, workspace, tree):
    response = logged_in(alice).get("/workspaces/acme/heatmap/", WINDOW_QUERY)
    figure = embedded_json(response, "treemap-data")
    trace = figure["data"][0]
    assert trace["type"] == "treemap"
    expected = code_heatmap(workspace, mode="claims", **WINDOW)
    assert trace["ids"] == ["/", *[node.path for node in expected.nodes]]
    assert trace["values"] == [expected.total, *[node.count for node in expected.nodes]]
    drill = dict(zip(trace["ids"], trace["customdata"], strict=True))
    assert "prefix=src" in drill["src"] and drill["README.md"] == ""


def test_drill_down_breadcrumb_and_table_links(alice, tree):
    response = logged_in(alice).get(
        "/workspaces/acme/heatmap/", {**WINDOW_QUERY, "prefix": "src/api"}
    )
    html = response.content.decode()
    assert response.context["heatmap"].total == 3
    crumbs = [crumb["label"] for crumb in response.context["breadcrumb"]]
    assert crumbs == ["all paths", "src", "api"]
    up = response.context["breadcrumb"][1]["url"]  # back to src, keeping the window
    assert up.endswith("&prefix=src") and "since=2026-11-01T12%3A00" in up
    assert up.replace("&", "&amp;") in html
    top = logged_in(alice).get("/workspaces/acme/heatmap/", WINDOW_QUERY)
    links = {child["node"].path: child["url"] for child in top.context["children"]}
    assert "prefix=src" in links["src"] and links["README.md"] == ""


def test_contention_mode_lists_the_pairs_that_collided(alice, make_issue, add_conflict):
    a, b = make_issue(title="Add rate limits"), make_issue(title="Rework auth")
    add_conflict(a, b, "src/api/auth.py", T0)
    response = logged_in(alice).get(
        "/workspaces/acme/heatmap/", {**WINDOW_QUERY, "mode": "contention"}
    )
    html = response.content.decode()
    assert 'id="pairs"' in html and "Add rate limits" in html and "Rework auth" in html
    assert embedded_json(response, "treemap-data")["data"][0]["values"][0] == 1


def test_an_empty_window_shows_an_empty_state_not_a_plot(alice, tree):
    response = logged_in(alice).get(
        "/workspaces/acme/heatmap/", {"since": "2020-01-01T00:00", "until": "2020-01-02T00:00"}
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="empty-state"' in html and 'id="treemap-data"' not in html
    assert "plotly.min.js" not in html


@pytest.mark.parametrize(
    "query",
    [{"mode": "heat"}, {"depth": "12"}, {"since": "soon"}, {"prefix": "/abs"}, {"project": "nope"}],
)
def test_a_bad_query_is_a_400_page_saying_why_in_the_form(alice, workspace, query):
    response = logged_in(alice).get("/workspaces/acme/heatmap/", query)
    html = response.content.decode()
    assert response.status_code == 400
    assert 'id="query-errors"' in html
    (field,) = query
    assert f"<li>{field}:" in html
    # The form stays, with the field marked in place and the value as sent.
    assert 'class="filters"' in html and 'aria-invalid="true"' in html
    assert 'class="field-error"' in html
    assert 'id="treemap"' not in html


def test_health_bad_window_is_a_400_page(alice, workspace):
    response = logged_in(alice).get(
        "/workspaces/acme/health/", {"until": "2000-01-01T00:00", "since": "2001-01-01T00:00"}
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert 'value="2001-01-01T00:00" aria-invalid="true"' in html  # kept, and marked
    assert 'id="kpis"' not in html


# --- health -------------------------------------------------------------------------


def test_health_shows_live_agents_loads_and_daily_series(
    alice, workspace, project, make_issue, make_session, add_conflict
):
    from coordination.services import leases

    live = make_session("coder-1", role="engineer")
    dead = make_session("coder-2")
    issue = make_issue()
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=live.pk)
    other = make_issue()
    leases.claim_issue(workspace=workspace, issue_id=other.pk, session_id=dead.pk)
    expire(dead)
    agents.end_session(workspace=workspace, session_id=make_session("coder-3").pk)
    now = timezone.now()
    add_conflict(issue, other, "src/x.py", now - timedelta(hours=1))
    add_conflict(issue, other, "src/x.py", now - timedelta(hours=1), forced=True)
    add_conflict(issue, other, "src/y.py", now - timedelta(hours=1), forced=True)
    response = logged_in(alice).get("/workspaces/acme/health/")
    assert response.status_code == 200
    assert [s.agent.name for s in response.context["agents"]] == ["coder-1"]
    load = response.context["loads"][0]
    assert (load.key, load.live, load.stale, load.limit) == ("core", 1, 1, 3)
    outcomes = response.context["outcomes"]
    assert (outcomes.started, outcomes.ended, outcomes.died, outcomes.live) == (3, 1, 1, 1)
    conflicts = embedded_json(response, "chart-conflicts-data")["data"]
    assert {trace["name"]: sum(trace["y"]) for trace in conflicts} == {"rejected": 1, "forced": 2}
    releases = embedded_json(response, "chart-lease-releases-data")["data"]
    assert [trace["name"] for trace in releases][:2] == ["expired", "agent_ended"]
    assert 'id="wip-load-data"' in response.content.decode()


def test_health_lists_runs_that_did_not_start(alice, workspace, make_issue, make_session):
    issue = make_issue()
    session = make_session()
    Run.objects.create(
        workspace=workspace,
        issue=issue,
        session=session,
        status=Run.Status.SKIPPED,
        error=Run.Error.WORKTREE_UNRESOLVED,
        error_detail="Bind a worktree to the agent.",
    )
    Run.objects.create(workspace=workspace, issue=issue, session=session)
    response = logged_in(alice).get("/workspaces/acme/health/")
    assert [run.status for run in response.context["runs"]] == ["skipped"]
    assert response.context["run_counts"] == {"skipped": 1, "cancelled": 0}
    assert "Bind a worktree to the agent." in response.content.decode()


# --- offline ------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_no_asset_comes_from_another_host(alice, tree, page):
    html = logged_in(alice).get(f"/workspaces/acme/{page}/", WINDOW_QUERY).content.decode()
    assets = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert "/static/plotly/plotly.min.js" in assets
    assert not [url for url in assets if re.match(r"^(https?:)?//", url)]


def test_plotly_js_is_served_from_our_static_files(client):
    from django.contrib.staticfiles import finders

    found = finders.find("plotly/plotly.min.js")
    assert found and Path(found).read_text(encoding="utf-8")[:200].lstrip().startswith("/**")


def test_conflicts_seen_here_are_the_logs_rows(alice, workspace, make_issue, add_conflict):
    a, b = make_issue(), make_issue()
    add_conflict(a, b, "x/y.py", T0)
    assert ClaimConflict.objects.count() == 1
    response = logged_in(alice).get(
        "/workspaces/acme/heatmap/", {**WINDOW_QUERY, "mode": "contention"}
    )
    assert response.context["hottest"] == [("x/y.py", 1)]
