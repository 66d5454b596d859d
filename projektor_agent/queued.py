"""``projektor run --integrate --queue`` (docs/agents.md, "Landing green: the queue"):
the unit's branch queued in its project's landing queue under the issue's lease, and
the runner, keeping its lease and claims, a tester of that queue while it waits for
the entry's outcome: landed (it hands in) or rejected (it gives back)."""

from __future__ import annotations

from typing import Any

from projektor_agent import gitops, integrate, landgit, landing
from projektor_agent.context import Events, Interrupted, RunContext, Unit
from projektor_agent.errors import Refused, Unreachable, UsageError
from projektor_agent.output import say, warn
from projektor_agent.supervise import Watch

WAIT_SECONDS = 25  # one long poll for the queue's news (the server allows 30)
PAUSE_SECONDS = 5  # after the server did not answer


class Queued:
    def __init__(self, context: RunContext, unit: Unit, watch: Watch) -> None:
        repo, verify = context.repo, context.options.verify
        if repo is None or unit.workdir is None or unit.branch is None or not verify:
            raise UsageError("--queue needs --worktrees and --verify: it queues the issue's branch")
        self.context, self.unit, self.watch = context, unit, watch
        self.client, self.repo = context.client, repo
        self.project = str(unit.issue.get("project") or "")
        self.news = Events(context.client, context.signals)
        self.tester = landing.Tester(
            context.client,
            context.signals,
            session=unit.session,
            project=self.project,
            repo=repo,
            where=landgit.tester_dir(repo, context.worktrees, context.agent),
            verify=verify,
            size=context.batch,
        )

    def land(self) -> integrate.Landed:
        """Queued, then the entry's outcome awaited (testing batches meanwhile)."""
        self.news.catch_up(landing.TYPES, self.project)  # before any look: no news missed
        entry = self.queue()
        try:
            return self.outcome(int(entry["id"]))
        except Interrupted:
            done = self.client.get(f"/landings/{entry['id']}/")
            if done.get("state") == "landed":  # it landed all the same: it is handed in
                return self.landed(done)
            raise

    def queue(self) -> dict[str, Any]:
        unit, workdir, branch = self.unit, self.unit.workdir, self.unit.branch
        assert workdir is not None and branch is not None
        if unit.fence is None:
            raise integrate.Failed("not queued: the issue's lease has no fence")
        commit = gitops.head(workdir)
        if gitops.has_remote(self.repo):  # for testers on other machines
            target = f"{commit}:refs/heads/{branch}"
            pushed = gitops.git("push", "-q", "-f", "origin", target, cwd=self.repo, check=False)
            if pushed.returncode != 0:
                warn(f"issue {unit.id}: could not push {branch} to origin: {pushed.stderr.strip()}")
        body = {
            "issue": unit.id,
            "session": unit.session,
            "branch": branch,
            "commit": commit,
            "fence": unit.fence,
        }
        while True:
            try:
                entry = dict(self.client.post("/landings/", body))
                break
            except Refused as refused:
                if refused.code != "landing_exists" or not isinstance(refused.body, dict):
                    raise integrate.Failed(f"not queued: {refused.message}") from None
                entry = dict(self.client.get(f"/landings/{refused.body.get('landing')}/"))
                if entry.get("session") == unit.session and entry.get("commit") == commit:
                    break  # queued already: an answer lost on the way
                say(
                    f"issue {unit.id}: its earlier landing {entry['id']} is still open; "
                    "queued once it closes"
                )
                self.meanwhile()
        say(f"issue {unit.id}: queued landing {entry['id']} (place {entry.get('place')})")
        return entry

    def outcome(self, landing_id: int) -> integrate.Landed:
        while True:
            if self.watch.lost:
                raise integrate.Failed("the work was taken before it landed")
            try:
                entry = self.client.get(f"/landings/{landing_id}/")
                if entry.get("state") == "landed":
                    return self.landed(entry)
                if entry.get("state") == "rejected":
                    raise integrate.Failed(rejection(entry))
                self.meanwhile()
            except Unreachable as error:  # the heartbeat goes on: the wait outlives it
                warn(f"issue {self.unit.id}: {error.message}; asking again in {PAUSE_SECONDS} s")
                self.context.signals.pause(PAUSE_SECONDS)

    def meanwhile(self) -> None:
        """A tester's turn when the queue's batch is free; else a wait for its news."""
        found = self.tester.turn()
        if found == landing.TESTED:
            return
        # A busy tester that dies tells nobody: its batch is free after a TTL.
        seconds = min(self.unit.ttl, WAIT_SECONDS) if found == landing.BUSY else WAIT_SECONDS
        self.news.wait(landing.TYPES, seconds, self.project)

    def landed(self, entry: dict[str, Any]) -> integrate.Landed:
        commit = str(entry.get("landed_commit") or "")
        branch = gitops.default_branch(self.repo)
        say(f"issue {self.unit.id}: landing {entry['id']} landed as {commit[:12]} on {branch}")
        verification = (
            f"`{self.context.options.verify}` passed on the tree that landed "
            f"({commit[:12]}, landing {entry['id']}, tested in its batch by the landing queue)"
        )
        return integrate.Landed(branch=branch, commit=commit, verification=verification)


def land(context: RunContext, unit: Unit, watch: Watch) -> integrate.Landed:
    """``unit``'s branch landed through the queue, or integrate.Failed saying why not."""
    return Queued(context, unit, watch).land()


def rejection(entry: dict[str, Any]) -> str:
    """Why the entry was rejected, in words, with the check's output's end."""
    number, detail = entry["id"], str(entry.get("detail") or "").rstrip()
    if entry.get("reason") == "conflict":
        return (
            f"landing {number} rejected: its commits do not apply on the default branch and "
            f"what landed before it (conflict in {detail}); the branch is kept, to be brought "
            "up to date"
        )
    if entry.get("reason") == "check_failed":
        return (
            f"landing {number} rejected: check failed on the tree it makes with the default "
            "branch and what landed before it (found by bisection); the branch is kept. "
            f"The end of the check's output:\n```\n{detail}\n```"
        )
    return f"landing {number} rejected ({entry.get('reason')}): {detail}"
