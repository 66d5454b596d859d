"""``projektor hook install|uninstall HARNESS [DIR]``: the hook's entry in that CLI's own
configuration file, merged in (what is there kept, ours never twice) and taken out again
(only ours).

    claude-code  .claude/settings.local.json   PreToolUse (edit tools), PostToolUse (any)
    codex        .codex/hooks.json             PreToolUse on apply_patch|Bash, timeout in seconds
    gemini       .gemini/settings.json         hooks.BeforeTool on write_file|replace, in ms
    cursor       .cursor/hooks.json            {"version": 1, "hooks": {"preToolUse": […]}}
    copilot      .github/hooks/projektor.json  {"version": 1, "hooks": {"preToolUse": […]}}

The file is kept out of the work: an untracked one through the repository's
``info/exclude``, a tracked one (a team's own settings) marked ``skip-worktree`` until
the entry is taken out again, when it is given back as it was.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from projektor_agent import gitops
from projektor_agent.errors import OK, UsageError
from projektor_agent.harnesses import CLAUDE_TOOLS, CURSOR_TOOLS, GEMINI_TOOLS, NAMES, named

Payload = dict[str, object]
COMMAND = "{command}"  # where an entry's template takes the hook's command line
TIMEOUT_SECONDS = 60  # a claim, and maybe a rebase onto the default branch


@dataclass(frozen=True)
class Target:
    """Where and how one CLI is told to run the hook: its file, the events (with a
    matcher for the CLIs that group entries under one), the entry, the file's skeleton,
    and what the user must do before the CLI runs it."""

    harness: str
    file: str
    events: tuple[tuple[str, str | None], ...]
    entry: Payload
    grouped: bool = True  # {"matcher", "hooks": [entry]} groups; else entries in the list
    skeleton: tuple[tuple[str, object], ...] = ()
    note: str = ""


TARGETS: dict[str, Target] = {
    target.harness: target
    for target in (
        Target(
            "claude-code",
            ".claude/settings.local.json",
            (("PreToolUse", "|".join(CLAUDE_TOOLS)), ("PostToolUse", "*")),
            {"type": "command", "command": COMMAND},
        ),
        Target(
            "codex",
            ".codex/hooks.json",
            (("PreToolUse", "apply_patch|Bash"),),  # Bash: a patch through the shell
            {"type": "command", "command": COMMAND, "timeout": TIMEOUT_SECONDS},
            note="Codex runs a new or changed hook only once you trust it: review it with "
            "/hooks in the CLI (unattended: `codex exec --dangerously-bypass-hook-trust …`); "
            "it reads .codex/ only in a project it trusts.",
        ),
        Target(
            "gemini",
            ".gemini/settings.json",
            (("BeforeTool", "|".join(GEMINI_TOOLS)),),
            {
                "name": "projektor",
                "type": "command",
                "command": COMMAND,
                "timeout": TIMEOUT_SECONDS * 1000,
            },
            note="Gemini CLI reads .gemini/settings.json, and so runs this hook, only in a "
            "folder trusted when it starts: trust it, or its parent, once (trustedFolders.json), "
            "or start it with GEMINI_CLI_TRUST_WORKSPACE=true in its environment "
            "(`env GEMINI_CLI_TRUST_WORKSPACE=true gemini …`); --skip-trust alone lets it run "
            "but not read the folder's settings. It warns once of a new or changed project hook.",
        ),
        Target(
            "cursor",
            ".cursor/hooks.json",
            (("preToolUse", None),),
            {"command": COMMAND, "matcher": "|".join(CURSOR_TOOLS), "timeout": TIMEOUT_SECONDS},
            grouped=False,
            skeleton=(("version", 1),),
        ),
        Target(
            "copilot",
            ".github/hooks/projektor.json",
            (("preToolUse", None),),
            {"type": "command", "bash": COMMAND, "timeoutSec": TIMEOUT_SECONDS},
            grouped=False,
            skeleton=(("version", 1),),
        ),
    )
}


@dataclass(frozen=True)
class Installed:
    path: Path
    added: bool  # the entry was not there before: uninstall takes it out again


def main(action: str, words: list[str]) -> int:
    if not words or words[0] not in NAMES or len(words) > 2:
        raise UsageError(f"usage: projektor hook {action} {'|'.join(NAMES)} [DIR]")
    harness = named(words[0])
    directory = Path(words[1]) if len(words) == 2 else Path.cwd()
    if action == "install":
        installed = install(harness.name, directory)
        print(f"{harness.label} hooks in {installed.path}")
        if TARGETS[harness.name].note:
            print(TARGETS[harness.name].note)
        return OK
    removed = uninstall(harness.name, directory)
    print(
        f"{harness.label} hooks {'removed from ' if removed else 'of projektor: none in '}"
        f"{removed or directory / TARGETS[harness.name].file}"
    )
    return OK


def command_line(harness: str) -> str:
    """How the CLI should call this very command (it may not be on its PATH)."""
    program = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    if program is None or program.name == "__main__.py" or not program.exists():
        return f"{shlex.quote(sys.executable)} -m projektor_agent hook {harness}"
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(program))} hook {harness}"


def install(harness: str, directory: Path) -> Installed:
    target = TARGETS[harness]
    path = directory / target.file
    config = load(path) if path.exists() else dict(target.skeleton)
    added = not strip(config, target)
    add(config, target, command_line(harness))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    keep_out_of_the_work(directory, path)
    return Installed(path, added)


def uninstall(harness: str, directory: Path) -> Path | None:
    """Our entry taken out of ``harness``'s file in ``directory``; the file itself
    removed when nothing else is left in it (or given back as git has it). None when
    there was nothing of ours."""
    target = TARGETS[harness]
    path = directory / target.file
    if not path.exists():
        return None
    config = load(path)
    if not strip(config, target):
        return None
    tracked = tracked_path(directory, path)
    if tracked is not None:
        top, relative = tracked
        gitops.git("update-index", "--no-skip-worktree", "--", relative, cwd=top)
        if config == committed(top, relative):
            gitops.git("checkout", "--", relative, cwd=top)  # byte for byte as it was
            return path
    if tracked is None and bare(config, target):
        path.unlink()
        for parent in path.relative_to(directory).parents:
            with_parent = directory / parent
            if parent == Path(".") or any(with_parent.iterdir()):
                break
            with_parent.rmdir()
    else:
        path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return path


# --- the file ------------------------------------------------------------------------------


def load(path: Path) -> Payload:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8-sig") or "{}")
    except ValueError as error:
        raise UsageError(
            f"{path} is not valid JSON ({error}): fix it first (comments cannot be kept)"
        ) from None
    if not isinstance(loaded, dict):
        raise UsageError(f"{path} is not a JSON object: fix it first")
    return loaded


def ours(entry: object, harness: str) -> bool:
    if not isinstance(entry, dict):
        return False
    command = entry.get("command") or entry.get("bash") or ""
    return f"hook {harness}" in str(command)


def event_lists(config: Payload, target: Target, create: bool) -> dict[str, list[object]]:
    hooks = config.setdefault("hooks", {}) if create else config.get("hooks")
    if hooks is None:
        return {}
    if not isinstance(hooks, dict):
        raise UsageError(f'{target.file}: "hooks" is not an object: fix it first')
    found: dict[str, list[object]] = {}
    for event, _ in target.events:
        entries = hooks.setdefault(event, []) if create else hooks.get(event)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise UsageError(f"{target.file}: hooks.{event} is not a list: fix it first")
        found[event] = entries
    return found


def strip(config: Payload, target: Target) -> bool:
    """Our entries out of ``config``, and the groups and lists they leave empty;
    whether there were any."""
    removed = False
    hooks = config.get("hooks")
    for event, entries in event_lists(config, target, create=False).items():
        kept = [item for item in (without_ours(i, target) for i in entries) if item is not None]
        if kept == entries:
            continue
        removed = True
        entries[:] = kept
        if not kept and isinstance(hooks, dict):
            del hooks[event]
    if removed and hooks == {} and not target.skeleton:
        del config["hooks"]
    return removed


def without_ours(item: object, target: Target) -> object:
    """``item`` of an event's list without our entry: None when nothing is left of it."""
    if not target.grouped:
        return None if ours(item, target.harness) else item
    inner = item.get("hooks") if isinstance(item, dict) else None
    if not isinstance(item, dict) or not isinstance(inner, list):
        return item
    kept = [entry for entry in inner if not ours(entry, target.harness)]
    if len(kept) == len(inner):
        return item
    return {**item, "hooks": kept} if kept else None


def add(config: Payload, target: Target, command: str) -> None:
    entry = {key: command if value == COMMAND else value for key, value in target.entry.items()}
    for event, entries in event_lists(config, target, create=True).items():
        matcher = dict(target.events)[event]
        entries.append({"matcher": matcher, "hooks": [entry]} if target.grouped else entry)
    for key, value in target.skeleton:
        config.setdefault(key, value)


def bare(config: Payload, target: Target) -> bool:
    """Nothing left but the file's skeleton."""
    skeleton = dict(target.skeleton)
    return all(
        (key in skeleton and value == skeleton[key]) or (key == "hooks" and value == {})
        for key, value in config.items()
    )


# --- git -------------------------------------------------------------------------------------


def tracked_path(directory: Path, path: Path) -> tuple[Path, str] | None:
    """(the work tree, ``path`` in it) when git tracks ``path``; else None."""
    top = gitops.toplevel(directory)
    if top is None:
        return None
    try:
        relative = path.resolve().relative_to(top.resolve()).as_posix()
    except ValueError:
        return None
    known = gitops.git("ls-files", "--error-unmatch", "--", relative, cwd=top, check=False)
    return (top, relative) if known.returncode == 0 else None


def committed(top: Path, relative: str) -> object:
    shown = gitops.git("show", f":{relative}", cwd=top, check=False)
    try:
        return json.loads(shown.stdout.lstrip("\ufeff") or "{}")
    except ValueError:
        return None


def keep_out_of_the_work(directory: Path, path: Path) -> None:
    """Never part of the agent's changes: excluded when untracked, ``skip-worktree``
    when tracked (git then leaves the local entry out of status, add and commit)."""
    top = gitops.toplevel(directory)
    if top is None:
        return
    tracked = tracked_path(directory, path)
    if tracked is not None:
        gitops.git("update-index", "--skip-worktree", "--", tracked[1], cwd=top)
        return
    try:
        relative = path.resolve().relative_to(top.resolve()).as_posix()
    except ValueError:
        return
    gitops.exclude(directory, "/" + relative)
