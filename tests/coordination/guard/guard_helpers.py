"""What the pre-commit guard's tests share beside their fixtures (conftest.py): the
hook's script, a real git repository in ``tmp_path`` (``Checkout``), a closed port."""

import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from projektor_agent import guard as pre_commit

HOOK = Path(pre_commit.__file__)
LIVE = pytest.mark.django_db(transaction=True)


@dataclass
class Checkout:
    """A git repository in tmp_path, with an environment that ignores the user's own
    git configuration and any PROJEKTOR_* settings of the test run."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["git", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if check:
            assert result.returncode == 0, result.stderr
        return result

    def write(self, path: str, text: str = "content\n") -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        self.git("add", "--", path)

    def commit(self, message: str = "work") -> subprocess.CompletedProcess[str]:
        return self.git("commit", "-q", "-m", message, check=False)

    def commits(self) -> int:
        return int(self.git("rev-list", "--count", "HEAD").stdout)

    def run_hook(self, *python_flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *python_flags, str(HOOK)],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
