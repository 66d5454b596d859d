"""The refusals of the API reference: every error response, with its code, when it
happens and an example body in the error shape (docs/api.md, "Errors").

An operation names its own with ``errors(...)`` in its ``extend_schema``; the schema
hook (``hooks.postprocess``) adds those every operation shares (``shared``). The
bodies of domain errors are what the classes of coordination/errors.py render, so a
documented code cannot drift from the code; the schema of those bodies, the fields each
code adds to the error shape, is ``error_bodies``.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiResponse

from coordination import errors as e
from coordination.api.reference import examples as x
from coordination.api.reference.error_bodies import error_schema


@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    when: str
    body: dict[str, Any]
    variant: str = ""  # tells apart two refusals of one code in one response

    @property
    def line(self) -> str:
        return f"- `{self.code}`: {self.when}"

    @property
    def example(self) -> OpenApiExample:
        name = f"{self.code}_{self.variant}" if self.variant else self.code
        return OpenApiExample(
            name,
            value=self.body,
            summary=f"{self.code}: {self.when}".replace("`", ""),  # a summary is plain text
            response_only=True,
        )


def refusal(
    error: type[e.CoordinationError],
    when: str,
    detail: str | None = None,
    *,
    variant: str = "",
    **extra: Any,
) -> Refusal:
    """A domain error as an operation answers it: its body is the error's own."""
    return Refusal(error.status, error.code, when, error(detail, **extra).as_dict(), variant)


def answer(
    status: int, code: str, when: str, detail: str, variant: str = "", **extra: Any
) -> Refusal:
    """A refusal of DRF or of a middleware, rendered in the same shape."""
    return Refusal(status, code, when, {"code": code, "detail": detail, **extra}, variant)


def errors(*refusals: Refusal) -> dict[int, OpenApiResponse]:
    """The ``responses`` entries of an operation's own refusals, one per status."""
    return {
        status: OpenApiResponse(
            response=error_schema(r.code for r in group),
            description="\n".join(r.line for r in group),
            examples=[r.example for r in group],
        )
        for status, group in by_status(refusals)
    }


def by_status(refusals: Iterable[Refusal]) -> Iterable[tuple[int, list[Refusal]]]:
    ordered = sorted(refusals, key=lambda r: r.status)  # stable: declared order within
    return ((status, list(group)) for status, group in groupby(ordered, lambda r: r.status))


# --- what an operation answers of its own -------------------------------------------

LEASE_HELD = refusal(
    e.LeaseHeld,
    "another live session holds the issue; `holder` names it",
    "Issue 7 is leased by a live session.",
    holder={"session": 14, "agent": "coder-2"},
)
WIP_LIMIT_REACHED = refusal(
    e.WipLimitReached,
    "the project's live leases are at its cap, `limit`; the denial is logged in "
    "/wip-cap-denials/ (invariant 3 (the WIP cap))",
    "Project core already has 3 live leases.",
    limit=3,
)
SESSION_NOT_LIVE = refusal(
    e.SessionNotLive,
    "the session's last heartbeat is older than the TTL, or it has ended (invariant 1 "
    "(liveness)): heartbeat it, or register again",
    "Session 12 is not live.",
)
SESSION_ENDED = refusal(e.SessionEnded, "the session has ended; register a new one")
ISSUE_CLOSED = refusal(
    e.InvalidTransition,
    "the issue is `done` or `cancelled`: reopen it first",
    "Issue 7 is done; reopen it to work on it.",
    variant="closed",
)
NOT_READY = refusal(
    e.InvalidTransition,
    "entering `todo` without meeting the definition of ready; `missing` lists what it lacks",
    "Issue does not meet the definition of ready: missing description.",
    variant="not_ready",
    missing=["description"],
)
NOT_ALLOWED = refusal(
    e.InvalidTransition,
    "a move the workflow does not allow (GET /workflow/); `allowed` lists the moves there are",
    "Cannot move an issue from todo to in_review.",
    variant="not_allowed",
    allowed=["backlog", "in_progress", "cancelled"],
)
NEW_ISSUE_STATUS = refusal(
    e.InvalidTransition,
    "a new issue asked to start in another status than `backlog` or `todo`",
    "A new issue starts in backlog or todo, not in_progress.",
    variant="new",
)
NO_REPORT = refusal(
    e.InvalidTransition,
    "entering `in_review` or `done` without a completion report, although the issue was "
    'ever leased: `missing` is `["report"]`',
    "Issue 7 was worked on: entering in_review needs a completion report "
    '{"summary", "verification", "pr_link"?}.',
    variant="no_report",
    missing=["report"],
)
LEASE_NOT_HELD = refusal(
    e.LeaseNotHeld,
    "this session holds no unreleased lease on the issue",
    "Session 12 holds no lease on issue 7.",
)
STALE_FENCE = refusal(
    e.StaleFence,
    "`fence` is not the issue's current lease's: the lease was reclaimed, released or "
    'overridden (docs/api.md, "Fences"); nothing was changed',
    "Fence 3 is not the current lease's on issue 7 (its current lease has fence 4): the "
    "lease was lost; nothing was changed.",
    fence=3,
    current_fence=4,
)
STALE_HOLD_FENCE = refusal(
    e.StaleFence,
    "`fence` is not the fence of the session's unreleased hold of the resource; nothing was "
    "changed",
    "Fence 3 is not the fence of the session's hold of the resource (it is None); nothing "
    "was changed.",
    variant="hold",
    fence=3,
    current_fence=None,
)
RESOURCE_NOT_FOUND = refusal(
    e.NotFound,
    "no resource of this workspace has that name",
    "No resource of this workspace has that name.",
)
RESOURCE_BUSY = refusal(
    e.ResourceBusy,
    "not enough units free for the call, or earlier calls waiting for them (invariant 20 "
    "(resources are counted)); "
    "`holders` lists the live holds (each a hold, as /resource-holds/ shows it), "
    "`available` and `waiting` are the resource's, as its GET shows them",
    "Resource 'db:test' has 0 of 2 units free for 1; held by coder-1 (1), coder-2 (1).",
    resource="db:test",
    holders=[
        x.HOLD,
        {
            **x.HOLD,
            **{"id": 53, "session": 13, "agent": "coder-2", "issue": 8, "slots": [1]},
            **{"acquired_at": x.at("09:15:27"), "fence": 10},
        },
    ],
    available=0,
    waiting=0,
)
HOLD_NOT_HELD = refusal(
    e.HoldNotHeld,
    "this session holds no unreleased units of the resource",
    "Session 12 holds no units of 'db:test'.",
)
STALE_LOCK_FENCE = refusal(
    e.StaleFence,
    "`fence` is not the run's unreleased worktree lock's: it was reclaimed; the run is "
    "left as it was",
    "Fence 2 is not the fence of an unreleased worktree lock of run 5; the worktree's "
    "current lock has fence 3; nothing was changed.",
    fence=2,
    current_fence=3,
)
FILE_CONFLICT = refusal(
    e.FileConflict,
    "a path overlaps another issue's live claim (or a claim with no session): the same "
    "path, a directory claim above it, or for a directory a claim under it; nothing was "
    "claimed and each conflict is logged (invariants 5 (all-or-nothing) and 11 (overlap)); "
    "`conflicts` names each holder",
    "1 of 2 paths are claimed by other issues; nothing was claimed.",
    conflicts=[
        {
            "path": "src/webhooks/retry.py",
            "held_path": "src/webhooks/",
            "issue": 11,
            "session": 15,
            "agent": "coder-3",
        }
    ],
    conflicts_total=1,
)
WORKTREE_BUSY = refusal(
    e.WorktreeBusy,
    "the worktree is locked by another live run (`holder`): this run is recorded "
    "`cancelled` (`run`) and the lease is kept; retry when it finishes",
    "Worktree 'wt-main' is locked by run 4 of session 14 (agent 'coder-2'); retry when it "
    "finishes.",
    holder={"session": 14, "agent": "coder-2", "run": 4},
    run=5,
)
WORKTREE_UNRESOLVED = refusal(
    e.WorktreeUnresolved,
    "the issue needs a filesystem and nothing names a worktree for it (invariant 10 (lock "
    "mode per run)): the lease is released `worktree_unresolved` and the run recorded "
    "`skipped` (`run`)",
    "Issue 7 requires a filesystem but no worktree is configured for it: set the issue's "
    "worktree, bind agent 'coder-1' to a worktree (register with \"worktree\"), or set a "
    "primary worktree on project 'core'.",
    run=6,
)
RUN_NOT_RUNNING = refusal(
    e.RunNotRunning, "the run has finished already", "Run 5 is succeeded, not running."
)
HUMAN_GATE = refusal(
    e.Forbidden,
    "an API key at a human gate: only a person moves an issue from `in_review` to `done`",
    "Only a person can move an issue from in_review to done.",
    variant="human_gate",
)
BLOCKED = refusal(
    e.Blocked,
    "the issue has an unresolved blocker (invariant 16 (the work graph)); `blocked_by` names each",
    "Issue 15 is blocked by #7; it cannot be started until they are done or cancelled.",
    blocked_by=[{"id": 7, "title": "Retry failed webhook deliveries", "status": "in_progress"}],
)
DEPENDENCY_CYCLE = refusal(
    e.DependencyCycle,
    "the link would close a cycle of its type (invariant 16 (the work graph)); `cycle` names it",
    "Issue 15 blocks issue 7 would close the cycle #15 → #7 → #15.",
    cycle=[15, 7],
)
LANDING_NOT_FOUND = refusal(
    e.NotFound,
    "no landing entry of this workspace has that id",
    "Landing 31 does not exist.",
    variant="landing",
)
LANDING_EXISTS = refusal(
    e.LandingExists,
    "the issue has an open entry in the landing queue; `landing` is its id",
    "Issue 7 has an open landing entry, 31: it lands or is rejected first.",
    landing=31,
)
STALE_BATCH = refusal(
    e.StaleFence,
    "`fence` is not the batch this session tests: another tester took it again (its "
    "tester was not live), or the entry was reported; nothing was changed",
    "Fence 12 is not the batch of landing 31 that this session tests (it is under test by "
    "session 17 with fence 13); nothing was changed.",
    variant="batch",
    fence=12,
    current_fence=13,
)
PROJECT_UNKNOWN = refusal(
    e.InvalidInput,
    "the body's `project` is not a project of this workspace",
    "Project 'WEB' does not exist.",
    variant="project",
    field="project",
)
ISSUE_NOT_FOUND = refusal(
    e.NotFound,
    "the body's `issue` is not in this workspace (invariant 9 (workspace isolation))",
    "Issue 7 does not exist.",
    variant="issue",
)

# --- what a key may not do (invariant 13 (the key is the actor); coordination/api/access.py
# says which) ---

READ_KEY = refusal(
    e.Forbidden,
    "a read key: it only reads (and checks files, and revokes itself)",
    "A read key may not act for an agent.",
    variant="read_key",
)
AGENT_KEY = refusal(
    e.Forbidden,
    "an agent key: it writes no projects or worktrees",
    "The agent key of 'coder-1' may not write projects or worktrees.",
    variant="agent_key",
)
NOT_FLEET = refusal(
    e.Forbidden,
    "not a fleet key: only fleet keys manage keys and webhooks",
    "A read key may not manage keys or webhooks.",
    variant="not_fleet",
)
NOT_OWN_SESSION = refusal(
    e.Forbidden,
    "an agent key naming another agent's session",
    "An agent key acts only in its agent's sessions: session 14 is another agent's.",
    variant="session",
)
NOT_OWN_AGENT = refusal(
    e.Forbidden,
    "an agent key naming another agent than its own",
    "The agent key of 'coder-1' cannot act as agent 'coder-2'.",
    variant="agent",
)
NO_FORCE = refusal(
    e.Forbidden,
    "`force` with a key minted without `can_force`",
    "The agent key of 'coder-1' may not force; it was minted without can_force.",
    variant="force",
)
NOT_OWN_RUN = refusal(
    e.Forbidden,
    "an agent key finishing another agent's run",
    "The agent key of 'coder-1' cannot finish run 5, another agent's.",
    variant="run",
)
CLOSES_OTHERS = refusal(
    e.Forbidden,
    "an agent key closing an issue whose lease or file claims another agent holds",
    "The agent key of 'coder-1' cannot close issue 9: another agent holds its lease or "
    "file claims, and closing would release them.",
    variant="close",
)
NOT_SELF = refusal(
    e.Forbidden,
    "a key that is not a fleet key revoking another key than itself",
    "A read key may revoke only itself.",
    variant="self",
)
FORCE_TO_MINT = refusal(
    e.Forbidden,
    "a key that may not force minting one that may",
    "This key may not force, so it cannot mint a key that may.",
    variant="mint_force",
)
