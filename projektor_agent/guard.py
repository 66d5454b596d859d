"""Projektor pre-commit guard: refuse a commit that touches a file another issue claimed.

It is ``projektor guard pre-commit`` (``projektor run`` arms it in the worktrees it
works in). The command itself, installed as a git hook named ``pre-commit``, is the
guard: ``/guard/pre-commit`` serves the ``projektor`` command for that. Install it in a
checkout (linked worktrees and ``core.hooksPath`` included)::

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

Like the whole command, standard library only: it runs on any machine with git and
Python 3.9 or later.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from projektor_agent import config
from projektor_agent.client import Client
from projektor_agent.errors import CommandError, Unreachable, UsageError

PROG = "projektor pre-commit"
CHECK_PATH = "/file-claims/check/"
BATCH_SIZE = 1000  # the endpoint's limit per request
TIMEOUT_SECONDS = 15.0
ISSUE = ("PROJEKTOR_ISSUE", "projektor.issue")
STRICT = ("PROJEKTOR_GUARD_STRICT", "projektor.strict")
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


def setting(pair: tuple[str, str]) -> tuple[str | None, str]:
    """The value (config.setting: the environment wins, empty counts as unset) and
    where it came from, or what to set."""
    env_name, git_name = pair
    value = config.setting(pair)
    if value is None:
        return None, config.missing(pair)
    return value, env_name if os.environ.get(env_name, "").strip() else f"git config {git_name}"


def strict_mode() -> bool:
    raw, source = setting(STRICT)
    if raw is None or raw.lower() in FALSE_WORDS:
        return False
    if raw.lower() not in TRUE_WORDS:
        warn(f"{source} is {raw!r}, not a boolean; taking it as true (strict)")
    return True


def issue_id(raw: str, source: str) -> int:
    text = raw.lstrip("#")
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise Refused(f"{source} is {raw!r}: give the id of the issue, like 42")
    return int(text)


def client() -> tuple[Client, int]:
    """The server's client and the issue, from the configuration (the command's own,
    and the issue): Unchecked when a setting is missing, Refused when one is wrong."""
    values = [setting(pair) for pair in (config.URL, config.API_KEY, ISSUE)]
    missing = [source for value, source in values if value is None]
    (url, _), (key, _), (issue, issue_source) = values
    if url is None or key is None or issue is None:
        raise Unchecked("not configured; set " + ", ".join(missing))
    number = issue_id(issue, issue_source)
    try:
        settings = config.Config(
            url=config.server_url(url), api_key=config.api_key(key), agent=None
        )
    except UsageError as error:
        raise Refused(error.message) from None
    return Client(settings), number


# --- the check ---------------------------------------------------------------------------


def shown(path: str) -> str:
    """A path as the server echoes it in an error (lone surrogates backslash-escaped)."""
    return path.encode("utf-8", "backslashreplace").decode("utf-8")


def post(server: Client, payload: dict[str, Any]) -> tuple[int, Any]:
    """POST ``payload`` to the check, once; the status and the decoded JSON body."""
    try:
        body = server.post(CHECK_PATH, payload, retry=False, timeout=TIMEOUT_SECONDS)
    except Unreachable as error:
        if not error.http_status:  # no answer at all
            raise Unchecked(error.message) from None
        return error.http_status, error.body
    except CommandError as error:
        return error.http_status, error.body
    return 200, body


def describe(status: int, body: Any) -> str:
    if not (isinstance(body, dict) and body.get("detail")):
        return f"HTTP {status} (not a Projektor API answer)"
    code = f" {body['code']}" if body.get("code") else ""
    return f"HTTP {status}{code}: {body['detail']}"


def check(
    server: Client, issue: int, paths: list[str]
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The conflicts over all batches, and the paths the server rejected as invalid."""
    url = server.url(CHECK_PATH)
    conflicts: list[dict[str, Any]] = []
    skipped: list[tuple[str, str]] = []
    for start in range(0, len(paths), BATCH_SIZE):
        batch = paths[start : start + BATCH_SIZE]
        while batch:
            status, body = post(server, {"issue": issue, "paths": batch})
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
        server, number = client()
        conflicts, skipped = check(server, number, paths)
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
