"""What the pre-commit guard's tests share: the hook's script, a real git repository
in ``tmp_path`` (a ``checkout``), the same with the hook installed as downloaded from
the live server (``guarded``), two issues and another agent's session, a closed port."""

import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import pytest

from coordination.models import ApiKey, Workspace
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


@pytest.fixture(name="checkout")
def fixture_checkout(tmp_path: Path) -> Checkout:
    home, tools = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    tools.mkdir()
    # The hook's "#!/usr/bin/env python3" finds this interpreter first.
    (tools / "python3").symlink_to(sys.executable)
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PROJEKTOR_", "GIT_")) and not name.lower().endswith("_proxy")
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        GIT_CONFIG_NOSYSTEM="1",
        PATH=f"{tools}{os.pathsep}{env.get('PATH', '')}",
    )
    repo = Checkout(root=tmp_path / "checkout", env=env)
    repo.root.mkdir()
    repo.git("init", "-q", "-b", "main")
    repo.git("config", "user.name", "Test Agent")
    repo.git("config", "user.email", "agent@example.com")
    repo.git("config", "commit.gpgsign", "false")
    repo.write("README.md", "base\n")
    repo.write("old.py", "print('a module long enough to be recognised when renamed')\n")
    repo.git("commit", "-q", "-m", "base")
    return repo


@pytest.fixture(name="guarded")
def fixture_guarded(checkout: Checkout, live_server: Any, workspace: Workspace) -> Checkout:
    """The checkout with the hook installed as downloaded, configured for ``workspace``."""
    with urlopen(f"{live_server.url}/guard/pre-commit") as response:
        script = response.read()
    hook = checkout.root / checkout.git("rev-parse", "--git-path", "hooks").stdout.strip()
    hook.mkdir(parents=True, exist_ok=True)
    (hook / "pre-commit").write_bytes(script)
    (hook / "pre-commit").chmod(0o755)
    _, key = ApiKey.issue(workspace, "guard")
    checkout.env.update(PROJEKTOR_URL=live_server.url, PROJEKTOR_API_KEY=key)
    return checkout


@pytest.fixture(name="mine_and_theirs")
def fixture_mine_and_theirs(workspace, make_issue, make_session) -> tuple[Any, Any, Any]:
    """Our issue, another issue, and a live session of agent coder-2 on the other."""
    return make_issue(title="Ours"), make_issue(title="Theirs"), make_session("coder-2")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
