"""What a unit of ``projektor run`` hands in: the verification (``--verify``) and the
report (docs/agents.md, "The agent command")."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from projektor_agent import gitops
from projektor_agent.checkout import RUNNER_DIR
from projektor_agent.context import RunContext, Unit
from projektor_agent.output import warn

VERIFY_TAIL_LINES = 20
REPORT_LIMIT = 4000  # the server's limit of a report's summary and verification


def verify(command: str, unit: Unit) -> tuple[bool, str]:
    """``command`` run by the shell in ``unit``'s worktree: passed, and what it said."""
    result = subprocess.run(
        command,
        shell=True,
        cwd=str(unit.workdir),
        env=unit.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=False,
    )
    lines = result.stdout.decode("utf-8", "replace").rstrip().splitlines()
    tail = "\n".join(lines[-VERIFY_TAIL_LINES:])
    text = f"`{command}` exited with status {result.returncode}" + (f":\n{tail}" if tail else "")
    return result.returncode == 0, text[-REPORT_LIMIT:]


def report(context: RunContext, unit: Unit, verification: str) -> dict[str, Any]:
    """The child's .projektor/report.json when it wrote one, else the branch's commits."""
    written: dict[str, Any] = {}
    path = (unit.workdir or Path.cwd()) / RUNNER_DIR / "report.json"
    if path.exists():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            written = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError) as error:
            warn(f"{path} is not a JSON object ({error}); the report is built instead")
    summary = str(written.get("summary") or "").strip()
    if not summary and unit.base and unit.workdir is not None:
        subjects = gitops.commit_subjects(unit.workdir, unit.base)
        summary = "\n".join(f"- {subject}" for subject in subjects)
    if not summary:
        summary = f"`{' '.join(context.command)}` exited 0 with no commits"
    if unit.branch:
        summary += f"\n\nBranch: {unit.branch}"
    if written.get("verification") and not context.options.verify:
        verification = str(written["verification"])
    report = {"summary": summary[:REPORT_LIMIT], "verification": verification[:REPORT_LIMIT]}
    if written.get("pr_link"):
        report["pr_link"] = str(written["pr_link"])
    return report
