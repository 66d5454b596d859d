"""The agent CLIs' edit-time hooks, each in its own words (docs/agents.md, "Every agent
CLI's edit-time hook").

One adapter per CLI: ``read`` turns its payload (the JSON on the hook's stdin) into an
``Edit``, the files a tool call is about to change and the directory relative ones are
relative to, or None when the call edits nothing (or the payload is not one it knows);
``block`` says a refusal the way that CLI reads it and returns the hook's exit status.
What the edit may do (claim, fresh base, the sentence) is the core's (``hook``).

    CLI          event         edit tools                       how a refusal is said
    claude-code  PreToolUse    Edit Write MultiEdit NotebookEdit exit 2, stderr
    codex        PreToolUse    apply_patch; Bash running one     exit 2, stderr, stdout empty
    gemini       BeforeTool    write_file replace                exit 2, stderr, stdout empty
    cursor       preToolUse    Write StrReplace Delete …         {"permission": "deny", …}
    copilot      preToolUse    edit create apply_patch …         {"permissionDecision": "deny", …}

An allowed edit prints nothing and exits 0, in every CLI.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from projektor_agent.errors import OK, UsageError

BLOCK = 2  # exit 2: a refusal, for the CLIs that read the exit status
PROG = "projektor hook"
Payload = dict[str, object]  # a JSON object, as json.loads gives it
# The files of a Codex-style patch: added, updated, moved to, deleted.
PATCH_FILE = re.compile(
    r"^\*\*\* (?:Add File|Update File|Move to|Delete File): (.+?)[ \t\r]*$", re.MULTILINE
)
# A shell command that runs apply_patch (Codex applies its patch itself), and the
# directory a leading ``cd DIR &&`` moves it to.
RUNS_APPLY_PATCH = re.compile(r"(?:^|[\s;&|(])(?:apply_patch|applypatch)\b")
CD_FIRST = re.compile(r"""^\s*cd\s+('[^']*'|"[^"]*"|[^\s;&|'"]+)\s*&&""")
PATH_KEYS = ("file_path", "path", "filePath", "notebook_path", "target_file")
CLAUDE_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
GEMINI_TOOLS = ("write_file", "replace")
CURSOR_TOOLS = ("Write", "StrReplace", "Delete", "ApplyPatch", "Edit", "MultiEdit", "EditNotebook")
COPILOT_TOOLS = ("edit", "create", "apply_patch", "str_replace_editor")


@dataclass(frozen=True)
class Edit:
    """What a tool call is about to change: ``paths`` as the payload names them,
    relative ones against ``base``; ``progress``: a call that already happened
    (reported as progress, claims nothing)."""

    paths: list[str]
    base: Path
    progress: bool = False
    tool: str = ""


@dataclass(frozen=True)
class Harness:
    name: str
    label: str  # as people call the CLI
    command: str  # the CLI's command, for ``--hooks auto``
    read: Callable[[Payload], Edit | None]
    block: Callable[[str], int]  # says a refusal the CLI's way; the hook's exit status


# --- the payload -------------------------------------------------------------------------


def loads(raw: str) -> Payload:
    """The payload: a JSON object (a leading UTF-8 byte order mark, as Cursor may send,
    skipped); any other JSON value is no payload any CLI sends: an empty one. Not JSON
    at all: ValueError."""
    payload = json.loads(raw.lstrip("\ufeff").strip())
    return payload if isinstance(payload, dict) else {}


def text(value: object) -> str:
    return value if isinstance(value, str) else ""


def mapping(value: object) -> Payload:
    return value if isinstance(value, dict) else {}


def patch_paths(patch: str) -> list[str]:
    """Every file a Codex-style patch touches (``*** Add File:``, ``*** Update File:``
    and its ``*** Move to:``, ``*** Delete File:``), once each, in order."""
    return unique(match.group(1).strip() for match in PATCH_FILE.finditer(patch))


def unique(paths: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for path in paths:
        if path and path not in seen:
            seen.append(path)
    return seen


def named_paths(arguments: Payload) -> list[str]:
    """The files a tool's arguments name: a path argument, or a patch's files."""
    found = [text(arguments.get(key)) for key in PATH_KEYS]
    for value in arguments.values():
        if isinstance(value, str) and PATCH_FILE.search(value):
            found += patch_paths(value)
    return unique(found)


def arguments_of(value: object) -> Payload:
    """Tool arguments given as an object, as a JSON string of one (Copilot's
    ``toolArgs``), or as the bare patch text."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"input": value}
        return mapping(parsed) if not isinstance(parsed, str) else {"input": parsed}
    return mapping(value)


def base_of(*candidates: object) -> Path:
    """The first non-empty directory named, else the hook's own working directory."""
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            return Path(candidate)
    return Path(os.getcwd())


# --- the adapters: payload to edit ---------------------------------------------------------


def read_claude_code(payload: Payload) -> Edit | None:
    event, tool = payload.get("hook_event_name"), text(payload.get("tool_name"))
    base = base_of(payload.get("cwd"))
    if event == "PostToolUse":
        return Edit([], base, progress=True, tool=tool or "a tool")
    if event != "PreToolUse" or tool not in CLAUDE_TOOLS:
        return None
    arguments = mapping(payload.get("tool_input"))
    paths = unique([text(arguments.get("file_path")) or text(arguments.get("notebook_path"))])
    return Edit(paths, base, tool=tool) if paths else None


def read_codex(payload: Payload) -> Edit | None:
    """``apply_patch``, its patch in ``tool_input.command``; or ``Bash`` (Codex's name
    for every shell tool in hooks) whose command runs apply_patch with a patch, which
    Codex intercepts and applies itself: the patch's files, relative ones against the
    ``cd DIR &&`` before it, the shell's ``workdir`` (``write_stdin``) or ``cwd``."""
    if payload.get("hook_event_name") != "PreToolUse":
        return None
    tool = text(payload.get("tool_name"))
    arguments = mapping(payload.get("tool_input"))
    command = arguments.get("command")
    if isinstance(command, list):
        command = "\n".join(part for part in command if isinstance(part, str))
    patch = text(command)
    base = base_of(payload.get("cwd"))
    if tool == "Bash":
        if "*** Begin Patch" not in patch or not RUNS_APPLY_PATCH.search(patch):
            return None
        base = base / text(arguments.get("workdir"))  # an absolute workdir replaces it
        moved = CD_FIRST.match(patch)
        if moved:
            base = base / Path(moved.group(1).strip("'\"")).expanduser()
    elif tool != "apply_patch":
        return None
    paths = patch_paths(patch)
    return Edit(paths, base, tool=tool) if paths else None


def read_gemini(payload: Payload) -> Edit | None:
    tool = text(payload.get("tool_name"))
    if payload.get("hook_event_name") != "BeforeTool" or tool not in GEMINI_TOOLS:
        return None
    paths = unique([text(mapping(payload.get("tool_input")).get("file_path"))])
    return Edit(paths, base_of(payload.get("cwd")), tool=tool) if paths else None


def read_cursor(payload: Payload) -> Edit | None:
    """``file_path`` or ``path``, or a patch's files; ``cwd`` may be empty: the first
    workspace root then."""
    tool = text(payload.get("tool_name"))
    if payload.get("hook_event_name") != "preToolUse" or tool not in CURSOR_TOOLS:
        return None
    arguments = arguments_of(payload.get("tool_input"))
    roots = payload.get("workspace_roots")
    first_root = roots[0] if isinstance(roots, list) and roots else None
    base = base_of(payload.get("cwd"), arguments.get("working_directory"), first_root)
    paths = named_paths(arguments)
    return Edit(paths, base, tool=tool) if paths else None


def read_copilot(payload: Payload) -> Edit | None:
    """``toolName`` and ``toolArgs``, a JSON string parsed again (an object in some
    releases): the camelCase payload of the ``preToolUse`` event installed."""
    if "toolName" not in payload:
        return None
    tool, arguments = text(payload.get("toolName")), arguments_of(payload.get("toolArgs"))
    if tool not in COPILOT_TOOLS or text(arguments.get("command")) == "view":
        return None
    paths = named_paths(arguments)
    return Edit(paths, base_of(payload.get("cwd")), tool=tool) if paths else None


# --- the adapters: a refusal, said -------------------------------------------------------


def block_by_exit_status(sentence: str) -> int:
    """Claude Code, Codex, Gemini CLI: exit 2, the reason on stderr (which the model
    reads), nothing on stdout (Codex takes a JSON key it does not know for a failed hook,
    and lets the tool run)."""
    tell(sentence)
    return BLOCK


def block_cursor(sentence: str) -> int:
    say_json({"permission": "deny", "user_message": sentence, "agent_message": sentence})
    return OK


def block_copilot(sentence: str) -> int:
    say_json({"permissionDecision": "deny", "permissionDecisionReason": sentence})
    return OK


def tell(sentence: str) -> None:
    print(f"{PROG}: {sentence}", file=sys.stderr, flush=True)


def say_json(answer: Payload) -> None:
    print(json.dumps(answer), flush=True)


HARNESSES: dict[str, Harness] = {
    harness.name: harness
    for harness in (
        Harness("claude-code", "Claude Code", "claude", read_claude_code, block_by_exit_status),
        Harness("codex", "Codex CLI", "codex", read_codex, block_by_exit_status),
        Harness("gemini", "Gemini CLI", "gemini", read_gemini, block_by_exit_status),
        Harness("cursor", "Cursor", "cursor-agent", read_cursor, block_cursor),
        Harness("copilot", "Copilot CLI", "copilot", read_copilot, block_copilot),
    )
}
NAMES = tuple(HARNESSES)
WRAPPERS = ("env", "npx", "bunx", "pnpx", "uvx", "exec", "nohup")


def named(name: str) -> Harness:
    harness = HARNESSES.get(name)
    if harness is None:
        raise UsageError(f"no agent CLI named {name!r}: give one of {', '.join(NAMES)}")
    return harness


def chosen(option: str | None, command: list[str]) -> tuple[str, ...]:
    """``--hooks``: harness names, comma-separated, or ``auto`` (the CLI the agent
    command runs: ``claude``, ``codex``, ``gemini``, ``cursor-agent``, ``copilot``)."""
    if not option:
        return ()
    names: list[str] = []
    for word in (part.strip() for part in option.split(",")):
        if word == "auto":
            found = cli_of(command)
            if found is None:
                raise UsageError(
                    "--hooks auto: the agent command runs none of "
                    f"{', '.join(h.command for h in HARNESSES.values())}; name the CLI "
                    f"(--hooks {'|'.join(NAMES)})"
                )
            word = found
        if word and named(word).name not in names:
            names.append(word)
    return tuple(names)


def cli_of(command: list[str]) -> str | None:
    """The harness whose CLI ``command`` runs: its program, past ``env VAR=…`` and
    runners such as ``npx``."""
    words = [word for word in command if word != "--"]
    for word in words:
        if "=" in word or word.startswith("-"):
            continue
        program = Path(word).name
        for harness in HARNESSES.values():
            if program == harness.command:
                return harness.name
        if program not in WRAPPERS:
            return None
    return None
