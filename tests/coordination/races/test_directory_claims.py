"""Directory-claim races on PostgreSQL (invariant 11 (overlap)): real threads, each with its own
connection and session.

They prove what ``coordination.services.file_claims.claim`` argues: claimers of
overlapping paths (a directory and a file under it, an ancestor and a descendant)
serialise on the multi-granularity advisory locks, so no two overlapping claims of
different issues are ever held at once, not in a snapshot taken during the race nor
at its end; claimers of disjoint subtrees never wait for each other. Each race is
shown to fail with the path locks removed (``locking.take_path_locks`` replaced by a
function that takes nothing), its interleaving forced by a barrier or by the holder
keeping its transaction open: then the overlap does happen.
"""

import random
import threading

import pytest
from django.db import connections

from coordination.errors import FileConflict
from coordination.liveness import DbNow
from coordination.models import AgentSession, FileClaim, Issue, ReleaseReason
from coordination.paths import overlapping_pairs
from coordination.services import file_claims, locking
from coordination.services.common import release_unreleased
from coordination.services.file_claims import claim as claiming
from tests.conftest import expire
from tests.coordination.races.conftest import hold_and_race, run_in_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 16
ROUNDS = 25
# A small shared tree: 3 top directories × 3 subdirectories × 3 files.
TOPS = ["src/", "lib/", "docs/"]
SUBS = [f"{top}{sub}/" for top in TOPS for sub in ("a", "b", "ab")]
FILES = [f"{sub}{name}" for sub in SUBS for name in ("x.py", "y.py", "z.md")]
NODES = TOPS + SUBS + FILES


def claim(workspace, issue_id, session_id, paths, force=False):
    return file_claims.claim_files(
        workspace=workspace, issue_id=issue_id, paths=paths, session_id=session_id, force=force
    )


def fresh_issues(project, count, label):
    return Issue.objects.bulk_create(
        Issue(workspace=project.workspace, project=project, title=f"{label}-{n}")
        for n in range(count)
    )


def keep_alive():
    AgentSession.objects.filter(status="active").update(last_heartbeat_at=DbNow())


def release_everything():
    release_unreleased(FileClaim.objects.all(), ReleaseReason.RELEASED)


def overlaps_between_issues(rows):
    """Each pair ``(a, b)``, ``a < b``, of unreleased claims of different issues that
    overlap, from ``(path, issue)`` rows (the races keep every holder live)."""
    issue_of = dict(rows)  # one unreleased row per path: the unique index
    return [
        (first, second)
        for first, second in overlapping_pairs(issue_of, issue_of)
        if first < second and issue_of[first] != issue_of[second]
    ]


def held_rows():
    return list(FileClaim.objects.filter(released_at__isnull=True).values_list("path", "issue_id"))


class Snapshots:
    """A thread of its own, on its own connection, that reads the unreleased claims
    again and again while the claimers run, and keeps every overlap it sees."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.taken = 0
        self.overlaps: list[tuple[str, str]] = []
        self.thread = threading.Thread(target=self.watch)

    def watch(self) -> None:
        try:
            while not self.stop.is_set():
                self.overlaps += overlaps_between_issues(held_rows())  # one statement: one snapshot
                self.taken += 1
        finally:
            connections.close_all()

    def __enter__(self) -> "Snapshots":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.overlaps += overlaps_between_issues(held_rows())  # and the last word
        self.taken += 1


def no_path_locks(monkeypatch):
    monkeypatch.setattr(locking, "take_path_locks", lambda **kwargs: None)


def request_over_tree(rng):
    """A directory, or a few files and directories, anywhere in the shared tree."""
    if rng.random() < 0.4:
        return [rng.choice(TOPS + SUBS)]
    return rng.sample(NODES, rng.randint(1, 3))


# --- the stress race: directories and files over one tree --------------------------------


def test_directory_and_file_claimers_never_hold_overlapping_claims(
    workspace, project, make_session
):
    rng = random.Random(11)
    sessions = [make_session(f"agent-{n}") for n in range(THREADS)]
    granted = refused = snapshots = 0
    for round_number in range(ROUNDS):
        keep_alive()
        issues = fresh_issues(project, THREADS, f"r{round_number}")
        requests = [request_over_tree(rng) for _ in range(THREADS)]
        jobs = [
            (workspace, i.pk, s.pk, p) for i, s, p in zip(issues, sessions, requests, strict=True)
        ]

        with Snapshots() as watched:
            results = run_in_threads(claim, jobs)

        assert watched.overlaps == [], f"round {round_number}: {watched.overlaps[:5]}"
        snapshots += watched.taken
        unexpected = [
            r for r in results if isinstance(r, Exception) and not isinstance(r, FileConflict)
        ]
        assert unexpected == [], f"round {round_number}: {unexpected}"
        held = held_rows()
        for n, result in enumerate(results):
            mine = sorted(path for path, issue_id in held if issue_id == issues[n].pk)
            if isinstance(result, FileConflict):
                refused += 1
                assert mine == []  # nothing claimed, all or nothing
                # Every holder it named overlaps a request and holds its claim still.
                for conflict in result.extra["conflicts"]:
                    assert (conflict["held_path"], conflict["issue"]) in held
                    assert overlapping_pairs([conflict["path"]], [conflict["held_path"]])
            else:
                granted += 1
                assert mine == sorted(set(requests[n])), f"round {round_number}"
        release_everything()
    assert granted and refused, (granted, refused)
    assert snapshots > ROUNDS  # the watcher did look during the races


def test_without_the_path_locks_the_same_claimers_do_overlap(
    workspace, project, make_session, monkeypatch
):
    """Locks removed, and every claimer made to look for holders before any of them
    inserts (a barrier after the look): the directory and the claims under and above
    it are all granted. The unique index alone sees equal paths only."""
    no_path_locks(monkeypatch)
    requests = [["src/"], ["src/a/"], ["src/a/x.py"], ["src/b/y.py"], ["lib/"], ["lib/ab/z.md"]]
    looked = threading.Barrier(len(requests))
    real = claiming.overlapping_claims

    def look_then_wait(*args, **kwargs):
        found = real(*args, **kwargs)
        looked.wait(timeout=30)
        return found

    monkeypatch.setattr(claiming, "overlapping_claims", look_then_wait)
    sessions = [make_session(f"agent-{n}") for n in range(len(requests))]
    issues = fresh_issues(project, len(requests), "nolock")

    with Snapshots() as watched:
        results = run_in_threads(
            claim,
            [
                (workspace, i.pk, s.pk, p)
                for i, s, p in zip(issues, sessions, requests, strict=True)
            ],
        )

    assert [r for r in results if isinstance(r, Exception)] == []
    assert set(overlaps_between_issues(held_rows())) >= {
        ("src/", "src/a/"),
        ("src/", "src/a/x.py"),
        ("src/", "src/b/y.py"),
        ("src/a/", "src/a/x.py"),
        ("lib/", "lib/ab/z.md"),
    }
    assert watched.overlaps


# --- one against one: a holder keeps its transaction open ---------------------------------

OVERLAPPING = [
    ("src/api/", "src/api/v2/x.py"),  # a directory, then a file under it
    ("src/api/v2/x.py", "src/api/"),  # a file, then a directory above it
    ("src/", "src/api/"),  # an ancestor, then a descendant
    ("src/api/", "src/"),  # a descendant, then an ancestor
]


def one_against_one(workspace, project, make_session, first, second):
    holder_issue, racer_issue = fresh_issues(project, 2, f"{first}|{second}")
    holder, racer = make_session("holder"), make_session("racer")
    waited = []

    def hold(let_racer_in):
        claim(workspace, holder_issue.pk, holder.pk, [first])
        waited.append(not let_racer_in())  # claimed, not committed: the racer comes now

    def race():
        return claim(workspace, racer_issue.pk, racer.pk, [second])

    held_result, raced = hold_and_race(hold, race)
    assert held_result is None, held_result
    return raced, waited[0], (holder_issue, racer_issue)


@pytest.mark.parametrize(("first", "second"), OVERLAPPING)
def test_an_overlapping_claimer_waits_for_the_holder_and_is_refused(
    workspace, project, make_session, first, second
):
    raced, waited, (holder_issue, _) = one_against_one(
        workspace, project, make_session, first, second
    )

    assert waited, "the racer must queue behind the open claim"
    assert isinstance(raced, FileConflict), raced
    assert [(c["path"], c["held_path"], c["issue"]) for c in raced.extra["conflicts"]] == [
        (second, first, holder_issue.pk)
    ]
    assert overlaps_between_issues(held_rows()) == []
    assert held_rows() == [(first, holder_issue.pk)]


@pytest.mark.parametrize(("first", "second"), OVERLAPPING)
def test_without_the_path_locks_an_overlapping_claimer_gets_in(
    workspace, project, make_session, monkeypatch, first, second
):
    no_path_locks(monkeypatch)

    raced, waited, (holder_issue, racer_issue) = one_against_one(
        workspace, project, make_session, first, second
    )

    assert not waited and isinstance(raced, file_claims.ClaimedFiles), raced
    assert sorted(held_rows()) == sorted([(first, holder_issue.pk), (second, racer_issue.pk)])
    assert overlaps_between_issues(held_rows()) == [tuple(sorted((first, second)))]


def test_the_same_path_is_guarded_by_the_unique_index_even_without_locks(
    workspace, project, make_session, monkeypatch
):
    """Why the index was enough before directories, and is no longer: equal paths
    still queue on it, a file under a directory does not (above)."""
    no_path_locks(monkeypatch)

    raced, waited, (holder_issue, _) = one_against_one(
        workspace, project, make_session, "src/api/", "src/api/"
    )

    assert waited and isinstance(raced, FileConflict), raced
    assert held_rows() == [("src/api/", holder_issue.pk)]


DISJOINT = [
    ("src/api/", "src/web/x.py"),  # sibling subtrees: both take src/ shared
    ("src/api/", "src/apiv2/x.py"),  # the same letters, another segment
    ("src/api/x.py", "src/api/y.py"),  # two files of one directory
    ("src/a/", "src/b/"),  # two directories side by side
    ("src/api", "src/api/x.py"),  # a file named like a directory, and a file under it
]


@pytest.mark.parametrize(("first", "second"), DISJOINT)
def test_disjoint_subtrees_proceed_in_parallel(workspace, project, make_session, first, second):
    """The holder keeps its claim's transaction open, path locks and all, until the
    racer has finished its own claim: it never waited for the holder."""
    raced, waited, (holder_issue, racer_issue) = one_against_one(
        workspace, project, make_session, first, second
    )

    assert not waited, "a disjoint claim must not wait for the open one"
    assert isinstance(raced, file_claims.ClaimedFiles), raced
    assert sorted(held_rows()) == sorted([(first, holder_issue.pk), (second, racer_issue.pk)])


def test_one_lock_for_every_path_would_serialise_them_and_the_measure_sees_it(
    workspace, project, make_session, monkeypatch
):
    """The check of the test above is no formality: with every node on one key, as a
    single tree-wide lock would be, the disjoint racer does wait."""
    monkeypatch.setattr(locking, "path_lock_key", lambda workspace_id, path: 7)

    raced, waited, _ = one_against_one(workspace, project, make_session, "src/api/", "src/web/x.py")

    assert waited and isinstance(raced, file_claims.ClaimedFiles), raced


# --- stale holders --------------------------------------------------------------------------


def test_a_dead_holder_that_heartbeats_mid_claim_keeps_its_claim(
    workspace, project, make_session, monkeypatch
):
    """The reclaim is a compare-and-set on liveness: a heartbeat that commits between
    the look and the reclaim undoes the attempt, and the next one is refused."""
    mine, theirs = fresh_issues(project, 2, "revive")
    dead = make_session("dead")
    claim(workspace, theirs.pk, dead.pk, ["d/x.py"])
    expire(dead)
    real = claiming.overlapping_claims
    looks = []

    def heartbeat_after_first_look(*args, **kwargs):
        found = real(*args, **kwargs)
        looks.append([f.live for f in found])
        if len(looks) == 1:
            beat = threading.Thread(target=heartbeat, args=(dead.pk,))
            beat.start()
            beat.join()
        return found

    def heartbeat(session_id):
        try:
            AgentSession.objects.filter(pk=session_id).update(last_heartbeat_at=DbNow())
        finally:
            connections.close_all()

    monkeypatch.setattr(claiming, "overlapping_claims", heartbeat_after_first_look)

    with pytest.raises(FileConflict) as caught:
        claim(workspace, mine.pk, make_session("me").pk, ["d/"])

    assert looks == [[False], [True]]
    assert caught.value.extra["conflicts"][0]["held_path"] == "d/x.py"
    assert held_rows() == [("d/x.py", theirs.pk)]
