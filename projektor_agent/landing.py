"""A landing tester (docs/agents.md, "Landing green: the queue"): it takes its
project's head batch under a fence, applies the entries in order on the default
branch in a worktree of its own, runs the check once on the tip, and lands them all
(green) or bisects the applied prefixes (red): the green prefix lands, the culprit is
rejected with the check's output, the rest go back to the queue. The default branch
only ever moves to a commit whose exact tree passed the check; the server orders,
fences and records, and never runs git."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from projektor_agent import gitops, landgit
from projektor_agent.client import Client
from projektor_agent.context import BatchSize, Signals
from projektor_agent.errors import CommandError, Refused
from projektor_agent.output import say

TYPES = "landing.landed,landing.rejected,landing.testing,landing.queued"
MAX_BATCH = 32  # the server's largest take
DETAIL_LIMIT = 4000  # the server keeps the end of a rejection's detail up to this
TESTED, BUSY, IDLE = "tested", "busy", "idle"  # what a turn found


class Stale(Exception):
    """Another tester took the batch (this one's session lapsed): it is theirs now."""


@dataclass
class Applied:
    entry: dict[str, Any]
    commit: str  # its last commit as applied: the tree of the batch up to it


def named(entry: dict[str, Any]) -> str:
    return f"landing {entry['id']} (issue {entry.get('issue')})"


class Tester:
    """Tests ``project``'s batches as ``session``, in the worktree ``where`` of ``repo``,
    with the check ``verify`` (a shell command)."""

    def __init__(
        self,
        client: Client,
        signals: Signals,
        *,
        session: int,
        project: str,
        repo: Path,
        where: Path,
        verify: str,
        size: BatchSize,
    ) -> None:
        self.client, self.signals = client, signals
        self.session, self.project = session, project
        self.repo, self.where, self.verify = repo, where, verify
        self.size = size

    def turn(self) -> str:
        """One take: TESTED (a batch was taken and worked to its end), BUSY (another
        live tester holds the batch) or IDLE (nothing waits)."""
        taken = self.take()
        busy = taken.get("busy") or None
        if busy and int(busy.get("session") or 0) == self.session:
            # This session took it, and lost the answer or stopped working it.
            say(f"landing: this session holds the batch under fence {busy['fence']}: again")
            self.give_back(int(busy["fence"]))
            taken = self.take()
            busy = taken.get("busy") or None
        entries = list(taken.get("entries") or [])
        if entries:
            self.test(int(taken["fence"]), entries)
            return TESTED
        return BUSY if busy else IDLE

    def take(self) -> dict[str, Any]:
        body = {"session": self.session, "project": self.project, "max": self.size.now}
        return dict(self.client.post("/landings/take/", body))

    def test(self, fence: int, entries: list[dict[str, Any]]) -> None:
        """The batch worked to its end: each entry landed, rejected or returned."""
        batch = Batch(self, fence, entries)
        try:
            batch.test()
        except Stale:
            say(
                f"landing: the batch under fence {fence} was taken by another tester "
                "(this tester's session lapsed): left to it"
            )
        except BaseException:
            self.give_back(fence, quietly=True)  # interrupted, or git or the server failed
            raise

    def give_back(self, fence: int, quietly: bool = False) -> None:
        """The batch's entries still under test, queued again at their places."""
        try:
            returned = self.client.post(
                "/landings/return/", {"session": self.session, "fence": fence}
            )
        except CommandError as error:
            if not quietly and error.code != "stale_fence":
                raise
            return
        ids = ", ".join(str(i) for i in returned.get("returned") or [])
        if ids:
            say(f"landing: returned to the queue under fence {fence}: landings {ids}")


class Batch:
    def __init__(self, tester: Tester, fence: int, entries: list[dict[str, Any]]) -> None:
        self.tester, self.fence, self.entries = tester, fence, entries
        self.client = tester.client

    def test(self) -> None:
        tester = self.tester
        base = landgit.read_base(tester.repo)
        landgit.reset(tester.repo, tester.where, base.tip)
        names = ", ".join(named(entry) for entry in self.entries)
        say(
            f"landing: batch of {len(self.entries)} under fence {self.fence} on "
            f"{base.branch} at {base.tip[:12]}: {names}"
        )
        applied: list[Applied] = []
        for entry in self.entries:
            tester.signals.check()
            done = self.apply(base, entry)
            if done is not None:
                applied.append(done)
        if not applied:
            return
        passed, output = self.check()
        count = len(applied)
        if passed:
            if self.land(base, applied, count):
                tester.size.green()
                say(
                    f"landing: batch of {count} under fence {self.fence}: green, landed "
                    f"{applied[-1].commit[:12]} on {base.branch}"
                )
            return
        tester.size.red()
        self.bisect(base, applied, output)

    def apply(self, base: landgit.Base, entry: dict[str, Any]) -> Applied | None:
        """``entry`` on the worktree's HEAD; None when it is closed instead (it was
        landed already, or does not apply)."""
        landing, commit = int(entry["id"]), str(entry["commit"])
        here = landgit.fetch_entry(base, str(entry.get("branch") or ""), commit)
        done = landgit.landed_as(base, landing, commit)
        if done:
            self.report(entry, "land", commit=done)
            say(
                f"{named(entry)}: already on {base.branch} as {done[:12]} (a tester moved "
                "the branch, then stopped before saying so): landed"
            )
            return None
        if not here:
            why = f"its commit {commit[:12]} is not in this repository nor on origin"
            self.reject(entry, "conflict", why)
            return None
        conflicts = landgit.apply(base, self.tester.where, landing, commit)
        if conflicts:
            self.reject(entry, "conflict", ", ".join(conflicts))
            return None
        return Applied(entry, gitops.head(self.tester.where))

    def check(self) -> tuple[bool, str]:
        """The check on the worktree's tree: passed, and the end of its output."""
        tester = self.tester
        command = ["/bin/sh", "-c", tester.verify]
        child = tester.signals.spawn(command, str(tester.where), dict(os.environ), capture=True)
        status = tester.signals.supervise(child)
        tester.signals.check()  # interrupted: the batch is returned
        text = f"`{tester.verify}` exited with status {status}:\n{child.output.rstrip()}"
        return status == 0, text[-DETAIL_LIMIT:]

    def bisect(self, base: landgit.Base, applied: list[Applied], output: str) -> None:
        """Prefix ``lo`` passed (0: the old tip), prefix ``hi`` failed: the culprit is
        entry ``hi - 1``. Each prefix's tree is that entry's applied commit."""
        tester, count = self.tester, len(applied)
        lo, hi, failed = 0, count, output
        if count > 1:
            say(f"landing: batch of {count} under fence {self.fence}: red; bisecting")
        while hi - lo > 1:
            middle = (lo + hi) // 2
            landgit.reset(tester.repo, tester.where, applied[middle - 1].commit)
            passed, output = self.check()
            if passed:
                lo = middle
            else:
                hi, failed = middle, output
        if lo and not self.land(base, applied, lo):
            return  # the branch moved: the whole batch was returned
        if lo:
            green = ", ".join(named(done.entry) for done in applied[:lo])
            say(
                f"landing: batch under fence {self.fence}: the green part ({green}) landed "
                f"as {applied[lo - 1].commit[:12]} on {base.branch}"
            )
        culprit = applied[hi - 1].entry
        self.reject(culprit, "check_failed", failed)
        if hi < count:
            tester.give_back(self.fence)

    def land(self, base: landgit.Base, applied: list[Applied], count: int) -> bool:
        """The default branch moved to the ``count``th applied commit (which passed the
        check itself), then those entries reported landed; False when the branch moved
        meanwhile (the batch is returned, to be tested again on what it is now)."""
        self.still_ours(applied[0].entry)
        target = applied[count - 1].commit
        why_not = landgit.move(base, target)
        if why_not is not None:
            say(
                f"landing: {base.branch} not moved ({why_not}); the batch under fence "
                f"{self.fence} goes back to the queue, to be tested on what it is now"
            )
            self.tester.give_back(self.fence)
            return False
        for done in applied[:count]:
            self.report(done.entry, "land", commit=done.commit)
        return True

    def still_ours(self, entry: dict[str, Any]) -> None:
        """Before the branch moves: the batch was not taken by another tester."""
        now = self.client.get(f"/landings/{entry['id']}/")
        if now.get("state") != "testing" or now.get("fence") != self.fence:
            raise Stale()

    def reject(self, entry: dict[str, Any], reason: str, detail: str) -> None:
        self.report(entry, "reject", reason=reason, detail=detail[-DETAIL_LIMIT:])
        if reason == "conflict":
            say(f"{named(entry)} rejected: conflict in {detail}")
        else:
            last = (detail.strip().splitlines() or [""])[-1]
            say(f"{named(entry)} rejected: check failed; {last}")

    def report(self, entry: dict[str, Any], action: str, **body: Any) -> None:
        body.update(session=self.tester.session, fence=self.fence)
        try:
            self.client.post(f"/landings/{entry['id']}/{action}/", body)
        except Refused as refused:
            if refused.code == "stale_fence":
                raise Stale() from None
            raise
