"""Directory claims (invariant 11 (overlap)): a claim ending in ``/`` holds its whole subtree
against every other issue, judged by whole segments, in claims, force, stale reclaim,
the conflict log, releases and checks. On SQLite and on PostgreSQL alike."""

import pytest
from django.db import connection, transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordination.db import sql
from coordination.db.rows import dialect
from coordination.errors import FileConflict, InvalidInput
from coordination.models import ClaimConflict, Event, FileClaim, Message, ReleaseReason
from coordination.paths import normalise_path, overlaps
from coordination.services import file_claims
from coordination.services.file_claims import refusal
from tests.conftest import expire
from tests.coordination.conftest import held

pytestmark = pytest.mark.django_db


def logged():
    rows = ClaimConflict.objects.order_by("path", "holding_issue_id")
    return [(c.path, c.holding_issue_id, c.forced) for c in rows]


# --- what a directory claim holds ------------------------------------------------------


def test_a_directory_claim_holds_everything_under_it_against_other_issues(
    claim, make_issue, make_session
):
    tree, leaf = make_issue(), make_issue()
    claim(tree, ["./src//api/"], make_session("tree"))

    for path in ["src/api/x.py", "src/api/v2/deep/y.py", "src/api/", "src/"]:
        with pytest.raises(FileConflict):
            claim(leaf, [path], make_session())
    # Whole segments: a neighbour that shares the letters, a file named like the
    # directory, and the directory's own siblings are free.
    claim(leaf, ["src/apiv2.py", "src/apiv2/", "src/api", "src/web/x.py", "api/x.py"])

    assert held() == {
        "src/api/": tree.pk,
        "src/apiv2.py": leaf.pk,
        "src/apiv2/": leaf.pk,
        "src/api": leaf.pk,
        "src/web/x.py": leaf.pk,
        "api/x.py": leaf.pk,
    }


def test_a_file_under_a_held_directory_is_refused_naming_the_directory(
    claim, make_issue, make_session
):
    mine, theirs = make_issue(), make_issue()
    them = make_session("them")
    claim(theirs, ["src/api/"], them)

    with pytest.raises(FileConflict) as caught:
        claim(mine, ["src/api/v2/x.py", "free.py"], make_session("me"))

    assert caught.value.extra == {
        "conflicts": [
            {
                "path": "src/api/v2/x.py",
                "held_path": "src/api/",
                "issue": theirs.pk,
                "session": them.pk,
                "agent": "them",
            }
        ],
        "conflicts_total": 1,
    }
    assert caught.value.detail.startswith("1 of 2 paths")
    assert held() == {"src/api/": theirs.pk}
    assert logged() == [("src/api/v2/x.py", theirs.pk, False)]  # where they meet


def test_a_directory_over_held_files_names_each_holder_and_logs_each_at_the_file(
    claim, make_issue, make_session
):
    mine, first, second = make_issue(), make_issue(), make_issue()
    a, b = make_session("a"), make_session("b")
    claim(first, ["src/a.py", "srcs/no.py"], a)
    claim(second, ["src/deep/", "src/deep/b.py"], b)

    with pytest.raises(FileConflict) as caught:
        claim(mine, ["src/"], make_session("me"))

    conflicts = caught.value.extra["conflicts"]
    assert [(c["path"], c["held_path"], c["issue"]) for c in conflicts] == [
        ("src/", "src/a.py", first.pk),
        ("src/", "src/deep/", second.pk),
        ("src/", "src/deep/b.py", second.pk),
    ]
    assert caught.value.extra["conflicts_total"] == 3
    assert caught.value.detail.startswith("1 of 1 paths")
    assert logged() == [
        ("src/a.py", first.pk, False),
        ("src/deep/", second.pk, False),
        ("src/deep/b.py", second.pk, False),
    ]


def test_one_issue_holding_a_directory_and_a_file_under_it_is_two_holders(
    claim, make_issue, make_session
):
    mine, theirs = make_issue(), make_issue()
    them = make_session("them")
    claim(theirs, ["d/", "d/x.py"], them)

    with pytest.raises(FileConflict) as caught:
        claim(mine, ["d/x.py"], make_session("me"))

    assert [c["held_path"] for c in caught.value.extra["conflicts"]] == ["d/", "d/x.py"]
    assert logged() == [("d/x.py", theirs.pk, False), ("d/x.py", theirs.pk, False)]


def test_one_row_per_requested_path_and_overlapping_holder(claim, make_issue, make_session):
    mine, theirs = make_issue(), make_issue()
    claim(theirs, ["a/"], make_session("them"))

    with pytest.raises(FileConflict) as caught:
        claim(mine, ["a/x.py", "a/y/", "a/y/z.py", "b.py"], make_session("me"))

    assert [(c["path"], c["held_path"]) for c in caught.value.extra["conflicts"]] == [
        ("a/x.py", "a/"),
        ("a/y/", "a/"),
        ("a/y/z.py", "a/"),
    ]
    assert caught.value.detail.startswith("3 of 4 paths")
    assert [row[0] for row in logged()] == ["a/x.py", "a/y/", "a/y/z.py"]


def test_a_409_shows_a_hundred_conflicts_and_counts_them_all(claim, make_issue, make_session):
    mine, theirs = make_issue(), make_issue()
    them = make_session("them")
    for start in range(0, 150, 50):
        claim(theirs, [f"big/f{n:03d}.py" for n in range(start, start + 50)], them)

    with pytest.raises(FileConflict) as caught:
        claim(mine, ["big/"], make_session("me"))

    assert len(caught.value.extra["conflicts"]) == 100
    assert caught.value.extra["conflicts_total"] == 150
    assert ClaimConflict.objects.count() == 150  # the log keeps every one
    refused = Event.objects.get(type="claims.refused")
    assert len(refused.data["conflicts"]) == 100 and refused.data["conflicts_total"] == 150


def test_the_conflict_log_is_written_in_batches_past_a_thousand_pairs(
    claim, make_issue, make_session, monkeypatch
):
    monkeypatch.setattr(refusal, "CONFLICT_ROWS_PER_INSERT", 2)
    mine, theirs = make_issue(), make_issue()
    claim(theirs, ["d/a.py", "d/b.py", "d/c.py", "d/e.py", "d/f.py"], make_session("them"))

    with pytest.raises(FileConflict):
        claim(mine, ["d/"], make_session("me"))

    assert [row[0] for row in logged()] == ["d/a.py", "d/b.py", "d/c.py", "d/e.py", "d/f.py"]


def test_claims_of_one_issue_may_overlap(claim, issue, make_session):
    me = make_session("me")
    claim(issue, ["src/a.py", "src/deep/"], me)

    result = claim(issue, ["src/", "src/deep/x.py", "src/a.py"], make_session("other"))

    assert [c.path for c in result.claims] == ["src/", "src/a.py", "src/deep/x.py"]
    assert held() == {
        "src/": issue.pk,
        "src/a.py": issue.pk,
        "src/deep/": issue.pk,
        "src/deep/x.py": issue.pk,
    }
    # The path spelled the same is kept, with its first holder.
    assert FileClaim.objects.get(path="src/a.py").session_id == me.pk
    assert not ClaimConflict.objects.exists()


def test_a_request_may_hold_a_directory_and_files_under_it(claim, issue):
    result = claim(issue, ["lib/", "lib/x.py", "lib/y/"])
    assert [c.path for c in result.claims] == ["lib/", "lib/x.py", "lib/y/"]


def test_a_glob_is_refused_saying_to_claim_the_directory(claim, issue):
    for raw, directory in [("src/*.py", "'src/'"), ("src/api/test_?.py", "'src/api/'")]:
        with pytest.raises(InvalidInput) as caught:
            claim(issue, ["ok.py", raw])
        assert caught.value.extra["path"] == raw
        assert "globs are not claims" in caught.value.detail and directory in caught.value.detail
    assert not FileClaim.objects.exists()


# --- force, stale reclaim --------------------------------------------------------------


def test_force_takes_every_overlapping_holder(claim, make_issue, make_session):
    mine, first, second = make_issue(), make_issue(), make_issue()
    a, b = make_session("a"), make_session("b")
    claim(first, ["src/x/a.py"], a)
    claim(second, ["src/x/b/", "other.py"], b)

    result = claim(mine, ["src/x/", "src/x/b/c.py"], make_session("me"), force=True)

    assert [(h.path, h.held_path, h.issue) for h in result.overridden] == [
        ("src/x/", "src/x/a.py", first.pk),
        ("src/x/", "src/x/b/", second.pk),
        ("src/x/b/c.py", "src/x/b/", second.pk),
    ]
    assert held() == {"src/x/": mine.pk, "src/x/b/c.py": mine.pk, "other.py": second.pk}
    assert set(
        FileClaim.objects.filter(issue__in=[first, second], path__startswith="src").values_list(
            "release_reason", flat=True
        )
    ) == {ReleaseReason.OVERRIDDEN}
    assert logged() == [
        ("src/x/a.py", first.pk, True),
        ("src/x/b/", second.pk, True),
        ("src/x/b/c.py", second.pk, True),
    ]
    released = Event.objects.filter(type="claims.released").order_by("issue_id")
    assert [(e.issue_id, e.data["paths"], e.data["reason"]) for e in released] == [
        (first.pk, ["src/x/a.py"], "overridden"),
        (second.pk, ["src/x/b/"], "overridden"),
    ]
    # The displaced hear which of their claims went, by their own spelling.
    told = Message.objects.get(scope=f"issue:{second.pk}").body
    assert "src/x/b/" in told and "other.py" not in told


def test_dead_holders_under_and_above_a_directory_are_reclaimed(claim, make_issue, make_session):
    mine, theirs = make_issue(), make_issue()
    dead = make_session("dead")
    claim(theirs, ["src/", "src/a/b.py", "lib/x.py"], dead)
    expire(dead)

    result = claim(mine, ["src/a/"], make_session("me"))

    assert result.reclaimed == ["src/", "src/a/b.py"]
    assert held() == {"src/a/": mine.pk, "lib/x.py": theirs.pk}
    assert not ClaimConflict.objects.exists()
    expired = Event.objects.get(type="claims.released")
    assert expired.data["paths"] == ["src/", "src/a/b.py"] and expired.data["reason"] == "expired"
    assert expired.data["by"]["agent"] == "me"


# --- releases, checks, covering -----------------------------------------------------------


def test_release_takes_the_exact_spelling_only(workspace, claim, issue):
    claim(issue, ["d/", "d/x.py", "d"])

    assert file_claims.release_files(workspace=workspace, issue_id=issue.pk, paths=["./d//"]) == [
        "d/"
    ]
    assert held() == {"d/x.py": issue.pk, "d": issue.pk}
    assert file_claims.release_files(workspace=workspace, issue_id=issue.pk, paths=["d"]) == ["d"]
    assert held() == {"d/x.py": issue.pk}
    with pytest.raises(InvalidInput, match="globs are not claims"):
        file_claims.release_files(workspace=workspace, issue_id=issue.pk, paths=["d/*"])


def test_check_names_a_file_under_another_issues_directory(
    workspace, claim, make_issue, make_session
):
    mine, theirs = make_issue(), make_issue()
    them = make_session("them")
    claim(theirs, ["src/api/", "docs/a.md"], them)

    conflicts = file_claims.check_files(
        workspace=workspace,
        issue_id=mine.pk,
        paths=["src/api/v2/x.py", "src/apiv2/x.py", "src/api/a[1].py", "docs/"],
    )

    assert [(h.path, h.held_path, h.issue) for h in conflicts] == [
        ("docs/", "docs/a.md", theirs.pk),
        ("src/api/a[1].py", "src/api/", theirs.pk),
        ("src/api/v2/x.py", "src/api/", theirs.pk),
    ]


def test_a_check_skips_dead_holders_and_the_issues_own_claims(
    workspace, claim, make_issue, make_session
):
    mine, theirs = make_issue(), make_issue()
    dead = make_session("dead")
    claim(theirs, ["a/"], dead)
    expire(dead)
    claim(mine, ["b/"])

    assert (
        file_claims.check_files(workspace=workspace, issue_id=mine.pk, paths=["a/x", "b/y"]) == []
    )


# --- the statements: flat in active claims --------------------------------------------------


def plan_of(statement, params, *, analyzed):
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ANALYZE issue_file_claims")  # autovacuum's, or the bench's
            cursor.execute("EXPLAIN " + statement, params)
            return "\n".join(row[0] for row in cursor.fetchall())
        if analyzed:
            cursor.execute("ANALYZE")
        cursor.execute("EXPLAIN QUERY PLAN " + statement, params)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


@pytest.mark.parametrize("analyzed", [False, True], ids=["no statistics", "analyzed"])
def test_the_holders_are_found_by_index_scans_only(workspace, make_issue, analyzed):
    """However many claims are held or were held, the look for overlapping holders
    reads the partial index: equality for paths and their ancestors, a range per
    directory; never the workspace's claims one by one (its history outgrows them)."""
    crowd = make_issue()
    FileClaim.objects.bulk_create(
        FileClaim(workspace=workspace, issue=crowd, path=f"m{n % 40}/f{n}.py") for n in range(4000)
    )
    FileClaim.objects.bulk_create(
        FileClaim(workspace=workspace, issue=crowd, path=f"d{n}/") for n in range(400)
    )
    FileClaim.objects.bulk_create(
        FileClaim(
            workspace=workspace,
            issue=crowd,
            path=f"m3/old{n}.py",
            released_at=timezone.now(),
            release_reason="released",
        )
        for n in range(6000)
    )
    overlap = sql.overlap_of(["m3/", "d7/x/y.py", "m5/f5.py"])
    statement, params = sql.overlapping_holders(
        dialect(), workspace_id=workspace.pk, overlap=overlap
    )

    plan = plan_of(statement, params, analyzed=analyzed)

    if connection.vendor == "postgresql":
        assert "Seq Scan on issue_file_claims" not in plan, plan
        assert "Index Cond: (id = ANY" in plan, plan
        assert "path)::text > r.low) AND ((path)::text < r.high)" in plan, plan
    else:
        assert "SCAN c" not in plan and "SCAN e" not in plan and "SCAN u" not in plan, plan
        assert (
            "SEARCH u USING INDEX one_unreleased_claim_per_path (workspace_id=? AND path>?" in plan
        )
        assert (
            "SEARCH e USING INDEX one_unreleased_claim_per_path (workspace_id=? AND path=?)" in plan
        )
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        found = sorted(row[5] for row in cursor.fetchall())
    assert found == sorted(["m5/f5.py", *(f"m3/f{n}.py" for n in range(3, 4000, 40)), "d7/"])


@pytest.mark.parametrize("analyzed", [False, True], ids=["no statistics", "analyzed"])
def test_a_release_finds_the_issues_claims_by_index_however_many_are_held(
    workspace, make_issue, analyzed
):
    """The other half of a bench op (claim, release): an issue's release reads its
    own claims, not every claim the workspace holds (SQLite walked them all to read
    them in path order, which only PostgreSQL's row locks need)."""
    mine, crowd = make_issue(), make_issue()
    FileClaim.objects.bulk_create(
        FileClaim(workspace=workspace, issue=crowd, path=f"held/f{n}.py") for n in range(5000)
    )
    statement, params = sql.release_claims(
        dialect(), reason="released", workspace_id=workspace.pk, issue_id=mine.pk, session_id=1
    )

    plan = plan_of(statement, params, analyzed=analyzed)

    if connection.vendor == "postgresql":
        assert "Seq Scan on issue_file_claims" not in plan, plan
    else:
        assert f"USING INDEX {sql.file_claims.ISSUE_CLAIMS} (workspace_id=? AND issue_id=?" in plan


@pytest.mark.postgres
def test_claim_paths_compare_byte_for_byte_on_postgresql():
    """Migration 0011: the range scan needs byte order, whatever the database's locale."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT collation_name FROM information_schema.columns"
            " WHERE table_name = 'issue_file_claims' AND column_name = 'path'"
        )
        assert cursor.fetchone() == ("C",)


# --- against the database, generated ----------------------------------------------------------

names = st.sampled_from(["a", "ab", "a0", "a-", "b", "é", "x.py"])
claims = st.lists(
    st.tuples(
        st.integers(0, 2),  # which issue
        st.lists(names, min_size=1, max_size=3).map("/".join),
        st.booleans(),  # a directory
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(claims)
def test_generated_claims_are_granted_iff_they_overlap_no_other_issue(
    workspace, make_issue, script
):
    """Each claim in turn, against the database: granted iff no claim of another
    issue held at that moment overlaps it; never two overlapping claims of different
    issues held at once; the conflict log names exactly the overlapping pairs."""
    with transaction.atomic():
        issues = [make_issue() for _ in range(3)]
        model: dict[str, int] = {}  # path -> issue, what the rule says is held
        for who, name, directory in script:
            path = normalise_path(name + ("/" if directory else ""))
            issue = issues[who]
            against = sorted(p for p, i in model.items() if i != issue.pk and overlaps(path, p))
            before = ClaimConflict.objects.count()
            try:
                file_claims.claim_files(workspace=workspace, issue_id=issue.pk, paths=[path])
            except FileConflict as refused:
                assert against, (path, model)
                assert sorted(c["held_path"] for c in refused.extra["conflicts"]) == against
                assert ClaimConflict.objects.count() == before + len(against)
            else:
                assert not against, (path, against)
                model[path] = issue.pk
            assert held() == model
        transaction.set_rollback(True)


def test_every_claim_event_carries_the_paths(claim, issue):
    claim(issue, ["src/", "a.py"])
    assert Event.objects.get(type="claims.granted").data == {"paths": ["a.py", "src/"]}
