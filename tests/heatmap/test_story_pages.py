"""The story pages: the board, an issue, an agent, a path. Who may see them, what they
show from known data, that every issue, agent and path they name is a link, and that
their statements do not grow with their rows."""

import re
from datetime import timedelta
from urllib.parse import quote

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from coordination.errors import CoordinationError
from coordination.models import Issue, Project
from coordination.services import agents, file_claims, leases, messages, workflow
from heatmap.story import with_story
from tests.conftest import expire
from tests.heatmap.conftest import T0

pytestmark = pytest.mark.django_db

PAGES = ("issues/", "issues/{issue}/", "agents/coder-1/", "paths/?path=src/a.py")


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def story(workspace, make_issue, make_session):
    """coder-1 leases #holder and claims src/a.py; coder-2 on #wanter is refused it,
    then takes it by force; a message and a transition on the way."""
    holder = make_issue(title="Holder issue", status="todo", priority=Issue.Priority.URGENT)
    wanter = make_issue(title="Wanter issue", status="todo")
    one = make_session("coder-1")
    two = make_session("coder-2")
    leases.claim_issue(workspace=workspace, issue_id=holder.pk, session_id=one.pk)
    workflow.transition_issue(
        workspace=workspace, issue_id=holder.pk, to="in_progress", by_human=False
    )
    file_claims.claim_files(
        workspace=workspace, issue_id=holder.pk, paths=["src/a.py"], session_id=one.pk
    )
    leases.claim_issue(workspace=workspace, issue_id=wanter.pk, session_id=two.pk)
    with pytest.raises(CoordinationError):
        file_claims.claim_files(
            workspace=workspace, issue_id=wanter.pk, paths=["src/a.py"], session_id=two.pk
        )
    messages.post_message(
        workspace=workspace, scope=f"issue:{holder.pk}", body="Nearly there.", session_id=one.pk
    )
    return {"holder": holder, "wanter": wanter, "one": one, "two": two}


def url(workspace, page: str, **ids) -> str:
    return f"/workspaces/{workspace.slug}/{page.format(**ids)}"


def hrefs(response) -> set[str]:
    return set(re.findall(r'href="([^"]+)"', response.content.decode()))


# --- access -------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_a_member_sees_each_page(alice, workspace, story, page):
    response = logged_in(alice).get(url(workspace, page, issue=story["holder"].pk))
    assert response.status_code == 200
    assert f'href="/workspaces/{workspace.slug}/issues/"' in response.content.decode()  # the menu


@pytest.mark.parametrize("page", PAGES)
def test_anonymous_gets_the_login_page(client, workspace, story, page):
    target = url(workspace, page, issue=story["holder"].pk)
    response = client.get(target)
    assert response.status_code == 302 and response["Location"].startswith("/login/?next=")


@pytest.mark.parametrize("page", PAGES)
def test_a_member_of_another_workspace_gets_the_404_of_no_workspace(
    workspace, other_workspace, story, django_user_model, page
):
    stranger = django_user_model.objects.create_user("dora", password="dora-pw")
    other_workspace.members.add(stranger)
    client = logged_in(stranger)
    theirs = client.get(url(workspace, page, issue=story["holder"].pk))
    nowhere = client.get(f"/workspaces/no-such/{page.format(issue=story['holder'].pk)}")
    assert theirs.status_code == nowhere.status_code == 404
    assert theirs.content == nowhere.content
    assert b"acme" not in theirs.content.lower() and b"Holder issue" not in theirs.content


@pytest.mark.parametrize(
    "page",
    ["issues/999999/", "issues/99999999999999999999/", "agents/nobody/"],
)
def test_an_unknown_issue_or_agent_is_a_404(alice, workspace, story, page):
    assert logged_in(alice).get(url(workspace, page)).status_code == 404


def test_an_issue_of_another_workspace_is_a_404(alice, workspace, other_workspace):
    project = Project.objects.create(workspace=other_workspace, key="x", name="X")
    theirs = Issue.objects.create(workspace=other_workspace, project=project, title="Secret")
    response = logged_in(alice).get(url(workspace, "issues/{issue}/", issue=theirs.pk))
    assert response.status_code == 404 and b"Secret" not in response.content


# --- the board ----------------------------------------------------------------------


def card(response, issue: Issue) -> str:
    match = re.search(
        rf'<article class="issue-card" data-issue="{issue.pk}">(.*?)</article>',
        response.content.decode(),
        re.S,
    )
    assert match, f"no card for #{issue.pk}"
    return match.group(1)


def test_the_board_has_a_column_per_status_with_cards_holders_and_counts(alice, workspace, story):
    response = logged_in(alice).get(url(workspace, "issues/"))
    body = response.content.decode()
    statuses = re.findall(r'<section class="column[^"]*" data-status="(\w+)"', body)
    assert statuses == ["backlog", "todo", "in_progress", "in_review", "done", "cancelled"]
    assert re.search(r'class="column folded" data-status="done">\s*<details>', body)
    holder = card(response, story["holder"])
    assert "Holder issue" in holder and "Urgent" in holder and "core" in holder
    assert 'class="holder live"' in holder and "coder-1" in holder
    assert "1 claim" in holder and "1 conflict" in holder
    assert f'href="/workspaces/acme/issues/{story["holder"].pk}/"' in holder
    assert 'href="/workspaces/acme/agents/coder-1/"' in holder


def test_a_dead_holder_shows_a_stale_mark(alice, workspace, story):
    expire(story["one"])
    holder = card(logged_in(alice).get(url(workspace, "issues/")), story["holder"])
    assert 'class="holder stale"' in holder and "(stale)" in holder


@pytest.mark.parametrize(
    ("query", "shown", "hidden"),
    [
        ("agent=coder-1", "holder", "wanter"),
        ("agent=coder-2", "wanter", "holder"),
        ("text=wanter", "wanter", "holder"),
        ("text=%23{holder}", "holder", "wanter"),
    ],
)
def test_the_board_filters_by_agent_and_text(alice, workspace, story, query, shown, hidden):
    query = query.format(holder=story["holder"].pk)
    body = logged_in(alice).get(url(workspace, f"issues/?{query}")).content.decode()
    assert f'data-issue="{story[shown].pk}"' in body
    assert f'data-issue="{story[hidden].pk}"' not in body


def test_the_board_filters_by_project(alice, workspace, story):
    other = Project.objects.create(workspace=workspace, key="web", name="Web")
    elsewhere = Issue.objects.create(workspace=workspace, project=other, title="Elsewhere")
    body = logged_in(alice).get(url(workspace, "issues/?project=web")).content.decode()
    assert f'data-issue="{elsewhere.pk}"' in body
    assert f'data-issue="{story["holder"].pk}"' not in body


@pytest.mark.parametrize(
    ("query", "field"),
    [("project=nope", "project"), ("agent=nobody", "agent"), ("since=yesterday", "since")],
)
def test_a_bad_board_filter_is_shown_in_place_in_the_form(alice, workspace, story, query, field):
    response = logged_in(alice).get(url(workspace, f"issues/?{query}"))
    body = response.content.decode()
    assert response.status_code == 400
    assert 'id="board-filters"' in body  # the form stays, with the field marked
    assert 'aria-invalid="true"' in body and 'class="field-error"' in body
    assert f"<li>{field}:" in body
    assert 'id="board"' not in body


def board_statements(client: Client, path: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(path).status_code == 200
    return len(queries)


def crowd(workspace, project, count: int, make_session) -> None:
    """``count`` issues across the statuses, some leased, with claims."""
    statuses = ["backlog", "todo", "in_progress", "in_review", "done", "cancelled"]
    issues = Issue.objects.bulk_create(
        Issue(workspace=workspace, project=project, title=f"Issue {n}", status=statuses[n % 6])
        for n in range(count)
    )
    session = make_session(f"crowd-{count}")
    for issue in issues[:2]:
        file_claims.claim_files(
            workspace=workspace, issue_id=issue.pk, paths=[f"crowd/{issue.pk}.py"]
        )
    Project.objects.filter(pk=project.pk).update(agent_wip_limit=50)
    leases.claim_issue(workspace=workspace, issue_id=issues[1].pk, session_id=session.pk)


def test_the_board_costs_the_same_statements_for_10_and_100_issues(
    alice, workspace, project, make_session
):
    client = logged_in(alice)
    crowd(workspace, project, 10, make_session)
    few = board_statements(client, url(workspace, "issues/"))
    crowd(workspace, project, 90, make_session)
    many = board_statements(client, url(workspace, "issues/"))
    assert few == many
    assert many <= 12  # session, user, workspace, filters' lists, totals, cards


# --- an issue -----------------------------------------------------------------------


def test_the_issue_page_shows_what_it_holds_and_its_timeline(alice, workspace, story):
    holder = story["holder"]
    response = logged_in(alice).get(url(workspace, "issues/{issue}/", issue=holder.pk))
    body = response.content.decode()
    assert "Holder issue" in body and "In Progress" in body and "Urgent" in body
    holds = body[body.index('id="holds"') : body.index("Timeline")]
    assert "coder-1" in holds and "src/a.py" in holds and 'class="tag live"' in holds
    timeline = body[body.index('id="timeline"') :]
    kinds = re.findall(r'data-kind="([\w.]+)"', timeline)
    assert kinds[0] == "message.posted"  # newest first
    for kind in ("lease.granted", "issue.transitioned", "claims.granted"):
        assert kind in kinds
    assert "conflict" in kinds  # coder-2 was refused a path held here
    assert "Nearly there." in timeline
    assert "Moved from todo to in_progress" in timeline
    wanter = story["wanter"].pk
    assert f'href="/workspaces/acme/issues/{wanter}/"' in timeline  # with whom
    assert 'href="/workspaces/acme/agents/coder-2/"' in timeline
    assert 'href="/workspaces/acme/paths/?path=src%2Fa.py"' in timeline


def test_the_refused_issue_s_timeline_says_who_held_the_path(alice, workspace, story):
    wanter = story["wanter"]
    body = logged_in(alice).get(url(workspace, "issues/{issue}/", issue=wanter.pk))
    timeline = body.content.decode().split('id="timeline"')[1]
    refused = re.search(r'data-kind="claims.refused">(.*?)</li>', timeline, re.S)
    assert refused, timeline
    assert "was refused" in refused.group(1) and "src/a.py" in refused.group(1)
    assert f"/issues/{story['holder'].pk}/" in refused.group(1)
    assert "/agents/coder-1/" in refused.group(1)


def test_a_forced_claim_and_a_stale_reclaim_read_as_such(alice, workspace, story):
    holder, wanter = story["holder"], story["wanter"]
    file_claims.claim_files(
        workspace=workspace,
        issue_id=wanter.pk,
        paths=["src/a.py"],
        session_id=story["two"].pk,
        force=True,
    )
    expire(story["one"])
    taker = agents.register_session(workspace=workspace, agent_name="coder-3")
    leases.claim_issue(workspace=workspace, issue_id=holder.pk, session_id=taker.pk)
    client = logged_in(alice)
    held = client.get(url(workspace, "issues/{issue}/", issue=holder.pk)).content.decode()
    assert "released overridden by" in held
    assert "released expired (its holder stopped heartbeating); taken over by" in held
    assert "/agents/coder-3/" in held
    assert "took" in held and "from this issue by force" in held
    forcer = client.get(url(workspace, "issues/{issue}/", issue=wanter.pk)).content.decode()
    assert "Forced" in forcer and "away from" in forcer


def test_the_issue_page_statements_do_not_grow_with_its_events(alice, workspace, story):
    client, holder = logged_in(alice), story["holder"]
    path = url(workspace, "issues/{issue}/", issue=holder.pk)
    few = board_statements(client, path)
    for n in range(20):
        messages.post_message(
            workspace=workspace,
            scope=f"issue:{holder.pk}",
            body=f"note {n}",
            session_id=story["one"].pk,
        )
        file_claims.claim_files(
            workspace=workspace,
            issue_id=holder.pk,
            paths=[f"src/n{n}.py"],
            session_id=story["one"].pk,
        )
    assert board_statements(client, path) == few


def test_a_report_s_link_is_a_link_only_when_it_is_a_web_address(alice, workspace, story):
    holder = story["holder"]
    path = url(workspace, "issues/{issue}/", issue=holder.pk)
    report = {"summary": "Done", "verification": "Tests", "pr_link": "javascript:alert(1)"}
    Issue.objects.filter(pk=holder.pk).update(report=report)
    body = logged_in(alice).get(path).content.decode()
    assert 'href="javascript:' not in body and "javascript:alert(1)" in body
    Issue.objects.filter(pk=holder.pk).update(report={**report, "pr_link": "https://x.test/1"})
    assert 'href="https://x.test/1"' in logged_in(alice).get(path).content.decode()


# --- an agent -----------------------------------------------------------------------


def test_the_agent_page_tells_its_sessions_holdings_and_conflicts(
    alice, workspace, story, make_session
):
    one = story["one"]
    ended = make_session("coder-1")
    agents.end_session(workspace=workspace, session_id=ended.pk)
    died = make_session("coder-1")
    expire(died)
    body = logged_in(alice).get(url(workspace, "agents/coder-1/")).content.decode()
    assert 'id="liveness">live now' in body
    sessions = body[body.index('id="sessions"') : body.index('id="caused"')]
    assert "still live" in sessions and "ended cleanly" in sessions and "died" in sessions
    assert f">{one.pk}<" in sessions
    holdings = body[body.index('id="holdings"') : body.index('id="sessions"')]
    assert f"/issues/{story['holder'].pk}/" in holdings and "src/a.py" in holdings
    suffered = body[body.index('id="suffered"') :]
    assert "/agents/coder-2/" in suffered and "rejected" in suffered
    assert f"/issues/{story['holder'].pk}/" in body[body.index('id="worked"') :]
    other = logged_in(alice).get(url(workspace, "agents/coder-2/")).content.decode()
    assert "1 in the window: it was refused" in other


def test_an_agent_with_no_live_session_is_not_live(alice, workspace, story):
    expire(story["two"])
    body = logged_in(alice).get(url(workspace, "agents/coder-2/")).content.decode()
    assert 'id="liveness">not live' in body


def test_the_agent_page_statements_do_not_grow_with_its_sessions(
    alice, workspace, story, make_session
):
    client = logged_in(alice)
    few = board_statements(client, url(workspace, "agents/coder-1/"))
    for _ in range(10):
        make_session("coder-1")
    assert board_statements(client, url(workspace, "agents/coder-1/")) == few


# --- a path -------------------------------------------------------------------------


def test_the_path_page_tells_who_claimed_it_and_who_collides_on_it(alice, workspace, story):
    body = logged_in(alice).get(url(workspace, "paths/?path=./src//a.py")).content.decode()
    assert '<code class="big">src/a.py</code>' in body
    claims = body[body.index('id="path-claims"') :]
    assert f"/issues/{story['holder'].pk}/" in claims and "/agents/coder-1/" in claims
    pairs = body[body.index('id="path-pairs"') :]
    assert f"/issues/{story['wanter'].pk}/" in pairs and f"/issues/{story['holder'].pk}/" in pairs
    assert 'id="path-conflicts-data"' in body


def test_a_directory_s_page_covers_its_subtree_and_links_its_files(alice, workspace, story):
    body = logged_in(alice).get(url(workspace, "paths/?path=src")).content.decode()
    beneath = body[body.index('id="beneath"') :]
    assert 'href="/workspaces/acme/paths/?path=src%2Fa.py"' in beneath


@pytest.mark.parametrize("query", ["", "?path=", "?path=/etc/passwd", "?path=a/../b"])
def test_a_bad_path_is_a_400_shown_in_the_form(alice, workspace, query):
    response = logged_in(alice).get(url(workspace, f"paths/{query}"))
    body = response.content.decode()
    assert response.status_code == 400
    assert 'name="path"' in body and 'aria-invalid="true"' in body and "<li>path:" in body


# --- links from the other pages -----------------------------------------------------


def test_the_heatmap_and_health_link_their_paths_issues_and_agents(alice, workspace, story):
    client = logged_in(alice)
    heatmap = client.get(url(workspace, "heatmap/?mode=contention"))
    assert f"/workspaces/acme/paths/?path={quote('src/a.py', safe='')}" in hrefs(heatmap)
    assert f"/workspaces/acme/issues/{story['wanter'].pk}/" in hrefs(heatmap)
    health = client.get(url(workspace, "health/"))
    assert "/workspaces/acme/agents/coder-1/" in hrefs(health)
    assert "/workspaces/acme/issues/" in hrefs(client.get("/workspaces/"))


def test_a_card_counts_its_conflicts_on_either_side_once_each(
    workspace, make_issue, add_conflict, add_claim
):
    card, other = make_issue(), make_issue()
    add_conflict(card, other, "src/a.py", T0)  # the card was refused
    add_conflict(other, card, "src/b.py", T0)  # the card held a path another wanted
    add_conflict(card, card, "src/c.py", T0)  # both sides at once: one conflict
    add_conflict(other, other, "src/d.py", T0)  # not the card's
    add_conflict(card, other, "src/e.py", T0 - timedelta(days=2))  # before the window
    add_claim(card, "src/a.py", T0)
    add_claim(card, "src/z.py", T0 + timedelta(days=2))  # after it
    window = {"since": T0 - timedelta(hours=1), "until": T0 + timedelta(hours=1)}
    shown = with_story(Issue.objects.filter(pk=card.pk), **window).get()
    assert (shown.conflicts_in_window, shown.claims_in_window) == (3, 1)
