"""The pre-commit guard's fixtures: a real git repository in ``tmp_path`` (a
``checkout``), the same with the hook installed as downloaded from the live server
(``guarded``), and two issues with another agent's session (``mine_and_theirs``)."""

import os
import sys
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import pytest

from coordination.models import ApiKey, Workspace
from tests.coordination.guard.guard_helpers import Checkout


@pytest.fixture
def checkout(tmp_path: Path) -> Checkout:
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


@pytest.fixture
def guarded(checkout: Checkout, live_server: Any, workspace: Workspace) -> Checkout:
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


@pytest.fixture
def mine_and_theirs(workspace, make_issue, make_session) -> tuple[Any, Any, Any]:
    """Our issue, another issue, and a live session of agent coder-2 on the other."""
    return make_issue(title="Ours"), make_issue(title="Theirs"), make_session("coder-2")
