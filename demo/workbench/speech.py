"""How each agent CLI tells its hooks of an edit, for the scripted agent (``--harness``):
where the CLI finds the commands to run (its own file in the checkout, as ``projektor
run --hooks NAME`` writes it), the payload it sends on their stdin before an edit (and,
for Claude Code, after it), and how it reads a refusal.

    claude-code  .claude/settings.local.json  PreToolUse Edit, absolute path     exit 2
    codex        .codex/hooks.json            PreToolUse apply_patch, relative   exit 2
    gemini       .gemini/settings.json        BeforeTool replace, relative       exit 2
    cursor       .cursor/hooks.json           preToolUse StrReplace, a BOM, no cwd: "deny" JSON
    copilot      .github/hooks/*.json         preToolUse edit, toolArgs a string: "deny" JSON

Without the file, the hook itself (``python -m projektor_agent hook NAME``). Standard
library only, and nothing of the server.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HARNESSES = ("claude-code", "codex", "gemini", "cursor", "copilot")
PRE, POST = "PreToolUse", "PostToolUse"  # the agent's own words for before and after
FILES = {
    "claude-code": ".claude/settings.local.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
    "cursor": ".cursor/hooks.json",
    "copilot": ".github/hooks",  # every *.json in it
}
EVENTS = {"claude-code": "PreToolUse", "codex": "PreToolUse", "gemini": "BeforeTool"}
EVENTS.update(cursor="preToolUse", copilot="preToolUse")
TOOLS = {
    "claude-code": "Edit",
    "codex": "apply_patch",
    "gemini": "replace",
    "cursor": "StrReplace",
    "copilot": "edit",
}


def commands(root: Path, harness: str, event: str) -> list[str]:
    """The commands ``harness`` runs in ``root`` for ``event`` on its edit tool; without
    its file, the projektor hook itself. Only Claude Code is told after an edit."""
    if event == POST and harness != "claude-code":
        return []
    where = root / FILES[harness]
    if not where.exists():
        return [f"{sys.executable} -m projektor_agent hook {harness}"] if event == PRE else []
    files = sorted(where.glob("*.json")) if where.is_dir() else [where]
    name = EVENTS[harness] if event == PRE else POST
    found: list[str] = []
    for file in files:
        loaded = json.loads(file.read_text(encoding="utf-8-sig") or "{}")
        for item in (loaded.get("hooks") or {}).get(name) or []:
            entries = item.get("hooks") if "hooks" in item else [item]
            if matches(harness, str(item.get("matcher") or ""), TOOLS[harness]):
                found += [e.get("command") or e.get("bash") for e in entries or []]
    return [command for command in found if command]


def matches(harness: str, matcher: str, tool: str) -> bool:
    if matcher in ("", "*"):
        return True
    if harness == "claude-code":
        return re.fullmatch(matcher, tool) is not None
    return re.search(matcher, tool) is not None


def stdin(harness: str, event: str, root: Path, path: str, session: str) -> str:
    """What ``harness`` writes on its hook's stdin for an edit of ``path`` (relative to
    the checkout ``root``)."""
    absolute = str((root / path).resolve())
    if harness == "claude-code":
        payload: dict[str, Any] = {
            "session_id": session,
            "transcript_path": "",
            "cwd": str(root),
            "hook_event_name": event,
            "tool_name": "Edit",
            "tool_input": {"file_path": absolute, "old_string": "", "new_string": ""},
        }
        if event == POST:
            payload["tool_response"] = {"filePath": absolute, "success": True}
        return json.dumps(payload)
    if harness == "codex":
        patch = f"*** Begin Patch\n*** Update File: {path}\n@@\n+# an edit\n*** End Patch\n"
        return json.dumps(
            {
                "session_id": session,
                "turn_id": f"{session}-turn",
                "transcript_path": None,
                "cwd": str(root),
                "hook_event_name": "PreToolUse",
                "model": "gpt-5.2-codex",
                "permission_mode": "default",
                "tool_name": "apply_patch",
                "tool_input": {"command": patch},
                "tool_use_id": f"call-{time.monotonic_ns()}",
            }
        )
    if harness == "gemini":
        arguments = {"file_path": path, "old_string": "", "new_string": "", "instruction": "edit"}
        return json.dumps(
            {
                "session_id": session,
                "transcript_path": "",
                "cwd": str(root),
                "hook_event_name": "BeforeTool",
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "tool_name": "replace",
                "tool_input": arguments,
            }
        )
    if harness == "cursor":
        payload = {
            "conversation_id": session,
            "generation_id": f"{session}-{time.monotonic_ns()}",
            "hook_event_name": "preToolUse",
            "cursor_version": "2.1.42",
            "workspace_roots": [str(root)],
            "cwd": "",
            "tool_name": "StrReplace",
            "tool_input": {"path": absolute, "old_string": "", "new_string": ""},
            "tool_use_id": f"tool-{time.monotonic_ns()}",
        }
        return "\ufeff" + json.dumps(payload)  # as Cursor may send it: a byte order mark first
    arguments = {"path": absolute, "old_str": "", "new_str": ""}
    return json.dumps(
        {
            "timestamp": int(time.time() * 1000),
            "cwd": str(root),
            "toolName": "edit",
            "toolArgs": json.dumps(arguments),
        }
    )


def refusal(harness: str, done: subprocess.CompletedProcess[str]) -> str | None:
    """The reason ``harness`` reads from its hook's answer, or None: the edit goes ahead."""
    if harness in ("claude-code", "codex", "gemini") or done.returncode == 2:
        if done.returncode == 2:
            return done.stderr.strip() or "refused"
        if harness != "gemini":
            return None
    try:
        answer = json.loads(done.stdout) if done.stdout.strip() else {}
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    if harness == "cursor" and answer.get("permission") == "deny":
        return str(answer.get("agent_message") or "refused")
    if harness == "copilot" and answer.get("permissionDecision") == "deny":
        return str(answer.get("permissionDecisionReason") or "refused")
    if harness == "gemini" and answer.get("decision") in ("deny", "block"):
        return str(answer.get("reason") or "refused")
    return None
