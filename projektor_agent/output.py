"""What a subcommand prints: a short human answer, or the server's JSON with --json."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from projektor_agent.errors import CommandError

PROG = "projektor"


def emit(as_json: bool, body: Any, lines: Iterable[str] = ()) -> None:
    if as_json:
        print(json.dumps(body, indent=2, sort_keys=True))
    else:
        for line in lines:
            print(line)


def say(message: str) -> None:
    """A line for the person watching (stderr: stdout belongs to --json and the agent)."""
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def warn(message: str) -> None:
    say(f"warning: {message}")


def report_error(error: CommandError, as_json: bool) -> None:
    print(f"{PROG}: {error.message}", file=sys.stderr, flush=True)
    if as_json:
        body = error.body if isinstance(error.body, dict) else {"detail": error.message}
        print(json.dumps({"error": body, "exit_status": error.status}, indent=2, sort_keys=True))
