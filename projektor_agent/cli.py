"""``projektor``: the parser, and the one place where errors become exit statuses.

Exit statuses: 0 done; 1 refused by the server (409/403/422), or the agent failed or
lost its work; 2 a usage or configuration error; 3 the server could not be reached or
answered 5xx/429 after retries. No traceback reaches the user.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from projektor_agent import __version__, commands
from projektor_agent.errors import USAGE, CommandError
from projektor_agent.harnesses import NAMES as HARNESSES
from projektor_agent.output import PROG, report_error

Handler = Callable[[argparse.Namespace], int]
HOOK_NAME = "pre-commit"  # the command under this name is `projektor guard pre-commit`


def run_command(args: argparse.Namespace) -> int:
    from projektor_agent.runner import run

    return run(args)


def hook_command(args: argparse.Namespace) -> int:
    from projektor_agent import hook

    return hook.main(args)


def land_command(args: argparse.Namespace) -> int:
    from projektor_agent import land

    return land.main(args)


def hold_command(args: argparse.Namespace) -> int:
    from projektor_agent import hold

    return hold.main(args)


def guard_command(args: argparse.Namespace) -> int:
    from projektor_agent import guard

    return guard.run()


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser = argparse.ArgumentParser(
        prog=PROG,
        parents=[common],
        description="Projektor for an agent's machine. Configure PROJEKTOR_URL, "
        "PROJEKTOR_API_KEY and PROJEKTOR_AGENT (or git config projektor.url, "
        "projektor.apiKey, projektor.agent).",
        epilog="Exit status: 0 done, 1 refused, 2 usage or configuration, 3 unreachable.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def add(name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        one = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        one.set_defaults(handler=handler)
        return one

    def for_issue(one: argparse.ArgumentParser) -> None:
        one.add_argument("--issue", help="the issue (default: PROJEKTOR_ISSUE)")
        one.add_argument("--session", help="the session (default: PROJEKTOR_SESSION)")

    add(commands.whoami.__name__, commands.whoami, "the key, its workspace and agent")
    one = add("ready", commands.ready, "the ready queue: issues to take, best first")
    one.add_argument("--project", help="a project key")
    one.add_argument("--free", action="store_true", help="only issues no one's claims collide with")
    one = add("show", commands.show, "one issue")
    one.add_argument("issue_id", metavar="ISSUE")
    one = add("start", commands.start, "start work on an issue: session, lease, claims")
    one.add_argument("issue_id", metavar="ISSUE")
    one.add_argument("paths", metavar="PATH", nargs="*", help="files to claim")
    one.add_argument("--worktree", help="bind the agent to this worktree (slug)")
    one = add("finish", commands.finish, "hand the work in and end the session")
    for_issue(one)
    one.add_argument("--to", default="in_review", help="the status to move to (in_review)")
    one.add_argument("--summary", help="the report's summary")
    one.add_argument("--verification", help="the report's verification")
    one.add_argument("--pr-link", help="the report's link")
    one = add("claim", commands.claim, "claim files for the issue")
    for_issue(one)
    one.add_argument("paths", metavar="PATH", nargs="+")
    one = add("release", commands.release, "release file claims (all of the issue's: no PATH)")
    for_issue(one)
    one.add_argument("paths", metavar="PATH", nargs="*")
    one = add("check", commands.check, "which paths another issue holds (exit 1 if any)")
    for_issue(one)
    one.add_argument("paths", metavar="PATH", nargs="+")
    one = add("heartbeat", commands.heartbeat, "keep the session live")
    one.add_argument("--session", help="the session (default: PROJEKTOR_SESSION)")
    one = add("events", commands.events, "the workspace's events (--follow: as they happen)")
    one.add_argument("--follow", action="store_true", help="wait for new events, until ^C")
    one.add_argument("--after", type=int, default=0, help="events after this id")
    one.add_argument("--type", help="comma-separated event types")
    one.add_argument("--project")
    one.add_argument("--issue")
    one.add_argument("--agent")
    one.add_argument("--session")
    one = add("message", commands.message, "post a message to issue:N, agent:NAME, project:KEY")
    one.add_argument("scope")
    one.add_argument("body")
    one.add_argument("--session", help="the author's session (default: PROJEKTOR_SESSION)")
    add_run(add("run", run_command, "run an agent command on issues, keeping the protocol"))
    add_hold(add("hold", hold_command, "run a command while holding units of a resource"))
    add_land(add("land", land_command, "test and land the landing queue's batches"))
    one = add(
        "hook",
        hook_command,
        "agent CLI hooks: `hook HARNESS` (the CLI's payload on stdin), "
        "`hook install|uninstall HARNESS [DIR]`",
    )
    # No choices: a harness it does not know is the hook's own error, which it lets
    # through with a warning (argparse's exit 2 is a refusal to three of the CLIs).
    one.add_argument(
        "action", nargs="?", default="", metavar=f"{' | '.join(HARNESSES)} | install | uninstall"
    )
    one.add_argument("target", nargs="*", metavar="HARNESS [DIR]", help="for install, uninstall")
    one = add("guard", guard_command, "the pre-commit guard: `guard pre-commit`")
    one.add_argument("hook_name", metavar="pre-commit", choices=["pre-commit"])
    return parser


def add_run(one: argparse.ArgumentParser) -> None:
    which = one.add_mutually_exclusive_group()
    which.add_argument("--issue", type=int, help="work on this issue")
    which.add_argument("--next", action="store_true", help="take the head of the ready queue")
    one.add_argument("--project", help="with --next: only this project's issues")
    one.add_argument("--paths", nargs="+", metavar="P", help="files to claim at the start")
    one.add_argument("--loop", action="store_true", help="one issue after another, until ^C")
    one.add_argument("--worktrees", metavar="DIR", help="each agent's own git worktree under DIR")
    one.add_argument("--verify", metavar="CMD", help="a shell command that must pass to hand in")
    one.add_argument(
        "--hooks",
        metavar="HARNESS[,HARNESS]|auto",
        help=f"install these agent CLIs' edit-time hooks in the worktree ({', '.join(HARNESSES)}; "
        "auto: the CLI the command runs)",
    )
    one.add_argument(
        "--integrate",
        action="store_true",
        help="with --worktrees: land the branch on the default branch before the hand-in, "
        "one integration at a time per project (rebase, verify again, fast-forward)",
    )
    one.add_argument(
        "--queue",
        action="store_true",
        help="with --integrate: land through the project's landing queue, where --verify "
        "is the check run on each batch of branches (the runner tests batches while it waits)",
    )
    one.add_argument(
        "--batch-max",
        type=int,
        default=4,
        metavar="N",
        help="with --queue: the largest batch this runner tests (4)",
    )
    one.add_argument(
        "--scan",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="claim the paths the agent changed every SECONDS and before the hand-in (5; 0: off)",
    )
    one.add_argument(
        "--on-conflict",
        choices=["wait", "fail"],
        default="wait",
        help="a changed path another issue holds, at the hand-in: wait for it (the default) "
        "or give the issue back",
    )
    one.add_argument(
        "--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL (10)"
    )
    one.add_argument(
        "--hold",
        action="append",
        metavar="NAME[:UNITS]",
        help="hold UNITS (1) of the resource NAME for each issue, from its start to its "
        "hand-in or give-back; repeatable (taken in name order). The agent gets "
        "PROJEKTOR_SLOTS_<NAME> (and PROJEKTOR_SLOTS, PROJEKTOR_SLOT with one --hold)",
    )
    one.add_argument(
        "--hold-wait",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long each --hold waits for its units before the issue is given back (60)",
    )
    one.add_argument("agent_command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG ...]")


def add_land(one: argparse.ArgumentParser) -> None:
    one.epilog = (
        "Run in a checkout of the repository. Without --loop: one take (0 or 1 batch), then "
        "exit 0. Exit status: 0 done, 1 refused, 2 usage or git, 3 unreachable."
    )
    one.add_argument(
        "--verify", metavar="CMD", required=True, help="the landing check, a shell command"
    )
    one.add_argument("--project", help="this project's queue (default: every project's)")
    one.add_argument("--loop", action="store_true", help="batch after batch, until ^C")
    one.add_argument("--batch-max", type=int, default=4, metavar="N", help="the largest batch (4)")
    one.add_argument(
        "--worktrees",
        metavar="DIR",
        help="test in DIR/<agent>-landing (default: in the repository's git directory)",
    )


def add_hold(one: argparse.ArgumentParser) -> None:
    one.epilog = (
        "The command gets PROJEKTOR_SLOTS (the hold's slots, comma-separated) and "
        "PROJEKTOR_SLOT (the first). Exit status: the command's (128+N when killed by "
        "signal N); 1 the resource stayed busy (its holders named); 2 usage; 3 unreachable."
    )
    one.add_argument("name", metavar="NAME", help="the resource, e.g. db:test or ports")
    hold_options(one)
    one.add_argument("held_command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG ...]")


def hold_options(one: argparse.ArgumentParser) -> None:
    """The options of ``projektor hold``, before or after its NAME (up to the ``--``)."""
    one.add_argument("--units", type=int, default=1, help="how many of its units (1)")
    one.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for the units, first come first served (0, the default: "
        "refused at once when busy, exit 1, naming the holders)",
    )
    one.add_argument("--issue", help="the issue the hold is for (default: PROJEKTOR_ISSUE)")
    one.add_argument(
        "--session", help="hold it in this session (default: PROJEKTOR_SESSION, else its own)"
    )
    one.add_argument(
        "--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL (10)"
    )


def main(argv: list[str] | None = None) -> int:
    if argv is None and os.path.basename(sys.argv[0]) == HOOK_NAME:
        argv = ["guard", HOOK_NAME]  # the command installed as the git hook itself
    parser = build_parser()
    words = sys.argv[1:] if argv is None else list(argv)
    as_json = "--json" in words
    try:
        args = parser.parse_args(words)
        args.words = words  # as typed: `hold` reads its `--` from them
        return int(args.handler(args))
    except SystemExit as exit:  # argparse: --help, --version, a usage error
        return exit.code if isinstance(exit.code, int) else USAGE
    except CommandError as error:
        report_error(error, as_json)
        return error.status
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as error:  # noqa: BLE001 - one line, never a traceback
        if os.environ.get("PROJEKTOR_DEBUG"):
            raise
        print(
            f"{PROG}: unexpected error: {type(error).__name__}: {error} "
            "(PROJEKTOR_DEBUG=1 shows where)",
            file=sys.stderr,
        )
        return USAGE
