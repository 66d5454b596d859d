"""``projektor hook HARNESS``: claims at edit time, for every agent CLI that runs a
command before a tool edits a file (``hook install|uninstall``: hook_install).

The CLI runs the hook with its payload on stdin; its adapter (``harnesses``) reads the
files the tool call is about to change, and says the verdict back in that CLI's way.
The verdict is the same for every CLI:

- The files, relative to the worktree's root, are claimed for ``PROJEKTOR_ISSUE`` in
  ``PROJEKTOR_SESSION``, all or nothing (a patch's every file: added, updated, moved to,
  deleted). Held by another issue: refused, with a sentence the model can act on.
  Outside the worktree: allowed, not claimed. ``session_not_live``: one heartbeat, then
  the claim again.
- Fresh base: in a runner's worktree (``PROJEKTOR_BASE``), claimed files that the
  default branch changed since the branch point are brought up to date first (the
  branch rebased, uncommitted work carried across); a rebase that cannot be made clean
  is undone, the claims taken just now released, and the edit refused saying so.
- Claude Code's ``PostToolUse``: progress, where the server counts it.
- Outside a runner (no ``PROJEKTOR_SESSION``), a payload no adapter knows, a tool that
  edits nothing: exit 0, nothing printed. The server unreachable, the hook itself
  failing, or its command line wrong (a harness it does not know, arguments it does not
  take): allowed with a warning on stderr (never a crash taken for a decision), unless
  ``PROJEKTOR_STRICT=1``: then refused, the CLI's way.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Any

from projektor_agent import config, gitops, harnesses, hook_install
from projektor_agent.client import Client
from projektor_agent.errors import OK, CommandError, Refused, Unreachable, UsageError
from projektor_agent.harnesses import Edit, Harness

RUNNER_DIR = ".projektor"
TRUE_WORDS = ("1", "true", "yes", "on")
# A verdict: None, the edit goes ahead; else the sentence that refuses it.


def main(args: argparse.Namespace) -> int:
    action, extra = args.action or "", list(getattr(args, "target", None) or [])
    if action in ("install", "uninstall"):
        return hook_install.main(action, extra)  # a person's command: usage errors exit 2
    harness = harnesses.HARNESSES.get(action)
    if harness is None or extra:
        return bad_command_line(harness, action, extra)
    return answer(harness, sys.stdin.buffer.read().decode("utf-8-sig", errors="replace"))


def bad_command_line(harness: Harness | None, action: str, extra: list[str]) -> int:
    """The CLI's configuration names no harness this command knows, or passes it
    arguments: the hook's own error, never a refusal (exit 2 is one for Claude Code,
    Codex and Gemini CLI). A warning, exit 0, nothing on stdout; under
    ``PROJEKTOR_STRICT=1`` a refusal the harness's way, or a usage error (exit 2) when
    the harness is unknown."""
    if harness is None:
        named = f"no agent CLI named {action!r}" if action else "no agent CLI named"
        why = f"{named} (`projektor hook {'|'.join(harnesses.NAMES)}`)"
    else:
        why = (
            f"`projektor hook {harness.name}` takes no arguments (its input: stdin), "
            f"given {' '.join(extra)}"
        )
    drain_stdin()  # the CLI may still be writing its payload
    strict = os.environ.get("PROJEKTOR_STRICT", "").strip().lower() in TRUE_WORDS
    if strict and harness is None:
        raise UsageError(f"{why}; the edit is blocked (PROJEKTOR_STRICT=1).")
    verdict = fail_open(why, strict)
    if verdict is None or harness is None:
        return OK
    try:
        return harness.block(verdict)
    except OSError:
        return OK


def drain_stdin() -> None:
    """The payload read and dropped, so that the CLI never fails writing it; nothing
    when a person runs the command at a terminal."""
    with contextlib.suppress(OSError, ValueError):
        if not sys.stdin.isatty():
            sys.stdin.buffer.read()


# --- the decision ------------------------------------------------------------------------


def answer(harness: Harness, raw: str) -> int:
    """The verdict on the payload ``raw``, said the way ``harness``'s CLI reads it."""
    strict = os.environ.get("PROJEKTOR_STRICT", "").strip().lower() in TRUE_WORDS
    try:
        verdict = decide(harness, raw)
    except Unreachable as error:
        verdict = fail_open(f"cannot reach the server ({error.message})", strict)
    except Exception as error:  # noqa: BLE001 - never a traceback passed off as a decision
        verdict = fail_open(f"the hook failed: {type(error).__name__}: {error}", strict)
    if verdict is None:
        return OK
    try:
        return harness.block(verdict)
    except OSError:  # the CLI stopped reading: nobody to tell
        return OK


def fail_open(why: str, strict: bool) -> str | None:
    if strict:
        return f"{why}; the edit is blocked (PROJEKTOR_STRICT=1)."
    harnesses.tell(f"warning: {why}; the edit goes ahead unclaimed.")
    return None


def decide(harness: Harness, raw: str) -> str | None:
    session = os.environ.get("PROJEKTOR_SESSION", "").strip()
    if not session:
        return None  # not under a runner: nothing to keep
    edit = harness.read(harnesses.loads(raw))
    if edit is None:
        return None  # a tool that edits nothing, or a payload this CLI never sends
    if edit.progress:
        return progress(client(), int(session), edit.tool)
    root = worktree_root(edit.base)
    paths = claimable(edit, root) if root is not None else []
    if not paths:
        return None  # outside the worktree (or the runner's own files): allowed, not claimed
    assert root is not None
    return claim_on_fresh_base(client(), int(session), paths, root)


def client() -> Client:
    return Client(config.load(), backoff=(0.5,))


def claimable(edit: Edit, root: Path) -> list[str]:
    """The edit's files inside the worktree, relative to its root (the runner's own
    .projektor/ left out), once each."""
    found: list[str] = []
    for raw in edit.paths:
        path = Path(raw).expanduser()
        relative = inside(path if path.is_absolute() else edit.base / path, root)
        if relative and relative.split("/")[0] != RUNNER_DIR and relative not in found:
            found.append(relative)
    return found


def claim_on_fresh_base(client: Client, session: int, paths: list[str], root: Path) -> str | None:
    """The claim, then, when the default branch changed some of ``paths`` since the
    branch point, the branch rebased onto it (``PROJEKTOR_BASE``, set by the runner in
    its worktrees): the claim first, so that nobody edits them meanwhile, and what the
    default branch changed read after it, when that is final (another issue's work on
    them lands before it lets them go). A rebase that cannot be made clean is undone and
    the claims taken just now released."""
    base = os.environ.get("PROJEKTOR_BASE", "").strip()
    if not base:
        return claim(client, session, paths)
    # Which of them the issue held before, for a refusal to give back only the others:
    # asked only when the branch is stale already (a path that turns stale during the
    # claim was another issue's until then, so it is taken now).
    stale_before = gitops.changed_upstream(root, base) & set(paths)
    held_before = [path for path in paths if holds(client, path)] if stale_before else None
    verdict = claim(client, session, paths)
    if verdict is not None:
        return verdict
    stale, conflicts = gitops.freshen(root, base, paths)
    if conflicts is None:
        return None
    if held_before is None:
        taken_now = stale  # another issue's until the claim: taken now
    else:
        taken_now = [path for path in paths if path not in held_before]
    if taken_now:
        issue = int(os.environ["PROJEKTOR_ISSUE"])
        body = {"issue": issue, "paths": taken_now, "session": session}
        client.post("/file-claims/release/", body)
    return (
        f"{', '.join(stale)} changed on {base.rsplit('/', 1)[-1]} since your branch started, "
        f"and your branch cannot be rebased onto it cleanly (conflicts in {', '.join(conflicts)}); "
        f"nothing was changed and {'the file is' if len(paths) == 1 else 'its files are'} not "
        "claimed. Commit or revert your conflicting work first, or choose another file."
    )


def holds(client: Client, path: str) -> bool:
    """Whether the issue holds ``path`` already (claimed before, not just now)."""
    query = {"issue": os.environ["PROJEKTOR_ISSUE"], "active": "true", "path": path}
    return bool(client.get("/file-claims/", query).get("count"))


def worktree_root(base: Path) -> Path | None:
    given = os.environ.get("PROJEKTOR_WORKTREE")
    if given:
        return Path(given)
    return gitops.toplevel(base) if base.is_dir() else None


def inside(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root`` (symlinks resolved), or None when outside it."""
    resolved, top = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    try:
        relative = resolved.relative_to(top)
    except ValueError:
        return None
    text = relative.as_posix()
    return None if text in ("", ".") else text


def claim(client: Client, session: int, paths: list[str]) -> str | None:
    issue = int(os.environ["PROJEKTOR_ISSUE"])
    body: dict[str, Any] = {"issue": issue, "paths": paths, "session": session}
    fence = os.environ.get("PROJEKTOR_FENCE", "")
    if fence.isdigit():
        body["fence"] = int(fence)
    try:
        client.post("/file-claims/", body)
        return None
    except Refused as refused:
        if refused.code != "session_not_live":
            return refusal(refused, issue, paths)
    # Paused past the TTL (a long tool call): one heartbeat, and the claim again.
    try:
        client.post(f"/sessions/{session}/heartbeat/", idempotent=True)
        client.post("/file-claims/", body)
        return None
    except Refused as refused:  # session_ended (409) among them: the work is over
        return refusal(refused, issue, paths)


def refusal(refused: Refused, issue: int, paths: list[str]) -> str:
    if refused.code == "file_conflict":
        body = refused.body if isinstance(refused.body, dict) else {}
        holders = [c for c in body.get("conflicts") or [] if isinstance(c, dict)]
        holder = holders[0] if holders else {}
        path = str(holder.get("path") or paths[0])
        agent = holder.get("agent")
        state = "live" if holder.get("session") else "held without a session"
        held = holder.get("held_path") or path
        by_dir = f" through its claim of {held}" if held != path else ""
        sentence = (
            f"{path} is claimed by issue {holder.get('issue')} (agent {agent or 'none'}, "
            f"{state}){by_dir}"
        )
        others = len({c.get("path") for c in holders} - {path})
        if others:
            sentence += f", and {others} more of the files this edit changes are held"
        if len(paths) > 1:
            sentence += f"; none of its {len(paths)} files was claimed"
        sentence += "; choose another file"
        if agent:
            sentence += f", or message them with `projektor message agent:{agent} …`"
        return sentence + "."
    if refused.code in ("stale_fence", "session_not_live", "lease_not_held", "session_ended"):
        return over(issue, f"the server says {refused.code}: {refused.message}")
    return f"{', '.join(paths)} could not be claimed for issue {issue}: {refused.message}"


def over(issue: int, why: str) -> str:
    return (
        f"your work on issue {issue} is over ({why}): another session owns it now. "
        "Stop editing and end your turn."
    )


def progress(client: Client, session: int, tool: str) -> str | None:
    """Tool use is progress, where the server counts it; never blocks anything."""
    # No progress endpoint on this server, or the server away: progress is a signal only.
    with contextlib.suppress(CommandError):
        client.post(
            f"/sessions/{session}/progress/", {"note": f"used {tool}"[:500]}, idempotent=True
        )
    return None
