"""The README's shell blocks, as a reader copies them, for the tests that run them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PRINTED_ADDRESS = "http://127.0.0.1:8000"  # make run's, as the README prints it
BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def shell_blocks(heading: str) -> list[str]:
    """The ```sh blocks of the README's section ``## heading``, in order."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return BLOCK.findall(text[start : end if end != -1 else len(text)])


def run_shell(
    script: str, *, url: str, cwd: Path, env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``script`` run by bash as pasted (stopping at the first failing command), the
    printed address replaced by the server's under test: the one change made to it."""
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script.replace(PRINTED_ADDRESS, url)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
