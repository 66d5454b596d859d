"""Who did what, in one wording wherever a person reads it (``coordination.actors``):
an operator by name, an agent by name, a key by name; the exact sentences of the issue
timeline, the admin's event log and the messages the services post."""

import re

import pytest
from django.test import Client

from coordination import actors
from coordination.admin.logs import EventAdmin
from coordination.models import Agent, ApiKey, Event, Issue, IssueLease, Message
from coordination.services import agents, file_claims, leases, operators, work
from tests.api_helpers import post
from tests.conftest import expire, make_client

pytestmark = pytest.mark.django_db


def timeline_of(member, issue) -> list[str]:
    """The issue page's timeline entries as a reader sees them, newest first."""
    client = Client()
    client.force_login(member)
    page = client.get(f"/workspaces/{issue.workspace.slug}/issues/{issue.pk}/").content.decode()
    timeline = page.split('id="timeline"')[1].split("</ol>")[0]
    return [
        " ".join(re.sub(r"<[^>]+>", "", what).split())
        for what in re.findall(
            r'<span class="what">(.*?)</span>\s*(?:<blockquote|</li>)', timeline, re.S
        )
    ]


@pytest.fixture
def agent(workspace):
    return Agent.objects.create(workspace=workspace, name="coder-1")


@pytest.fixture
def fleet_key(workspace):
    key, raw = ApiKey.issue(workspace, "runner-fleet")
    return key, make_client(raw)


def test_a_runners_give_back_by_a_fleet_key_names_the_key(alice, workspace, make_issue, fleet_key):
    _, client = fleet_key
    issue = make_issue(status="todo")
    work.start_work(workspace=workspace, agent_name="erin", issue_id=issue.pk)
    response = post(client, f"/issues/{issue.pk}/transition/", {"to": "todo"})
    assert response.status_code == 200, response.content
    assert "Moved from in_progress to todo by key runner-fleet" in timeline_of(alice, issue)
    assert "Moved from todo to in_progress by erin" in timeline_of(alice, issue)


def test_a_transition_by_an_agent_key_names_the_agent(alice, workspace, make_issue, agent):
    _, raw = ApiKey.issue(workspace, "coder-key", kind=ApiKey.Kind.AGENT, agent=agent)
    issue = make_issue(status="todo")
    work.start_work(workspace=workspace, agent_name=agent.name, issue_id=issue.pk)
    post(make_client(raw), f"/issues/{issue.pk}/transition/", {"to": "todo"})
    assert "Moved from in_progress to todo by coder-1" in timeline_of(alice, issue)


def test_an_operators_send_back_names_the_operator_in_the_timeline_and_its_message(
    alice, workspace, make_issue
):
    issue = make_issue(status="todo")
    work.start_work(workspace=workspace, agent_name="erin", issue_id=issue.pk)
    Issue.objects.filter(pk=issue.pk).update(status="in_review")
    outcome = operators.send_back_issues(
        issues=Issue.objects.filter(pk=issue.pk), note="Flaky test.", operator="ops"
    )
    assert outcome.done == [f"#{issue.pk}"]
    entries = timeline_of(alice, issue)
    assert "Moved from in_review to in_progress by operator ops" in entries
    assert "Moved from in_progress to todo by operator ops" in entries
    assert f"Operator ops posted to issue:{issue.pk}" in entries
    assert Message.objects.filter(scope=f"issue:{issue.pk}").last().body == (
        "Sent back by operator ops: Flaky test."
    )


def test_an_expired_reclaim_says_who_took_it_over(alice, workspace, make_issue, make_session):
    issue = make_issue()
    old = work.start_work(
        workspace=workspace, agent_name="oldie", issue_id=issue.pk, paths=["src/a.py"]
    ).session
    expire(old)
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=make_session("newbie").pk)
    entries = timeline_of(alice, issue)
    assert (
        "Lease of oldie released expired (its holder stopped heartbeating); taken over by newbie"
        in entries
    )
    assert (
        "Claims of oldie released expired (its holder stopped heartbeating);"
        " taken over by newbie: src/a.py" in entries
    )


def test_a_forced_claim_and_an_operators_force_release_name_who_took(
    alice, workspace, make_issue, make_session
):
    holder, taker = make_issue(title="holder"), make_issue(title="taker")
    one = make_session("coder-1")
    leases.claim_issue(workspace=workspace, issue_id=holder.pk, session_id=one.pk)
    file_claims.claim_files(
        workspace=workspace, issue_id=holder.pk, paths=["src/a.py"], session_id=one.pk
    )
    file_claims.claim_files(
        workspace=workspace,
        issue_id=taker.pk,
        paths=["src/a.py"],
        session_id=make_session("coder-2").pk,
        force=True,
    )
    operators.force_release_leases(leases=IssueLease.objects.filter(issue=holder), operator="ops")
    entries = timeline_of(alice, holder)
    assert "Claims of coder-1 released overridden by coder-2: src/a.py" in entries
    assert "Lease of coder-1 released overridden by operator ops" in entries
    assert f"Operator ops posted to issue:{holder.pk}" in entries


def test_a_message_names_its_author_the_key_the_session_or_the_agent_key(
    alice, workspace, issue, make_session, agent, fleet_key
):
    _, client = fleet_key
    scope = f"issue:{issue.pk}"
    session = make_session("erin")
    _, raw = ApiKey.issue(workspace, "coder-key", kind=ApiKey.Kind.AGENT, agent=agent)
    for sender, body in (
        (client, {"scope": scope, "body": "by the key"}),
        (client, {"scope": scope, "body": "in a session", "session": session.pk}),
        (make_client(raw), {"scope": scope, "body": "by the agent key"}),
    ):
        response = post(sender, "/messages/", body)
        assert response.status_code == 201, response.content
    entries = timeline_of(alice, issue)
    assert entries[:3] == [
        f"coder-1 posted to {scope}",
        f"erin posted to {scope}",
        f"Key runner-fleet posted to {scope}",
    ]
    assert "someone" not in " ".join(entries)
    event = Event.objects.filter(type="message.posted").order_by("id").first()
    assert event.data["key"] == "runner-fleet" and event.agent_id is None


def test_the_admins_event_log_says_who_in_the_same_words(workspace, make_issue, fleet_key):
    key, client = fleet_key
    issue = make_issue(status="todo")
    session = agents.register_session(workspace=workspace, agent_name="erin")
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    post(client, f"/issues/{issue.pk}/transition/", {"to": "in_progress"})
    operators.transition_issues(issues=Issue.objects.filter(pk=issue.pk), to="todo", operator="ops")
    who = EventAdmin.who
    by_type = {
        event.type + str(event.data.get("to", "")): who(None, event)
        for event in Event.objects.select_related("agent")
    }
    assert by_type["lease.granted"] == f"erin · session {session.pk}"
    assert by_type["issue.transitionedin_progress"] == "key runner-fleet"
    assert by_type["issue.transitionedtodo"] == "operator ops"
    assert actors.key_name(key) == "runner-fleet"
