"""The event log (invariant 12 (one event per change)) of file claims: a grant names only the paths
it took; a release, a refusal, a reclaim from a dead holder and a forced claim are each
announced once, naming the taker; a refused claim grants nothing.

Events are compared as the API shows them (``EventSerializer``, without id and time),
so these tests check the table of docs/api.md, not the columns."""

import pytest

from coordination.errors import FileConflict
from coordination.models import EventType, FileClaim, Message
from coordination.services import file_claims
from tests.conftest import expire
from tests.coordination.services.events_helpers import by, cursor, expected, since

pytestmark = pytest.mark.django_db


# --- file claims ----------------------------------------------------------------------


def test_a_claim_grant_names_only_the_paths_it_took(workspace, issue, make_session):
    session = make_session()
    file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["kept.py"], session_id=session.pk
    )
    mark = cursor()
    file_claims.claim_files(
        workspace=workspace,
        issue_id=issue.pk,
        paths=["new/b.py", "kept.py", "new/a.py"],
        session_id=session.pk,
    )
    file_claims.claim_files(  # everything held already: no grant
        workspace=workspace, issue_id=issue.pk, paths=["kept.py"], session_id=session.pk
    )

    assert since(mark) == [
        expected(
            EventType.CLAIMS_GRANTED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"paths": ["new/a.py", "new/b.py"]},
        )
    ]


def test_releasing_files_is_reason_released(workspace, issue, make_session):
    session = make_session()
    file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["a.py", "b.py"], session_id=session.pk
    )
    mark = cursor()
    file_claims.release_files(workspace=workspace, issue_id=issue.pk, paths=["b.py", "zz.py"])
    file_claims.release_files(workspace=workspace, issue_id=issue.pk, paths=["zz.py"])  # none

    assert since(mark) == [
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"paths": ["b.py"], "reason": "released"},
        )
    ]


def test_a_refused_claim_names_the_request_and_the_conflicts_and_grants_nothing(
    workspace, make_issue, make_session
):
    holder, refused = make_session("holder"), make_session("refused")
    held, wanted = make_issue(title="Held"), make_issue(title="Wanted")
    file_claims.claim_files(
        workspace=workspace, issue_id=held.pk, paths=["shared.py"], session_id=holder.pk
    )
    mark = cursor()
    with pytest.raises(FileConflict) as refusal:
        file_claims.claim_files(
            workspace=workspace,
            issue_id=wanted.pk,
            paths=["free.py", "shared.py"],
            session_id=refused.pk,
        )

    conflicts = refusal.value.extra["conflicts"]
    assert conflicts == [
        {
            "path": "shared.py",
            "held_path": "shared.py",
            "issue": held.pk,
            "session": holder.pk,
            "agent": "holder",
        }
    ]
    assert since(mark) == [
        expected(
            EventType.CLAIMS_REFUSED,
            project="core",
            issue=wanted.pk,
            session=refused,
            data={"paths": ["free.py", "shared.py"], "conflicts": conflicts, "conflicts_total": 1},
        )
    ]
    assert not FileClaim.objects.filter(path="free.py").exists()


def test_a_dead_holders_claims_are_announced_expired_naming_the_taker(
    workspace, make_issue, make_session
):
    old, new = make_session("old"), make_session("new")
    theirs, ours = make_issue(title="Theirs"), make_issue(title="Ours")
    file_claims.claim_files(
        workspace=workspace, issue_id=theirs.pk, paths=["a.py", "b.py"], session_id=old.pk
    )
    expire(old)
    mark = cursor()
    file_claims.claim_files(
        workspace=workspace, issue_id=ours.pk, paths=["b.py", "a.py"], session_id=new.pk
    )

    assert since(mark) == [
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=theirs.pk,
            session=old,
            data={"paths": ["a.py", "b.py"], "reason": "expired", "by": by(new)},
        ),
        expected(
            EventType.CLAIMS_GRANTED,
            project="core",
            issue=ours.pk,
            session=new,
            data={"paths": ["a.py", "b.py"]},
        ),
    ]


def test_a_forced_claim_announces_one_release_per_holder_naming_the_taker(
    workspace, make_issue, make_session
):
    first, second, taker = make_session("first"), make_session("second"), make_session("taker")
    one, two, ours = make_issue(title="One"), make_issue(title="Two"), make_issue(title="Ours")
    file_claims.claim_files(
        workspace=workspace, issue_id=one.pk, paths=["a.py", "c.py"], session_id=first.pk
    )
    file_claims.claim_files(
        workspace=workspace, issue_id=two.pk, paths=["b.py"], session_id=second.pk
    )
    mark = cursor()
    file_claims.claim_files(
        workspace=workspace,
        issue_id=ours.pk,
        paths=["a.py", "b.py", "c.py"],
        session_id=taker.pk,
        force=True,
    )

    overridden = {"reason": "overridden", "by": by(taker)}
    assert since(mark, EventType.CLAIMS_RELEASED, EventType.CLAIMS_GRANTED) == [
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=one.pk,
            session=first,
            data={"paths": ["a.py", "c.py"], **overridden},
        ),
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=two.pk,
            session=second,
            data={"paths": ["b.py"], **overridden},
        ),
        expected(
            EventType.CLAIMS_GRANTED,
            project="core",
            issue=ours.pk,
            session=taker,
            data={"paths": ["a.py", "b.py", "c.py"]},
        ),
    ]
    # The posts that tell the displaced are announced too, each once.
    posted = since(mark, EventType.MESSAGE_POSTED)
    assert sorted(e["data"]["message"] for e in posted) == sorted(
        Message.objects.values_list("id", flat=True)
    )
