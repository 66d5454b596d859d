"""A scripted stand-in for a coding agent, run by ``projektor run`` in the tests.

    scripted_agent.py CONTROL [--wait] [--edit PATH]... [--fail-once] [--commit MSG]
                      [--report JSON] [--stderr TEXT] [--exit N] [--ignore-term]
                      [--helper]

It writes CONTROL/started.json (its pid, directory, arguments and PROJEKTOR_*
environment) at once; with --wait it works until CONTROL/go exists; then it edits,
commits, reports, writes to stderr and exits as told. --fail-once: the first run
with this CONTROL exits 1 right after its edits (a crash that leaves work behind).
SIGTERM is recorded in CONTROL/terminated (then exit 143), unless --ignore-term.
--helper: it starts a child of its own first (an agent's tool, in its process group)
that sleeps for ten minutes, and records its pid as "helper".
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("control", type=Path)
    parser.add_argument("--wait", action="store_true")
    parser.add_argument("--edit", action="append", default=[])
    parser.add_argument("--fail-once", action="store_true")
    parser.add_argument("--commit")
    parser.add_argument("--report")
    parser.add_argument("--stderr")
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--helper", action="store_true")
    args, _ = parser.parse_known_args()  # the rest: placeholders, recorded in argv
    control: Path = args.control

    def terminated(signum, frame):
        (control / "terminated").write_text(str(signum))
        sys.exit(143)

    signal.signal(signal.SIGTERM, signal.SIG_IGN if args.ignore_term else terminated)
    helper = None
    if args.helper:
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    started = {
        "pid": os.getpid(),
        "helper": helper.pid if helper else None,
        "cwd": os.getcwd(),
        "argv": sys.argv[2:],
        "env": {k: v for k, v in os.environ.items() if k.startswith("PROJEKTOR_")},
        "hooks": subprocess.run(
            ["git", "rev-parse", "--git-path", "hooks"], capture_output=True, text=True
        ).stdout.strip(),
        "issue_md": Path(".projektor/issue.md").read_text()
        if Path(".projektor/issue.md").exists()
        else None,
    }
    (control / "started.json.tmp").write_text(json.dumps(started))
    (control / "started.json.tmp").rename(control / "started.json")
    while args.wait and not (control / "go").exists():
        time.sleep(0.05)
    for path in args.edit:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a") as file:
            file.write(
                f"edited by the scripted agent for issue {os.environ.get('PROJEKTOR_ISSUE')}\n"
            )
    if args.fail_once and not (control / "failed-once").exists():
        (control / "failed-once").write_text("")
        return 1
    if args.commit:
        subprocess.run(["git", "add", "-A"], check=True)
        subprocess.run(["git", "commit", "-q", "-m", args.commit], check=True)
    if args.report:
        Path(".projektor").mkdir(exist_ok=True)
        Path(".projektor/report.json").write_text(args.report)
    if args.stderr:
        print(args.stderr, file=sys.stderr, flush=True)
    return args.exit


if __name__ == "__main__":
    sys.exit(main())
