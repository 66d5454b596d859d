"""``projektor hook claude-code``: claims at edit time, and ``hook install claude-code``.

Claude Code runs a hook on its tool calls with a JSON payload on stdin
(``hook_event_name``, ``tool_name``, ``tool_input``, ``cwd``…); a ``PreToolUse`` hook
that exits 2 blocks the call, and its stderr is shown to the model.

- ``PreToolUse`` on Edit, Write, MultiEdit or NotebookEdit: the file, relative to the
  worktree's root, is claimed for ``PROJEKTOR_ISSUE`` in ``PROJEKTOR_SESSION``. Held by
  another issue: exit 2 with a sentence the model can act on. Outside the worktree:
  allowed, not claimed. ``session_not_live``: one heartbeat, then the claim again.
- Fresh base: in a runner's worktree (``PROJEKTOR_BASE``), a claimed file that the
  default branch changed since the branch point is brought up to date first (the
  branch rebased, uncommitted work carried across); a rebase that cannot be made clean
  is undone, the claim released, and the edit blocked with a sentence saying so.
- ``PostToolUse``: progress, where the server counts it (``/sessions/{id}/progress/``).
- Outside a runner (no ``PROJEKTOR_SESSION``): exit 0, nothing done. The server
  unreachable, or the hook itself failing: allowed with a warning, unless
  ``PROJEKTOR_STRICT=1`` (then exit 2).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from projektor_agent import config, gitops
from projektor_agent.client import Client
from projektor_agent.errors import OK, CommandError, Refused, Unreachable, UsageError

EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
BLOCK = 2  # Claude Code: exit 2 blocks the tool call and shows stderr to the model
PROG = "projektor hook"
SETTINGS = Path(".claude") / "settings.local.json"
OWN_MARK = "hook claude-code"  # how an entry of ours is recognised when merging
RUNNER_DIR = ".projektor"
TRUE_WORDS = ("1", "true", "yes", "on")


def main(args: argparse.Namespace) -> int:
    if args.action == "claude-code":
        if args.target:
            raise UsageError("`projektor hook claude-code` takes no arguments (its input: stdin)")
        return claude_code(sys.stdin.read())
    if not args.target or args.target[0] != "claude-code" or len(args.target) > 2:
        raise UsageError("usage: projektor hook install claude-code [DIR]")
    directory = Path(args.target[1]) if len(args.target) == 2 else Path.cwd()
    settings = install_claude_code(directory)
    print(f"Claude Code hooks in {settings}")
    return OK


# --- the decision ------------------------------------------------------------------------


def claude_code(raw: str) -> int:
    strict = os.environ.get("PROJEKTOR_STRICT", "").strip().lower() in TRUE_WORDS
    try:
        return decide(raw, strict)
    except Unreachable as error:
        return fail_open(f"cannot reach the server ({error.message})", strict)
    except Exception as error:  # noqa: BLE001 - never a traceback passed off as a decision
        return fail_open(f"the hook failed: {type(error).__name__}: {error}", strict)


def fail_open(why: str, strict: bool) -> int:
    if strict:
        tell(f"{why}; the edit is blocked (PROJEKTOR_STRICT=1).")
        return BLOCK
    tell(f"warning: {why}; the edit goes ahead unclaimed.")
    return OK


def tell(sentence: str) -> None:
    print(f"{PROG}: {sentence}", file=sys.stderr, flush=True)


def decide(raw: str, strict: bool) -> int:
    session = os.environ.get("PROJEKTOR_SESSION", "").strip()
    if not session:
        return OK  # not under a runner: nothing to keep
    payload = json.loads(raw)
    if not isinstance(payload, dict):
        raise ValueError("the hook's input is not a JSON object")
    event = payload.get("hook_event_name")
    client = Client(config.load(), backoff=(0.5,))
    if event == "PostToolUse":
        return progress(client, int(session), str(payload.get("tool_name") or "a tool"))
    if event != "PreToolUse" or payload.get("tool_name") not in EDIT_TOOLS:
        return OK
    path = edited_path(payload)
    root = worktree_root(payload)
    relative = inside(path, root) if path and root else None
    if relative is None or relative.split("/")[0] == RUNNER_DIR:
        return OK  # outside the worktree (or the runner's own files): allowed, not claimed
    assert root is not None
    return claim_on_fresh_base(client, int(session), relative, root)


def claim_on_fresh_base(client: Client, session: int, path: str, root: Path) -> int:
    """The claim, then, when the default branch changed ``path`` since the branch
    point, the branch rebased onto it (``PROJEKTOR_BASE``, set by the runner in its
    worktrees): the claim first, so that nobody edits the file meanwhile. A rebase
    that cannot be made clean is undone and a claim taken just now released."""
    base = os.environ.get("PROJEKTOR_BASE", "").strip()
    stale = bool(base) and path in gitops.changed_upstream(root, base)
    held_before = stale and holds(client, path)
    decision = claim(client, session, path)
    if decision != OK or not stale:
        return decision
    _, conflicts = gitops.freshen(root, base, [path])
    if conflicts is None:
        return OK
    if not held_before:
        issue = int(os.environ["PROJEKTOR_ISSUE"])
        body = {"issue": issue, "paths": [path], "session": session}
        client.post("/file-claims/release/", body)
    tell(
        f"{path} changed on {base.rsplit('/', 1)[-1]} since your branch started, and your "
        f"branch cannot be rebased onto it cleanly (conflicts in {', '.join(conflicts)}); "
        "nothing was changed and the file is not claimed. Commit or revert your conflicting "
        "work first, or choose another file."
    )
    return BLOCK


def holds(client: Client, path: str) -> bool:
    """Whether the issue holds ``path`` already (claimed before, not just now)."""
    query = {"issue": os.environ["PROJEKTOR_ISSUE"], "active": "true", "path": path}
    return bool(client.get("/file-claims/", query).get("count"))


def edited_path(payload: dict[str, Any]) -> Path | None:
    tool_input = payload.get("tool_input") or {}
    raw = tool_input.get("file_path") or tool_input.get("notebook_path")
    if not raw:
        return None
    path = Path(str(raw)).expanduser()
    if not path.is_absolute():
        path = Path(str(payload.get("cwd") or os.getcwd())) / path
    return path


def worktree_root(payload: dict[str, Any]) -> Path | None:
    given = os.environ.get("PROJEKTOR_WORKTREE")
    if given:
        return Path(given)
    return gitops.toplevel(str(payload.get("cwd") or os.getcwd()))


def inside(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root`` (symlinks resolved), or None when outside it."""
    resolved, top = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    try:
        relative = resolved.relative_to(top)
    except ValueError:
        return None
    text = relative.as_posix()
    return None if text in ("", ".") else text


def claim(client: Client, session: int, path: str) -> int:
    issue = int(os.environ["PROJEKTOR_ISSUE"])
    body: dict[str, Any] = {"issue": issue, "paths": [path], "session": session}
    fence = os.environ.get("PROJEKTOR_FENCE", "")
    if fence.isdigit():
        body["fence"] = int(fence)
    try:
        client.post("/file-claims/", body)
        return OK
    except Refused as refused:
        if refused.code != "session_not_live":
            return refusal(refused, issue, path)
    # Paused past the TTL (a long tool call): one heartbeat, and the claim again.
    try:
        client.post(f"/sessions/{session}/heartbeat/", idempotent=True)
        client.post("/file-claims/", body)
        return OK
    except Refused as refused:  # session_ended (409) among them: the work is over
        return refusal(refused, issue, path)


def refusal(refused: Refused, issue: int, path: str) -> int:
    if refused.code == "file_conflict":
        body = refused.body if isinstance(refused.body, dict) else {}
        holders = [c for c in body.get("conflicts") or [] if isinstance(c, dict)]
        holder = holders[0] if holders else {}
        agent = holder.get("agent")
        state = "live" if holder.get("session") else "held without a session"
        held = holder.get("held_path") or path
        by_dir = f" through its claim of {held}" if held != path else ""
        sentence = (
            f"{path} is claimed by issue {holder.get('issue')} (agent {agent or 'none'}, "
            f"{state}){by_dir}; choose another file"
        )
        if agent:
            sentence += f", or message them with `projektor message agent:{agent} …`"
        tell(sentence + ".")
        return BLOCK
    if refused.code in ("stale_fence", "session_not_live", "lease_not_held", "session_ended"):
        return over(issue, f"the server says {refused.code}: {refused.message}")
    tell(f"{path} could not be claimed for issue {issue}: {refused.message}")
    return BLOCK


def over(issue: int, why: str) -> int:
    tell(
        f"your work on issue {issue} is over ({why}): another session owns it now. "
        "Stop editing and end your turn."
    )
    return BLOCK


def progress(client: Client, session: int, tool: str) -> int:
    """Tool use is progress, where the server counts it; never blocks anything."""
    # No progress endpoint on this server, or the server away: progress is a signal only.
    with contextlib.suppress(CommandError):
        client.post(
            f"/sessions/{session}/progress/", {"note": f"used {tool}"[:500]}, idempotent=True
        )
    return OK


# --- install -----------------------------------------------------------------------------


def command_line() -> str:
    """How Claude Code should call this very command (it may not be on its PATH)."""
    program = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    if program is None or program.name == "__main__.py" or not program.exists():
        return f"{shlex.quote(sys.executable)} -m projektor_agent hook claude-code"
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(program))} hook claude-code"


def install_claude_code(directory: Path) -> Path:
    """Merge the hook entries into ``directory``'s .claude/settings.local.json: entries
    of others kept, ours replaced in place (never duplicated)."""
    target = directory / SETTINGS
    settings: dict[str, Any] = {}
    if target.exists():
        try:
            loaded = json.loads(target.read_text(encoding="utf-8") or "{}")
        except ValueError as error:
            raise UsageError(f"{target} is not valid JSON ({error}): fix it first") from None
        if not isinstance(loaded, dict):
            raise UsageError(f"{target} is not a JSON object: fix it first")
        settings = loaded
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError(f'{target}: "hooks" is not an object: fix it first')
    ours = {"type": "command", "command": command_line()}
    merge(hooks, "PreToolUse", "|".join(EDIT_TOOLS), ours)
    merge(hooks, "PostToolUse", "*", ours)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    if gitops.toplevel(directory) is not None:
        gitops.exclude(directory, "/" + SETTINGS.as_posix())
    return target


def merge(hooks: dict[str, Any], event: str, matcher: str, ours: dict[str, str]) -> None:
    groups = hooks.setdefault(event, [])
    if not isinstance(groups, list):
        raise UsageError(f"hooks.{event} is not a list: fix it first")
    for group in groups:
        entries = group.get("hooks") if isinstance(group, dict) else None
        if isinstance(entries, list):
            kept = [e for e in entries if OWN_MARK not in str((e or {}).get("command", ""))]
            group["hooks"] = kept
    groups[:] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
    groups.append({"matcher": matcher, "hooks": [ours]})
