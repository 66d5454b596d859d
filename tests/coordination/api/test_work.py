"""start_work / finish_work, and what a displaced holder hears."""

import pytest

from coordination.models import (
    Agent,
    AgentSession,
    ClaimConflict,
    FileClaim,
    Issue,
    IssueLease,
    Message,
    ReleaseReason,
    WipCapDenial,
)
from coordination.services import agents, file_claims, leases, work, workflow
from tests.api_helpers import V1, assert_error, post
from tests.conftest import expire
from tests.coordination.conftest import claim_lease, state

pytestmark = pytest.mark.django_db
REPORT = {"summary": "Rate limits per key.", "verification": "New tests; suite green."}


def start(api, issue, agent="coder-1", **extra):
    return post(api, "/work/start/", {"agent": agent, "issue": issue.pk, **extra})


def nothing_left_by(agent_name: str) -> bool:
    return not (
        AgentSession.objects.filter(agent__name=agent_name).exists()
        or IssueLease.objects.filter(agent__name=agent_name).exists()
        or FileClaim.objects.filter(agent__name=agent_name).exists()
    )


def test_start_work_opens_a_session_leases_claims_and_says_so(api, issue):
    response = start(api, issue, role="engineer", paths=["./src//api.py", "README.md"])
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"session", "lease", "claims", "message"}
    assert body["session"]["live"] and body["session"]["agent"] == "coder-1"
    assert body["lease"]["issue"] == issue.pk and body["lease"]["session"] == body["session"]["id"]
    assert sorted(claim["path"] for claim in body["claims"]) == ["README.md", "src/api.py"]
    assert (
        body["message"]["scope"] == f"issue:{issue.pk}"
        and "started work" in body["message"]["body"]
    )
    assert Agent.objects.get(name="coder-1").role == "engineer"


def test_start_work_moves_a_todo_issue_to_in_progress(api, make_issue):
    issue = make_issue(status=Issue.Status.TODO)
    start(api, issue)
    assert Issue.objects.get(pk=issue.pk).status == Issue.Status.IN_PROGRESS


def test_a_refused_start_leaves_the_status_too(api, workspace, make_issue, make_session):
    issue = make_issue(status=Issue.Status.TODO)
    other = make_issue()
    file_claims.claim_files(
        workspace=workspace,
        issue_id=other.pk,
        paths=["hot.py"],
        session_id=make_session("holder").pk,
    )
    assert_error(start(api, issue, agent="late", paths=["hot.py"]), 409, "file_conflict")
    assert Issue.objects.get(pk=issue.pk).status == Issue.Status.TODO


def test_start_work_without_paths_claims_nothing(api, issue):
    body = start(api, issue).json()
    assert body["claims"] == [] and IssueLease.objects.get().issue_id == issue.pk


def test_a_wip_refusal_leaves_nothing_but_its_denial(
    api, workspace, project, make_issue, make_session
):
    project.agent_wip_limit = 1
    project.save()
    leases.claim_issue(
        workspace=workspace, issue_id=make_issue().pk, session_id=make_session("holder").pk
    )
    issue = make_issue()
    body = assert_error(start(api, issue, agent="late", paths=["a.py"]), 409, "wip_limit_reached")
    assert body["limit"] == 1
    assert nothing_left_by("late")
    denial = WipCapDenial.objects.get()
    assert (denial.issue_id, denial.agent.name, denial.session_id) == (issue.pk, "late", None)


def test_a_held_lease_leaves_nothing(api, workspace, issue, make_session):
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=make_session("a").pk)
    assert_error(start(api, issue, agent="b", paths=["a.py"]), 409, "lease_held")
    assert nothing_left_by("b") and not WipCapDenial.objects.exists()


# --- taking over a dead session's issue -------------------------------------------------


def released_expired(api, issue, type):
    events = api.get(f"{V1}/events/?issue={issue.pk}&type={type}").json()["events"]
    return [
        (event["session"], event["agent"], event["data"])
        for event in events
        if event["data"]["reason"] == "expired"
    ]


def test_start_work_takes_over_a_dead_sessions_claims_and_assignment(api, workspace, make_issue):
    issue, elsewhere = make_issue(title="Taken over"), make_issue(title="Elsewhere")
    old = start(api, issue, agent="oldie", paths=["src/a.py", "src/b/"]).json()["session"]
    claimed = post(
        api, "/file-claims/", {"issue": elsewhere.pk, "paths": ["docs/x.md"], "session": old["id"]}
    )
    assert claimed.status_code == 201, claimed.content
    expire(AgentSession.objects.get(pk=old["id"]))

    response = start(api, issue, agent="newbie", paths=["src/c.py"])

    assert response.status_code == 201, response.content
    new = response.json()["session"]
    assert api.get(f"{V1}/issues/{issue.pk}/").json()["assignee"] == "newbie"
    claims = api.get(f"{V1}/file-claims/?session={old['id']}").json()["results"]
    assert sorted((c["path"], c["issue"], c["release_reason"]) for c in claims) == [
        ("docs/x.md", elsewhere.pk, None),  # another issue's: its paths' next claimer's
        ("src/a.py", issue.pk, "expired"),
        ("src/b/", issue.pk, "expired"),
    ]
    by = {"session": new["id"], "agent": "newbie"}
    assert released_expired(api, issue, "claims.released") == [
        (old["id"], "oldie", {"paths": ["src/a.py", "src/b/"], "reason": "expired", "by": by})
    ]
    [(session, agent, data)] = released_expired(api, issue, "lease.released")
    assert (session, agent, data["by"]) == (old["id"], "oldie", by)


def test_start_work_on_a_live_sessions_issue_is_still_refused(api, issue):
    old = start(api, issue, agent="oldie", paths=["src/a.py"]).json()["session"]
    assert_error(start(api, issue, agent="newbie", paths=["src/c.py"]), 409, "lease_held")
    assert api.get(f"{V1}/issues/{issue.pk}/").json()["assignee"] == "oldie"
    [claim] = api.get(f"{V1}/file-claims/?session={old['id']}").json()["results"]
    assert (claim["path"], claim["release_reason"]) == ("src/a.py", None)
    assert nothing_left_by("newbie")


def test_a_file_conflict_leaves_nothing_but_the_conflict_log(
    api, workspace, make_issue, make_session
):
    holder_issue = make_issue()
    file_claims.claim_files(
        workspace=workspace,
        issue_id=holder_issue.pk,
        paths=["hot.py"],
        session_id=make_session("holder").pk,
    )
    issue = make_issue()
    body = assert_error(
        start(api, issue, agent="late", paths=["cold.py", "hot.py"]), 409, "file_conflict"
    )
    assert body["conflicts"][0]["path"] == "hot.py" and body["conflicts"][0]["agent"] == "holder"
    assert nothing_left_by("late")
    assert not IssueLease.objects.filter(issue=issue).exists()
    assert not FileClaim.objects.filter(path="cold.py").exists()
    conflict = ClaimConflict.objects.get()
    assert (conflict.path, conflict.rejected_issue_id, conflict.holding_issue_id) == (
        "hot.py",
        issue.pk,
        holder_issue.pk,
    )
    assert conflict.rejected_agent.name == "late" and conflict.rejected_session_id is None
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    "body,status,code",
    [
        ({"paths": ["/etc/passwd"]}, 400, "invalid"),
        ({"paths": "a.py"}, 400, "invalid"),
        ({"worktree": "nope"}, 400, "invalid"),
        ({"issue": 999999}, 404, "not_found"),
    ],
)
def test_bad_start_requests_change_nothing(api, issue, body, status, code):
    assert_error(post(api, "/work/start/", {"agent": "x", "issue": issue.pk, **body}), status, code)
    assert nothing_left_by("x") and not Message.objects.exists()


def test_finish_work_moves_releases_and_ends(api, issue):
    started = start(api, issue, paths=["a.py", "b.py"]).json()
    session = started["session"]["id"]
    Issue.objects.filter(pk=issue.pk).update(status=Issue.Status.IN_PROGRESS)
    response = post(api, "/work/finish/", {"session": session, "issue": issue.pk, "report": REPORT})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["issue"]["status"] == "in_review" and body["issue"]["report"] == REPORT
    assert body["released"] == ["a.py", "b.py"]
    assert body["session"]["status"] == "ended" and not body["session"]["live"]
    assert set(FileClaim.objects.values_list("release_reason", flat=True)) == {"released"}
    assert IssueLease.objects.get().release_reason == "released"
    assert "Rate limits per key." in Message.objects.filter(scope=f"issue:{issue.pk}").last().body


def test_finish_work_without_a_report_is_refused_and_changes_nothing(api, issue):
    session = start(api, issue, paths=["a.py"]).json()["session"]["id"]
    Issue.objects.filter(pk=issue.pk).update(status=Issue.Status.IN_PROGRESS)
    body = assert_error(
        post(api, "/work/finish/", {"session": session, "issue": issue.pk}),
        409,
        "invalid_transition",
    )
    assert body["missing"] == ["report"]
    assert Issue.objects.get(pk=issue.pk).status == "in_progress"
    assert IssueLease.objects.get().released_at is None
    assert FileClaim.objects.get().released_at is None
    assert AgentSession.objects.get().status == "active"


def test_finish_work_by_a_session_without_the_lease_is_409(api, issue, make_session):
    start(api, issue)
    other = make_session("other")
    assert_error(
        post(api, "/work/finish/", {"session": other.pk, "issue": issue.pk, "report": REPORT}),
        409,
        "lease_not_held",
    )


def test_the_human_gate_holds_in_finish_work(api, issue):
    session = start(api, issue).json()["session"]["id"]
    Issue.objects.filter(pk=issue.pk).update(status=Issue.Status.IN_REVIEW)
    assert_error(
        post(
            api,
            "/work/finish/",
            {"session": session, "issue": issue.pk, "to": "done", "report": REPORT},
        ),
        403,
        "forbidden",
    )
    assert IssueLease.objects.get().released_at is None


# --- the displaced holder hears it --------------------------------------------------


def test_a_forced_claim_tells_the_displaced_issue_and_agent(
    api, workspace, make_issue, make_session
):
    loser_issue, winner_issue = make_issue(title="Loser"), make_issue(title="Winner")
    loser = make_session("loser")
    leases.claim_issue(workspace=workspace, issue_id=loser_issue.pk, session_id=loser.pk)
    file_claims.claim_files(
        workspace=workspace,
        issue_id=loser_issue.pk,
        paths=["hot.py", "mine.py"],
        session_id=loser.pk,
    )
    winner = make_session("winner")
    file_claims.claim_files(
        workspace=workspace,
        issue_id=winner_issue.pk,
        paths=["hot.py"],
        session_id=winner.pk,
        force=True,
    )
    to_issue = Message.objects.get(scope=f"issue:{loser_issue.pk}").body
    to_agent = Message.objects.get(scope="agent:loser").body
    for body in (to_issue, to_agent):
        assert "hot.py" in body and f"issue {winner_issue.pk}" in body and "winner" in body
    assert Message.objects.filter(scope=f"issue:{winner_issue.pk}").exists()

    mine = api.get(f"{V1}/messages/", {"agent": "loser"}).json()["results"]
    assert {row["scope"] for row in mine} == {"agent:loser", f"issue:{loser_issue.pk}"}
    theirs = api.get(f"{V1}/messages/", {"agent": "winner"}).json()["results"]
    assert {row["scope"] for row in theirs} == {f"issue:{winner_issue.pk}"}  # its live claim


def test_messages_for_an_agent_follow_its_live_claims(api, workspace, make_issue, make_session):
    issue = make_issue()
    session = make_session("worker")
    file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["a.py"], session_id=session.pk
    )
    post(api, "/messages/", {"scope": f"issue:{issue.pk}", "body": "heads up"})
    post(api, "/messages/", {"scope": "agent:worker", "body": "direct"})
    scopes = {row["scope"] for row in api.get(f"{V1}/messages/?agent=worker").json()["results"]}
    assert scopes == {f"issue:{issue.pk}", "agent:worker"}
    assert api.get(f"{V1}/messages/?agent=nobody").json()["results"] == []


# --- fences ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_lost_holder_cannot_finish_work_with_its_old_fence(
    api, workspace, issue, make_session, roomy
):
    started = post(
        api, "/work/start/", {"agent": "old", "issue": issue.pk, "paths": ["src/a.py"]}
    ).json()
    assert started["lease"]["fence"] == 1
    old = AgentSession.objects.get(pk=started["session"]["id"])
    expire(old)
    new = make_session("new")
    assert claim_lease(workspace, issue, new).fence == 2
    agents.heartbeat_session(workspace=workspace, session_id=old.pk)
    workflow.transition_issue(workspace=workspace, issue_id=issue.pk, to="todo", by_human=False)
    workflow.transition_issue(
        workspace=workspace, issue_id=issue.pk, to="in_progress", by_human=False
    )
    before = state()

    body = assert_error(
        post(
            api,
            "/work/finish/",
            {"session": old.pk, "issue": issue.pk, "report": REPORT, "fence": 1},
        ),
        409,
        "stale_fence",
    )

    assert body["current_fence"] == 2
    assert state() == before
    assert Issue.objects.get(pk=issue.pk).status == "in_progress"
    assert AgentSession.objects.get(pk=old.pk).status == "active"

    response = post(
        api, "/work/finish/", {"session": new.pk, "issue": issue.pk, "report": REPORT, "fence": 2}
    )
    assert response.status_code == 200, response.content
    assert response.json()["issue"]["status"] == "in_review"
    assert IssueLease.objects.get(fence=2).release_reason == ReleaseReason.RELEASED


@pytest.mark.django_db
def test_finish_work_with_a_wrong_fence_changes_nothing(api, workspace, issue, make_session):
    session = make_session()
    claim_lease(workspace, issue, session)
    before = state()
    for to in ("in_review", "cancelled"):
        assert_error(
            post(
                api,
                "/work/finish/",
                {"session": session.pk, "issue": issue.pk, "to": to, "report": REPORT, "fence": 9},
            ),
            409,
            "stale_fence",
        )
        assert state() == before
    finished = work.finish_work(
        workspace=workspace, session_id=session.pk, issue_id=issue.pk, to="cancelled", fence=1
    )
    assert finished.issue.status == "cancelled"
