"""Claims follow the edits (docs/agents.md, "Claims follow the edits"): the paths the
agent changed since the branch point are claimed for the issue, whatever it remembered
to claim; a path changed on the default branch since then is claimed on a fresh base.

A path another issue holds is never forced: it is told (stderr, a message to the
agent's own inbox; the server logs the conflict row) and stays unresolved until the
agent reverts it or the holder lets it go. The hand-in settles them first
(``--on-conflict``)."""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Collection
from pathlib import Path
from typing import Any

from projektor_agent import gitops
from projektor_agent.context import RunContext, Unit
from projektor_agent.errors import CommandError, Refused
from projektor_agent.output import say, warn
from projektor_agent.supervise import Watch

BATCH = 100  # the server's limit of paths per claim
SETTLE_WAIT_TYPES = "claims.released,lease.released"
SETTLE_WAIT_SECONDS = 25


def covered(path: str, held: Collection[str]) -> bool:
    """A changed file ``path`` held already by one of the claims ``held``: its own
    claim, or a directory claim above it (ending in ``/``: it holds its subtree, by
    whole segments). The server's overlap rule (coordination/paths.py), read for a
    file; both are held to one table of examples, tests/overlap_cases.json."""
    if path in held:
        return True
    parts = path.split("/")
    return any("/".join(parts[:n]) + "/" in held for n in range(1, len(parts)))


class Scanner:
    """The claims of one unit, following what its agent changed."""

    def __init__(self, context: RunContext, unit: Unit) -> None:
        self.context, self.unit = context, unit
        self.client = context.client
        self.agent = context.agent
        self.known: set[str] = set()  # paths the issue holds, as far as seen
        self.conflicts: dict[str, dict[str, Any]] = {}  # path -> the other issue's claim
        self.unfresh: dict[str, list[str]] = {}  # path -> what the rebase conflicted in
        self.told: set[tuple[str, str]] = set()
        self.lock = threading.Lock()

    @property
    def base(self) -> str | None:
        """What changes are counted from: the default branch, or the start commit."""
        unit, repo = self.unit, self.context.repo
        if repo is not None and unit.branch is not None:
            return gitops.upstream(repo, str(unit.base))
        return unit.base

    def scan(self, again: bool = True) -> list[str]:
        """Claim the changed paths not held yet; the paths taken now. Without
        ``again``, a path refused before is not asked for again (each refusal is a
        conflict row on the server): the hand-in's scans ask again."""
        with self.lock:
            workdir, base = self.unit.workdir, self.base
            if workdir is None or base is None:
                return []
            changed = gitops.changed_paths(Path(workdir), base)
            for gone in set(self.conflicts) - set(changed):  # reverted: nothing to settle
                del self.conflicts[gone]
            for gone in set(self.unfresh) - set(changed):
                del self.unfresh[gone]
            wanted = [
                p for p in changed if not self.covered(p) and (again or p not in self.conflicts)
            ]
            if wanted:
                self.refresh_known()
                wanted = [p for p in wanted if not self.covered(p)]
            taken: list[str] = []
            for start in range(0, len(wanted), BATCH):
                taken += self.claim(wanted[start : start + BATCH])
            for path in taken:
                self.unfresh.pop(path, None)  # claimed again: fresh unless told below
            if taken and self.unit.branch is not None:
                self.freshen(Path(workdir), base, taken)
            return taken

    def covered(self, path: str) -> bool:
        return covered(path, self.known)

    def refresh_known(self) -> None:
        """The issue's active claims on the server (the hook's among them)."""
        query: dict[str, Any] = {"issue": self.unit.id, "active": "true"}
        while True:
            page = self.client.get("/file-claims/", query)
            self.known.update(str(c["path"]) for c in page.get("results", []))
            if not page.get("next"):
                return
            query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page["next"]).query))

    def claim(self, paths: list[str]) -> list[str]:
        """Claim ``paths``, all but those another issue holds: the claim is all or
        nothing, so a refused batch is sent again without its conflicts."""
        while paths:
            body: dict[str, Any] = {
                "issue": self.unit.id,
                "paths": paths,
                "session": self.unit.session,
            }
            if self.unit.fence is not None:
                body["fence"] = self.unit.fence
            try:
                self.client.post("/file-claims/", body)
            except Refused as refused:
                if refused.code != "file_conflict" or not isinstance(refused.body, dict):
                    raise
                held = {
                    str(c.get("path")): c
                    for c in refused.body.get("conflicts") or []
                    if isinstance(c, dict)
                }
                if not held.keys() & set(paths):
                    raise
                for path, holder in held.items():
                    self.conflict(path, holder)
                paths = [p for p in paths if p not in held]
                continue
            self.known.update(paths)
            for path in paths:
                self.conflicts.pop(path, None)
            return paths
        return []

    def conflict(self, path: str, holder: dict[str, Any]) -> None:
        self.conflicts[path] = holder
        if ("held", path) in self.told:
            return
        self.told.add(("held", path))
        held = holder.get("held_path") or path
        by = f" through its claim of {held}" if held != path else ""
        sentence = (
            f"issue {self.unit.id}: {path} was changed in the worktree but is claimed by issue "
            f"{holder.get('issue')} (agent {holder.get('agent') or 'none'}){by}; not taken: "
            "revert it, or wait for them to release it"
        )
        warn(sentence)
        self.tell_agent(sentence)

    def freshen(self, workdir: Path, base: str, taken: list[str]) -> None:
        """Taken claims on paths the default branch changed since the branch point:
        the branch rebased first; a rebase that cannot be made clean undone, and
        those claims released (not used)."""
        stale, conflicts = gitops.freshen(workdir, base, taken)
        if not stale:
            return
        if conflicts is None:
            say(
                f"issue {self.unit.id}: {', '.join(stale)} changed on the default branch since "
                "the branch point: the branch was rebased onto it before the claim"
            )
            return
        self.release(stale)
        for path in stale:
            self.unfresh[path] = conflicts
        if ("stale", ",".join(stale)) in self.told:
            return
        self.told.add(("stale", ",".join(stale)))
        sentence = (
            f"issue {self.unit.id}: {', '.join(stale)} changed on the default branch since the "
            f"branch point, and the branch cannot be rebased onto it cleanly (conflicts in "
            f"{', '.join(conflicts)}); the rebase was undone and the claim released"
        )
        warn(sentence)
        self.tell_agent(sentence)

    def release(self, paths: list[str]) -> None:
        body = {"issue": self.unit.id, "paths": paths, "session": self.unit.session}
        self.client.post("/file-claims/release/", body)
        self.known.difference_update(paths)

    def tell_agent(self, body: str) -> None:
        message = {"scope": f"agent:{self.agent}", "body": body, "session": self.unit.session}
        try:
            self.client.post("/messages/", message)
        except Refused as refused:
            warn(f"could not post the message: {refused.message}")

    def while_running(self, period: float) -> threading.Event:
        """Scan every ``period`` seconds (none: 0) until the returned event is set."""
        done = threading.Event()

        def scans() -> None:
            told = ""
            while not done.wait(period):
                try:
                    self.scan(again=False)
                except (CommandError, OSError) as error:
                    said = getattr(error, "message", str(error))
                    if said != told:
                        warn(f"issue {self.unit.id}: the scan could not claim: {said}")
                    told = said

        if period > 0:
            threading.Thread(target=scans, name="scan", daemon=True).start()
        return done

    def unresolved(self) -> str | None:
        """Why the hand-in cannot go ahead yet, or None."""
        parts = []
        if self.conflicts:
            named = ", ".join(
                f"{path} (issue {holder.get('issue')})" for path, holder in self.conflicts.items()
            )
            parts.append(f"changed paths claimed by other issues: {named}")
        if self.unfresh:
            parts.append(
                "changed paths whose branch cannot be rebased onto the default branch "
                f"cleanly: {', '.join(sorted(self.unfresh))}"
            )
        return "; ".join(parts) or None

    def settle(self, watch: Watch) -> str | None:
        """The last scan before the hand-in: None when every changed path is the
        issue's (or the work was lost: ``watch``); else, with --on-conflict wait, wait
        for the holders (on events) and scan again; else why the hand-in cannot go
        ahead."""
        events = self.context.events
        if not events.cursor:
            events.catch_up(SETTLE_WAIT_TYPES)
        waiting = False
        while True:
            try:
                self.scan()
            except (CommandError, OSError) as error:
                said = getattr(error, "message", str(error))
                warn(f"issue {self.unit.id}: the last scan could not claim: {said}")
                return None
            why = self.unresolved()
            if why is None or watch.lost:
                return None
            if self.unfresh or self.context.options.on_conflict == "fail":
                return why
            if not waiting:
                say(f"issue {self.unit.id}: the hand-in waits: {why}")
                waiting = True
            events.wait(SETTLE_WAIT_TYPES, SETTLE_WAIT_SECONDS)
