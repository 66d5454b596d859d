"""What the pre-commit guard's tests share beside their fixtures (conftest.py): the
hook as served (the ``projektor`` command, named ``pre-commit``), a real git repository
in ``tmp_path`` (``Checkout``), a closed port."""

import atexit
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from coordination.guard import bundle


def built_hook() -> Path:
    """The served hook's bytes in a file named as git runs it, for this test run."""
    where = Path(tempfile.mkdtemp(prefix="projektor-guard-"))
    atexit.register(shutil.rmtree, where, ignore_errors=True)
    hook = where / "pre-commit"
    hook.write_bytes(bundle.zipapp())
    hook.chmod(0o755)
    return hook


HOOK = built_hook()
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
