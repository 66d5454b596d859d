#!/usr/bin/env python3
"""Projektor pre-commit guard: refuse a commit that touches a file another issue claimed.

It is ``projektor guard pre-commit`` (``projektor run`` installs it in the worktrees it
arms), and also a standalone hook: this file alone, served at ``/guard/pre-commit``.
Install it in a checkout (linked worktrees and ``core.hooksPath`` included)::

    hook="$(git rev-parse --git-path hooks)/pre-commit" && curl -fsS --create-dirs \\
        -o "$hook" http://127.0.0.1:8000/guard/pre-commit && chmod +x "$hook"

Configure it; an environment variable wins over git config::

    PROJEKTOR_URL           git config projektor.url     server, e.g. http://127.0.0.1:8000
    PROJEKTOR_API_KEY       git config projektor.apiKey  an API key of the workspace
    PROJEKTOR_ISSUE         git config projektor.issue   id of the issue this work is for
    PROJEKTOR_GUARD_STRICT  git config projektor.strict  true: refuse what cannot be checked

Before each commit it sends every staged path (added, modified, deleted, type-changed,
and both sides of a rename or copy) to ``POST /api/v1/file-claims/check/``, in batches
of 1000; the server normalises them like claims. Exit status 1 refuses the commit:

- a path held by another issue's live claim (or by a claim with no session): refused,
  naming each path, holder issue and agent. A claim of a directory (``src/api/``)
  holds every file under it, so a staged ``src/api/v2/x.py`` is refused as well,
  naming the directory claim that holds it;
- the server answers 4xx (unknown key, unknown issue, wrong URL), or the configuration
  is malformed: refused with the server's detail, a mistake to fix;
- a path the server rejects as invalid (a name no claim can hold, such as one with a
  control character or a backslash): skipped with a warning. ``*``, ``?`` and ``[``
  are plain characters of a file name here, not globs;
- the server cannot be reached, answers 5xx or 429, or the configuration is missing:
  a warning, and the commit goes through; in strict mode it is refused instead.

Standard library only, so it runs on any machine with git and Python 3.8 or later.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

PROG = "projektor pre-commit"
CHECK_ENDPOINT = "/api/v1/file-claims/check/"
BATCH_SIZE = 1000  # the endpoint's limit per request
TIMEOUT_SECONDS = 15.0
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
STRICT_HINT = "PROJEKTOR_GUARD_STRICT=1 or 'git config projektor.strict true'"


class Refused(Exception):
    """The commit must not go through; the message says why and what to fix."""


class Unchecked(Exception):
    """The paths could not be checked (server unreachable, configuration missing...)."""


# --- git ---------------------------------------------------------------------------------


def git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], capture_output=True, check=False)


def decode(raw: bytes) -> str:
    """Git output as text; bytes that are not UTF-8 survive as lone surrogates."""
    return raw.decode("utf-8", "surrogateescape")


def git_config(name: str) -> str | None:
    result = git("config", "--get", name)
    return decode(result.stdout).rstrip("\n") if result.returncode == 0 else None


def parse_name_status(output: bytes) -> list[str]:
    """Paths of ``git diff --name-status -z`` output: one per entry, two for a rename
    or copy (``R100``/``C075`` are followed by the old and the new path)."""
    fields = output.split(b"\0")
    if fields and fields[-1] == b"":
        fields.pop()
    paths: list[str] = []
    index = 0
    while index < len(fields):
        status = fields[index]
        count = 2 if status[:1] in (b"R", b"C") else 1
        paths.extend(decode(raw) for raw in fields[index + 1 : index + 1 + count])
        index += 1 + count
    return list(dict.fromkeys(paths))  # each path once, in git's order


def staged_paths() -> list[str]:
    """Every path the commit would change, relative to the repository root."""
    top = git("rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise Unchecked("not inside a git work tree: " + decode(top.stderr).strip())
    # From the top level, paths come out whole even with diff.relative set.
    os.chdir(decode(top.stdout).rstrip("\n"))
    diff = git("diff", "--cached", "--name-status", "-z", "-M")
    if diff.returncode != 0:
        raise Unchecked("git diff --cached failed: " + decode(diff.stderr).strip())
    return parse_name_status(diff.stdout)


# --- configuration ---------------------------------------------------------------------


def setting(env_name: str, git_name: str) -> tuple[str | None, str]:
    """The value and where it came from; the environment wins, empty counts as unset."""
    value = os.environ.get(env_name, "").strip()
    if value:
        return value, env_name
    value = (git_config(git_name) or "").strip()
    if value:
        return value, f"git config {git_name}"
    return None, f"{env_name} (or git config {git_name})"


def strict_mode() -> bool:
    raw, source = setting("PROJEKTOR_GUARD_STRICT", "projektor.strict")
    if raw is None or raw.lower() in FALSE_WORDS:
        return False
    if raw.lower() not in TRUE_WORDS:
        warn(f"{source} is {raw!r}, not a boolean; taking it as true (strict)")
    return True


def api_url(base: str, source: str) -> str:
    if not base.lower().startswith(("http://", "https://")):
        raise Refused(f"{source} is {base!r}: give the server's http:// or https:// URL")
    base = base.rstrip("/")
    if base.endswith("/api/v1"):  # the API's base was given, not the server's
        base = base[: -len("/api/v1")]
    return base + CHECK_ENDPOINT


def api_key(raw: str, source: str) -> str:
    if not (raw.isascii() and raw.isprintable() and " " not in raw):
        raise Refused(f"{source} is not an API key: it holds spaces or unprintable characters")
    return raw


def issue_id(raw: str, source: str) -> int:
    text = raw.lstrip("#")
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise Refused(f"{source} is {raw!r}: give the id of the issue, like 42")
    return int(text)


# --- the check ---------------------------------------------------------------------------


def shown(path: str) -> str:
    """A path as the server echoes it in an error (lone surrogates backslash-escaped)."""
    return path.encode("utf-8", "backslashreplace").decode("utf-8")


def post_json(url: str, key: str, payload: dict[str, Any]) -> tuple[int, Any]:
    """POST ``payload``; the status and the decoded JSON body (None if not JSON)."""
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode("utf-8"),
        method="POST",
        headers={
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "projektor-pre-commit/1",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    except urllib.error.URLError as error:
        raise Unchecked(f"cannot reach {url}: {error.reason}") from None
    except (OSError, ValueError) as error:  # timeouts, resets, malformed responses
        raise Unchecked(f"cannot reach {url}: {error}") from None
    try:
        return status, json.loads(raw.decode("utf-8"))
    except ValueError:
        return status, None


def describe(status: int, body: Any) -> str:
    if not (isinstance(body, dict) and body.get("detail")):
        return f"HTTP {status} (not a Projektor API answer)"
    code = f" {body['code']}" if body.get("code") else ""
    return f"HTTP {status}{code}: {body['detail']}"


def check(
    url: str, key: str, issue: int, paths: list[str]
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The conflicts over all batches, and the paths the server rejected as invalid."""
    conflicts: list[dict[str, Any]] = []
    skipped: list[tuple[str, str]] = []
    for start in range(0, len(paths), BATCH_SIZE):
        batch = paths[start : start + BATCH_SIZE]
        while batch:
            status, body = post_json(url, key, {"issue": issue, "paths": batch})
            if status == 200 and isinstance(body, dict) and isinstance(body.get("conflicts"), list):
                conflicts.extend(body["conflicts"])
                break
            rejected = body.get("path") if status == 400 and isinstance(body, dict) else None
            if isinstance(rejected, str) and any(shown(path) == rejected for path in batch):
                # No claim can hold a path the server cannot normalise: nothing to guard.
                skipped.append((rejected, str(body.get("detail", ""))))
                batch = [path for path in batch if shown(path) != rejected]
                continue
            if status == 429 or status >= 500:
                raise Unchecked(f"the server at {url} answered {describe(status, body)}")
            raise Refused(
                f"the server at {url} refused the check: {describe(status, body)}\n"
                "Fix the configuration: PROJEKTOR_URL, PROJEKTOR_API_KEY, PROJEKTOR_ISSUE "
                "(or git config projektor.url, projektor.apiKey, projektor.issue)."
            )
    return conflicts, skipped


def refusal(issue: int, conflicts: list[dict[str, Any]]) -> str:
    count = len({str(c.get("path")) for c in conflicts})
    holders = "another issue" if len({c.get("issue") for c in conflicts}) == 1 else "other issues"
    lines = [
        f"{PROG}: commit refused: {count} staged path{'s' if count != 1 else ''} "
        f"{'are' if count != 1 else 'is'} claimed by {holders} "
        f"(this commit is for issue {issue}):"
    ]
    width = min(max(len(str(c.get("path"))) for c in conflicts), 60)
    for conflict in conflicts:
        agent, session = conflict.get("agent"), conflict.get("session")
        if session is None:
            holder = "no session (held until released or forced)"
        else:
            holder = f"agent {agent or '?'} (session {session})"
        held = conflict.get("held_path")
        if held and held != conflict.get("path"):
            holder += f", by its claim of the directory {held}"
        lines.append(
            f"  {str(conflict.get('path')):<{width}}  issue {conflict.get('issue')}, {holder}"
        )
    lines.append(
        "Leave these files to their holders: unstage them (git restore --staged <path>),\n"
        "wait for the claims to be released, or ask the holders on their issues."
    )
    return "\n".join(lines)


# --- main --------------------------------------------------------------------------------


def warn(message: str) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def run() -> int:
    strict = strict_mode()
    try:
        paths = staged_paths()
        if not paths:
            return 0
        url, url_source = setting("PROJEKTOR_URL", "projektor.url")
        key, key_source = setting("PROJEKTOR_API_KEY", "projektor.apiKey")
        issue, issue_source = setting("PROJEKTOR_ISSUE", "projektor.issue")
        missing = [
            source
            for value, source in ((url, url_source), (key, key_source), (issue, issue_source))
            if value is None
        ]
        if url is None or key is None or issue is None:
            raise Unchecked("not configured; set " + ", ".join(missing))
        number = issue_id(issue, issue_source)
        endpoint = api_url(url, url_source)
        conflicts, skipped = check(endpoint, api_key(key, key_source), number, paths)
    except Refused as refused:
        print(f"{PROG}: commit refused: {refused}", file=sys.stderr)
        return 1
    except Unchecked as unchecked:
        if strict:
            print(
                f"{PROG}: commit refused: {unchecked}.\n"
                "The staged paths could not be checked against file claims (strict mode).",
                file=sys.stderr,
            )
            return 1
        warn(
            f"{unchecked}.\nCommitting without checking file claims; "
            f"set {STRICT_HINT} to refuse instead."
        )
        return 0
    for path, why in skipped:
        warn(f"not checked: {path!r}, no claim can name it ({why})")
    if conflicts:
        print(refusal(number, conflicts), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run())
