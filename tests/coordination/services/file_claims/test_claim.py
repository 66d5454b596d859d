"""Claiming files: all-or-nothing claims, reclaim, force, the conflict log (invariants 4 (stale
reclaim), 5 (all-or-nothing), 6 (paths are literal), 7 (release reasons) and 8 (append-only
logs))."""

import pytest

from coordination.api.serializers import FileClaimSerializer
from coordination.errors import (
    FileConflict,
    InvalidInput,
    InvalidTransition,
    NotFound,
    SessionNotLive,
)
from coordination.models import (
    AgentSession,
    ClaimConflict,
    FileClaim,
    IssueLease,
    Message,
    Project,
    ReleaseReason,
)
from coordination.selectors import claims
from coordination.services import agents, file_claims, leases, workflow
from coordination.services.file_claims import claim as claiming
from tests.conftest import expire
from tests.coordination.conftest import held

pytestmark = pytest.mark.django_db


# --- claiming ------------------------------------------------------------------------


def test_claim_normalises_and_claims_each_path_once(claim, issue, make_session):
    session = make_session("coder")

    result = claim(issue, ["./src//a.py", "src/a.py", "src/b.py", "README.md"], session)

    assert [c.path for c in result.claims] == ["README.md", "src/a.py", "src/b.py"]
    assert result.reclaimed == [] and result.overridden == []
    assert held() == {"README.md": issue.pk, "src/a.py": issue.pk, "src/b.py": issue.pk}
    row = FileClaim.objects.get(path="src/a.py")
    assert (row.session_id, row.agent_id, row.release_reason) == (session.pk, session.agent_id, "")


def test_claiming_again_for_the_same_issue_is_idempotent(claim, issue, make_session):
    first = claim(issue, ["a.py", "b.py"], make_session("one"))

    again = claim(issue, ["b.py", "./a.py", "c.py"], make_session("two"))

    assert {c.pk for c in first.claims} < {c.pk for c in again.claims}
    assert [c.path for c in again.claims] == ["a.py", "b.py", "c.py"]
    assert FileClaim.objects.count() == 3 and not ClaimConflict.objects.exists()
    # The path keeps its first holder: another session of the same issue adds nothing.
    assert FileClaim.objects.get(path="a.py").agent.name == "one"


def test_a_claim_needs_no_lease_and_a_lease_reserves_no_file(
    claim, workspace, make_issue, make_session
):
    leased, other = make_issue(), make_issue()
    holder, claimer = make_session("holder"), make_session("claimer")
    leases.claim_issue(workspace=workspace, issue_id=leased.pk, session_id=holder.pk)

    claim(leased, ["on-leased.py"], claimer)
    claim(other, ["free.py"], holder)

    assert held() == {"on-leased.py": leased.pk, "free.py": other.pk}
    assert IssueLease.objects.live().get().session_id == holder.pk


def test_a_file_named_like_a_directory_reserves_nothing_beneath_it(claim, make_issue, make_session):
    """``src`` is a file claim; ``src/`` would be the directory (invariant 11 (overlap))."""
    file, leaf = make_issue(), make_issue()

    claim(file, ["src"], make_session("a"))
    claim(leaf, ["src/a.py"], make_session("b"))

    assert held() == {"src": file.pk, "src/a.py": leaf.pk}


def test_one_hundred_paths_is_the_most(claim, issue):
    claim(issue, [f"f{n}.py" for n in range(100)])
    assert FileClaim.objects.count() == 100


@pytest.mark.parametrize("count", [0, 101])
def test_zero_or_101_paths_are_refused_and_nothing_is_claimed(claim, issue, count):
    with pytest.raises(InvalidInput):
        claim(issue, [f"f{n}.py" for n in range(count)])
    assert not FileClaim.objects.exists()


def test_one_invalid_path_refuses_the_whole_request_naming_it(claim, issue):
    with pytest.raises(InvalidInput) as caught:
        claim(issue, ["ok.py", "../escape.py", "fine.py"])
    assert caught.value.extra["path"] == "../escape.py"
    assert not FileClaim.objects.exists()


def test_an_issue_of_another_workspace_is_not_found(claim, other_workspace, make_issue):
    theirs = Project.objects.create(workspace=other_workspace, key="x", name="X")
    with pytest.raises(NotFound):
        claim(make_issue(project=theirs), ["a.py"])
    assert not FileClaim.objects.exists()


def test_a_session_of_another_workspace_is_invalid(claim, issue, other_workspace, make_session):
    foreign = make_session("spy", workspace=other_workspace)
    with pytest.raises(InvalidInput):
        claim(issue, ["a.py"], foreign)
    assert not FileClaim.objects.exists()


def test_a_claimer_whose_session_is_not_live_is_refused(claim, issue, make_session, workspace):
    lapsed, ended = make_session("lapsed"), make_session("ended")
    expire(lapsed)
    agents.end_session(workspace=workspace, session_id=ended.pk)

    for session in (lapsed, ended):
        with pytest.raises(SessionNotLive):
            claim(issue, ["a.py"], session)

    assert not FileClaim.objects.exists() and not ClaimConflict.objects.exists()


def test_a_closed_issue_cannot_claim_files(claim, workspace, issue, make_session):
    workflow.transition_issue(
        workspace=workspace, issue_id=issue.pk, to="cancelled", by_human=False
    )

    with pytest.raises(InvalidTransition):
        claim(issue, ["a.py"], make_session())

    assert not FileClaim.objects.exists()


# --- conflicts -----------------------------------------------------------------------------


def test_a_live_holder_refuses_the_whole_request_and_the_conflicts_are_logged(
    claim, make_issue, make_session
):
    mine, theirs, third = make_issue(), make_issue(), make_issue()
    me, them, other = make_session("me"), make_session("them"), make_session("other")
    claim(theirs, ["a.py", "b.py"], them)
    claim(third, ["c.py"], other)

    with pytest.raises(FileConflict) as caught:
        claim(mine, ["free.py", "b.py", "./a.py", "c.py"], me)

    assert caught.value.status == 409 and caught.value.code == "file_conflict"
    assert caught.value.extra["conflicts"] == [
        {
            "path": "a.py",
            "held_path": "a.py",
            "issue": theirs.pk,
            "session": them.pk,
            "agent": "them",
        },
        {
            "path": "b.py",
            "held_path": "b.py",
            "issue": theirs.pk,
            "session": them.pk,
            "agent": "them",
        },
        {
            "path": "c.py",
            "held_path": "c.py",
            "issue": third.pk,
            "session": other.pk,
            "agent": "other",
        },
    ]
    assert held() == {"a.py": theirs.pk, "b.py": theirs.pk, "c.py": third.pk}
    logged = ClaimConflict.objects.order_by("path")
    assert [
        (
            c.path,
            c.rejected_issue_id,
            c.rejected_session_id,
            c.rejected_agent_id,
            c.holding_issue_id,
            c.holding_session_id,
            c.holding_agent_id,
            c.forced,
        )
        for c in logged
    ] == [
        ("a.py", mine.pk, me.pk, me.agent_id, theirs.pk, them.pk, them.agent_id, False),
        ("b.py", mine.pk, me.pk, me.agent_id, theirs.pk, them.pk, them.agent_id, False),
        ("c.py", mine.pk, me.pk, me.agent_id, third.pk, other.pk, other.agent_id, False),
    ]


def test_a_refused_request_leaves_dead_holders_for_the_next_successful_claim(
    claim, make_issue, make_session
):
    mine, live_issue, dead_issue = make_issue(), make_issue(), make_issue()
    me, alive, dead = make_session("me"), make_session("alive"), make_session("dead")
    claim(live_issue, ["held.py"], alive)
    claim(dead_issue, ["stale.py"], dead)
    expire(dead)

    with pytest.raises(FileConflict):
        claim(mine, ["held.py", "stale.py"], me)

    assert held() == {"held.py": live_issue.pk, "stale.py": dead_issue.pk}
    assert list(ClaimConflict.objects.values_list("path", flat=True)) == ["held.py"]

    result = claim(mine, ["stale.py"], me)
    assert result.reclaimed == ["stale.py"]
    assert held() == {"held.py": live_issue.pk, "stale.py": mine.pk}


def test_a_dead_holder_is_reclaimed_expired_without_a_conflict_row(claim, make_issue, make_session):
    mine, theirs = make_issue(), make_issue()
    me, dead = make_session("me"), make_session("dead")
    claim(theirs, ["a.py", "b.py"], dead)
    expire(dead)

    result = claim(mine, ["a.py", "b.py", "c.py"], me)

    assert result.reclaimed == ["a.py", "b.py"] and result.overridden == []
    assert [c.path for c in result.claims] == ["a.py", "b.py", "c.py"]
    assert held() == {"a.py": mine.pk, "b.py": mine.pk, "c.py": mine.pk}
    old = FileClaim.objects.filter(issue=theirs)
    assert set(old.values_list("release_reason", flat=True)) == {ReleaseReason.EXPIRED}
    assert not ClaimConflict.objects.exists()


def test_a_dead_holder_of_the_same_issue_hands_the_path_to_the_live_claimer(
    claim, issue, make_session
):
    dead, fresh = make_session("dead"), make_session("fresh")
    claim(issue, ["a.py"], dead)
    expire(dead)

    result = claim(issue, ["a.py"], fresh)

    assert result.reclaimed == ["a.py"]
    assert FileClaim.objects.get(released_at__isnull=True).session_id == fresh.pk
    assert FileClaim.objects.get(session=dead).release_reason == ReleaseReason.EXPIRED


def test_a_sessionless_claim_is_held_until_forced(claim, make_issue, make_session):
    mine, theirs = make_issue(), make_issue()
    claim(theirs, ["a.py"])  # no session: no heartbeat, never expires

    with pytest.raises(FileConflict) as caught:
        claim(mine, ["a.py"], make_session("me"))
    assert caught.value.extra["conflicts"] == [
        {"path": "a.py", "held_path": "a.py", "issue": theirs.pk, "session": None, "agent": None}
    ]
    assert held() == {"a.py": theirs.pk}

    claim(mine, ["a.py"], force=True)
    assert held() == {"a.py": mine.pk}


def test_an_orphaned_claim_is_still_held_and_only_force_gets_past(claim, make_issue, make_session):
    mine, theirs = make_issue(), make_issue()
    gone, me = make_session("gone"), make_session("me")
    claim(theirs, ["a.py"], gone)
    AgentSession.objects.filter(pk=gone.pk).delete()

    orphan = FileClaim.objects.get()
    assert orphan.session_id is None and orphan.released_at is None

    with pytest.raises(FileConflict):
        claim(mine, ["a.py"], me)
    assert held() == {"a.py": theirs.pk}

    result = claim(mine, ["a.py"], me, force=True)
    assert [h.as_dict() for h in result.overridden] == [
        {"path": "a.py", "held_path": "a.py", "issue": theirs.pk, "session": None, "agent": "gone"}
    ]
    orphan.refresh_from_db()
    assert orphan.release_reason == ReleaseReason.OVERRIDDEN
    assert held() == {"a.py": mine.pk}


def test_force_overrides_live_holders_logs_forced_rows_and_tells_the_issue(
    claim, make_issue, make_session
):
    mine, first, second = make_issue(), make_issue(), make_issue()
    me, a, b = make_session("me"), make_session("a"), make_session("b")
    claim(first, ["x.py", "y.py"], a)
    claim(second, ["z.py"], b)

    result = claim(mine, ["x.py", "y.py", "z.py", "new.py"], me, force=True)

    assert [h.as_dict() for h in result.overridden] == [
        {"path": "x.py", "held_path": "x.py", "issue": first.pk, "session": a.pk, "agent": "a"},
        {"path": "y.py", "held_path": "y.py", "issue": first.pk, "session": a.pk, "agent": "a"},
        {"path": "z.py", "held_path": "z.py", "issue": second.pk, "session": b.pk, "agent": "b"},
    ]
    assert held() == {"x.py": mine.pk, "y.py": mine.pk, "z.py": mine.pk, "new.py": mine.pk}
    displaced = FileClaim.objects.exclude(issue=mine)
    assert set(displaced.values_list("release_reason", flat=True)) == {ReleaseReason.OVERRIDDEN}
    logged = ClaimConflict.objects.order_by("path")
    assert [(c.path, c.holding_issue_id, c.rejected_issue_id, c.forced) for c in logged] == [
        ("x.py", first.pk, mine.pk, True),
        ("y.py", first.pk, mine.pk, True),
        ("z.py", second.pk, mine.pk, True),
    ]
    told = {message.scope: message for message in Message.objects.all()}
    assert set(told) == {
        f"issue:{mine.pk}",
        f"issue:{first.pk}",
        f"issue:{second.pk}",
        "agent:a",
        "agent:b",
    }
    message = told[f"issue:{mine.pk}"]
    assert (message.session_id, message.agent_id) == (me.pk, me.agent_id)
    assert f"issue {first.pk}" in message.body and f"issue {second.pk}" in message.body
    assert "x.py" in message.body and "z.py" in message.body
    # Each displaced side hears which of its paths went, and to whom.
    assert "x.py" in told["agent:a"].body and "z.py" not in told["agent:a"].body
    assert "z.py" in told[f"issue:{second.pk}"].body and f"issue {mine.pk}" in told["agent:b"].body


def test_force_without_contest_writes_no_conflict_and_no_message(claim, issue, make_session):
    claim(issue, ["a.py"], make_session(), force=True)
    assert held() == {"a.py": issue.pk}
    assert not ClaimConflict.objects.exists() and not Message.objects.exists()


def test_a_lost_insert_race_rolls_the_attempt_back_and_retries(
    claim, issue, make_issue, make_session, monkeypatch
):
    """An insert that returns fewer rows than asked means someone else got a path:
    the attempt is undone as a whole (reclaims too) and tried again."""
    dead_issue = make_issue()
    dead = make_session("dead")
    claim(dead_issue, ["a.py"], dead)
    expire(dead)
    real_insert = claiming.insert_claims
    calls = []

    def lose_first(**kwargs):
        calls.append(kwargs["paths"])
        ids = real_insert(**kwargs)
        return ids[1:] if len(calls) == 1 else ids

    monkeypatch.setattr(claiming, "insert_claims", lose_first)

    result = claim(issue, ["a.py", "b.py"], make_session("me"))

    assert len(calls) == 2
    assert [c.path for c in result.claims] == ["a.py", "b.py"]
    assert FileClaim.objects.filter(released_at__isnull=True).count() == 2
    assert FileClaim.objects.filter(release_reason=ReleaseReason.EXPIRED).count() == 1


def test_a_race_lost_on_every_attempt_is_a_conflict_and_claims_nothing(
    claim, issue, make_session, monkeypatch
):
    monkeypatch.setattr(claiming, "insert_claims", lambda **kwargs: [])

    with pytest.raises(FileConflict) as caught:
        claim(issue, ["a.py", "b.py"], make_session("me"))

    assert "Retry" in caught.value.detail and caught.value.extra["conflicts"] == []
    assert not FileClaim.objects.exists()


def test_a_string_is_not_a_list_of_paths(claim, issue):
    with pytest.raises(InvalidInput):
        claim(issue, "a.py")
    assert not FileClaim.objects.exists()


# --- the rows a claim returns ---------------------------------------------------------


def test_claims_come_back_as_the_orm_reads_them(workspace, issue, make_session):
    session = make_session("ada")
    claimed = file_claims.claim_files(
        workspace=workspace,
        issue_id=issue.pk,
        paths=["src/b.py", "src/a.py"],
        session_id=session.pk,
    )
    again = file_claims.claim_files(
        workspace=workspace,
        issue_id=issue.pk,
        paths=["src/a.py", "src/c.py"],
        session_id=session.pk,
    )
    for result in (claimed, again):
        stored = {c.pk: c for c in claims.file_claims(workspace)}
        assert [c.path for c in result.claims] == sorted(c.path for c in result.claims)
        for claim in result.claims:
            orm = stored[claim.pk]
            for field in FileClaim._meta.concrete_fields:
                assert getattr(claim, field.attname) == getattr(orm, field.attname), field
            assert claim.claimed_at.tzinfo is not None
            assert claim.agent.name == "ada"
            assert FileClaimSerializer(claim).data == FileClaimSerializer(orm).data
