"""The pre-commit guard: the git hook that calls ``POST /file-claims/check/``.

The hook tests build a real git repository in ``tmp_path``, install the hook as
downloaded from the live server, and run ``git commit`` against that server.
"""

import ast
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import pytest

from coordination.models import ApiKey, ClaimConflict, FileClaim, Workspace
from coordination.services import keys
from projektor_agent import guard as pre_commit
from tests.conftest import expire
from tests.coordination.conftest import claim_paths

HOOK = Path(pre_commit.__file__)
LIVE = pytest.mark.django_db(transaction=True)


# --- the script --------------------------------------------------------------------------


def test_the_script_imports_only_the_standard_library():
    tree = ast.parse(HOOK.read_text(encoding="utf-8"))
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "no relative imports"
            modules.add((node.module or "").split(".")[0])
    assert modules and modules <= set(sys.stdlib_module_names)


def test_name_status_parsing_takes_both_sides_of_renames_and_copies():
    output = b"M\0a.py\0R087\0old.py\0new.py\0C100\0src.py\0copy.py\0D\0gone.py\0A\0a.py\0"
    assert pre_commit.parse_name_status(output) == [
        "a.py",
        "old.py",
        "new.py",
        "src.py",
        "copy.py",
        "gone.py",
    ]
    assert pre_commit.parse_name_status(b"") == []


# --- the hook in a real repository ---------------------------------------------------------


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


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@LIVE
def test_a_commit_touching_another_issues_claim_is_refused(guarded, workspace, mine_and_theirs):
    mine, theirs, coder = mine_and_theirs
    claim_paths(workspace, theirs, ["src/api.py", "docs/x.md"], coder)
    claim_paths(workspace, theirs, ["src/orphan.py"])  # no session: held until forced
    guarded.env["PROJEKTOR_ISSUE"] = str(mine.pk)
    guarded.write("src/api.py")
    guarded.write("src/orphan.py")
    guarded.write("src/free.py")

    result = guarded.commit()

    assert result.returncode != 0
    assert guarded.commits() == 1
    err = result.stderr
    assert "commit refused: 2 staged paths are claimed by another issue (" in err
    assert f"(this commit is for issue {mine.pk})" in err
    api_line = next(line for line in err.splitlines() if "src/api.py" in line)
    assert f"issue {theirs.pk}, agent coder-2 (session {coder.pk})" in api_line
    orphan_line = next(line for line in err.splitlines() if "src/orphan.py" in line)
    assert f"issue {theirs.pk}, no session" in orphan_line
    assert "src/free.py" not in err and "docs/x.md" not in err
    assert not ClaimConflict.objects.exists()  # the guard only looked


@LIVE
def test_the_guard_works_with_a_read_key(guarded, workspace, mine_and_theirs):
    """It only checks (invariant 13: a read key may, and writes nothing)."""
    mine, theirs, coder = mine_and_theirs
    claim_paths(workspace, theirs, ["src/api.py"], coder)
    _, read = keys.mint_key(workspace=workspace, name="guard", kind="read")
    guarded.env.update(PROJEKTOR_API_KEY=read, PROJEKTOR_ISSUE=str(mine.pk))
    guarded.write("src/api.py")

    refused = guarded.commit()
    assert refused.returncode != 0 and "src/api.py" in refused.stderr, refused.stderr
    guarded.git("restore", "--staged", "src/api.py")
    guarded.write("src/free.py")
    result = guarded.commit()
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert guarded.commits() == 2


@LIVE
def test_a_commit_touching_a_file_under_another_issues_directory_claim_is_refused(
    guarded, workspace, mine_and_theirs
):
    """Invariant 11: ``src/api/`` holds every file under it, at any depth, including
    files created after the claim; ``src/apiv2/`` and the directory's neighbours are
    free. A file name with glob characters is a name like any other here."""
    mine, theirs, coder = mine_and_theirs
    claim_paths(workspace, theirs, ["src/api/"], coder)
    guarded.env["PROJEKTOR_ISSUE"] = str(mine.pk)
    guarded.write("src/api/v2/new_file.py")
    guarded.write("src/api/a[1].py")
    guarded.write("src/apiv2/free.py")
    guarded.write("src/api.py")

    result = guarded.commit()

    assert result.returncode != 0
    assert guarded.commits() == 1
    err = result.stderr
    assert "commit refused: 2 staged paths are claimed by another issue (" in err
    for path in ("src/api/v2/new_file.py", "src/api/a[1].py"):
        line = next(line for line in err.splitlines() if path in line)
        assert f"issue {theirs.pk}, agent coder-2 (session {coder.pk})" in line
        assert "by its claim of the directory src/api/" in line
    assert "src/apiv2/free.py" not in err and "src/api.py " not in err
    assert not ClaimConflict.objects.exists()

    # Unstaged, the free files commit; the issue's own directory claim is no conflict.
    guarded.git("restore", "--staged", "src/api")
    assert guarded.commit().returncode == 0
    claim_paths(workspace, mine, ["lib/"])
    guarded.write("lib/deep/x.py")
    assert guarded.commit().returncode == 0


@LIVE
def test_free_paths_and_the_issues_own_claims_commit(guarded, workspace, mine_and_theirs):
    mine, theirs, coder = mine_and_theirs
    claim_paths(workspace, mine, ["src/mine.py"], coder)
    claim_paths(workspace, theirs, ["src/theirs.py"], coder)
    guarded.env["PROJEKTOR_ISSUE"] = str(mine.pk)
    guarded.write("src/mine.py")
    guarded.write("src/free.py")

    result = guarded.commit()

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert guarded.commits() == 2


@LIVE
def test_a_dead_holders_claim_does_not_stop_the_commit(guarded, workspace, mine_and_theirs):
    mine, theirs, coder = mine_and_theirs
    claim_paths(workspace, theirs, ["src/a.py"], coder)
    expire(coder)
    guarded.env["PROJEKTOR_ISSUE"] = str(mine.pk)
    guarded.write("src/a.py")

    result = guarded.commit()

    assert result.returncode == 0, result.stderr
    assert FileClaim.objects.get().released_at is None


@pytest.mark.parametrize(("claimed", "target"), [("new.py", "new.py"), ("old.py", "moved.py")])
@LIVE
def test_both_sides_of_a_rename_are_guarded(guarded, workspace, mine_and_theirs, claimed, target):
    mine, theirs, coder = mine_and_theirs
    claim_paths(workspace, theirs, [claimed], coder)
    guarded.env["PROJEKTOR_ISSUE"] = str(mine.pk)
    guarded.git("mv", "old.py", target)
    assert guarded.git("diff", "--cached", "--name-status", "-M").stdout.startswith("R")

    result = guarded.commit()

    assert result.returncode != 0
    assert f"  {claimed}  issue {theirs.pk}, agent coder-2" in result.stderr
    assert guarded.commits() == 1


@LIVE
def test_deleting_a_claimed_path_is_refused(guarded, workspace, mine_and_theirs):
    mine, theirs, coder = mine_and_theirs
    claim_paths(workspace, theirs, ["README.md"], coder)
    guarded.env["PROJEKTOR_ISSUE"] = str(mine.pk)
    guarded.git("rm", "-q", "README.md")

    result = guarded.commit()

    assert result.returncode != 0 and "README.md" in result.stderr


@LIVE
def test_more_staged_paths_than_one_request_takes_are_sent_in_batches(
    guarded, workspace, mine_and_theirs
):
    mine, theirs, coder = mine_and_theirs
    claim_paths(workspace, theirs, ["zz/last.py"], coder)
    guarded.env["PROJEKTOR_ISSUE"] = str(mine.pk)
    for n in range(1100):
        path = guarded.root / "many" / f"{n:04}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"{n}\n")
    (guarded.root / "zz").mkdir()
    (guarded.root / "zz" / "last.py").write_text("last\n")
    guarded.git("add", "-A")

    result = guarded.commit()

    assert result.returncode != 0
    assert "1 staged path is claimed" in result.stderr and "zz/last.py" in result.stderr


@LIVE
def test_paths_no_claim_can_name_are_skipped_with_a_warning(guarded, workspace, mine_and_theirs):
    mine, theirs, coder = mine_and_theirs
    guarded.env["PROJEKTOR_ISSUE"] = str(mine.pk)
    guarded.write("back\\slash.py")
    guarded.write("tab\there.py")
    guarded.write("fine.py")

    result = guarded.commit()

    assert result.returncode == 0, result.stderr
    assert "warning: not checked: 'back\\\\slash.py'" in result.stderr
    assert "warning: not checked: 'tab\\there.py'" in result.stderr

    claim_paths(workspace, theirs, ["fine.py"], coder)
    guarded.write("back\\slash.py", "again\n")
    guarded.write("fine.py", "again\n")
    refused = guarded.commit()
    assert refused.returncode != 0 and "  fine.py  issue" in refused.stderr


@LIVE
def test_configuration_from_git_config_and_the_environment_wins(
    guarded, workspace, mine_and_theirs
):
    mine, theirs, coder = mine_and_theirs
    claim_paths(workspace, theirs, ["src/a.py"], coder)
    for env_name, git_name in (
        ("PROJEKTOR_URL", "projektor.url"),
        ("PROJEKTOR_API_KEY", "projektor.apiKey"),
    ):
        guarded.git("config", git_name, guarded.env.pop(env_name))
    guarded.git("config", "projektor.issue", str(mine.pk))
    guarded.write("src/a.py")

    refused = guarded.commit()
    assert refused.returncode != 0 and f"issue {theirs.pk}, agent coder-2" in refused.stderr

    guarded.env["PROJEKTOR_ISSUE"] = str(theirs.pk)  # the environment wins
    assert guarded.commit().returncode == 0


@LIVE
def test_an_unreachable_server_warns_and_lets_the_commit_through(
    guarded, workspace, mine_and_theirs
):
    mine, theirs, coder = mine_and_theirs
    claim_paths(workspace, theirs, ["src/a.py"], coder)
    guarded.env.update(PROJEKTOR_URL=f"http://127.0.0.1:{closed_port()}", PROJEKTOR_ISSUE="1")
    guarded.write("src/a.py")

    result = guarded.commit()

    assert result.returncode == 0
    assert "projektor pre-commit: warning: cannot reach http://127.0.0.1:" in result.stderr
    assert "Committing without checking file claims" in result.stderr
    assert guarded.commits() == 2


@pytest.mark.parametrize("how", ["env", "git config"])
@LIVE
def test_strict_mode_refuses_when_the_server_is_unreachable(guarded, mine_and_theirs, how):
    mine, _, _ = mine_and_theirs
    guarded.env.update(PROJEKTOR_URL=f"http://127.0.0.1:{closed_port()}", PROJEKTOR_ISSUE="1")
    if how == "env":
        guarded.env["PROJEKTOR_GUARD_STRICT"] = "1"
    else:
        guarded.git("config", "projektor.strict", "true")
    guarded.write("src/a.py")

    result = guarded.commit()

    assert result.returncode != 0
    assert "commit refused: cannot reach" in result.stderr and "(strict mode)" in result.stderr
    assert guarded.commits() == 1
    if how == "git config":  # an environment "off" wins over git config
        guarded.env["PROJEKTOR_GUARD_STRICT"] = "0"
        assert guarded.commit().returncode == 0


@LIVE
def test_missing_configuration_warns_and_strict_refuses(guarded):
    del guarded.env["PROJEKTOR_API_KEY"]
    guarded.write("src/a.py")

    result = guarded.commit()
    assert result.returncode == 0
    assert "warning: not configured; set PROJEKTOR_API_KEY (or git config projektor.apiKey)" in (
        result.stderr
    )
    assert "PROJEKTOR_ISSUE (or git config projektor.issue)" in result.stderr

    guarded.write("src/b.py")
    guarded.env["PROJEKTOR_GUARD_STRICT"] = "true"
    strict = guarded.commit()
    assert strict.returncode != 0 and "commit refused: not configured" in strict.stderr


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"PROJEKTOR_API_KEY": "pk_wrong"}, "HTTP 401 unauthenticated: The API key is unknown"),
        ({"PROJEKTOR_ISSUE": "999999"}, "HTTP 404 not_found: Issue 999999 does not exist."),
        ({"PROJEKTOR_ISSUE": "seven"}, "PROJEKTOR_ISSUE is 'seven': give the id of the issue"),
        ({"PROJEKTOR_URL": "127.0.0.1:8000"}, "PROJEKTOR_URL is '127.0.0.1:8000'"),
        ({"PROJEKTOR_API_KEY": "pk_é"}, "PROJEKTOR_API_KEY is not an API key"),
    ],
)
@LIVE
def test_a_misconfiguration_is_refused_with_the_reason(guarded, mine_and_theirs, change, said):
    mine, _, _ = mine_and_theirs
    guarded.env.update({"PROJEKTOR_ISSUE": str(mine.pk), **change})
    guarded.write("src/a.py")

    result = guarded.commit()

    assert result.returncode != 0
    assert "projektor pre-commit: commit refused:" in result.stderr and said in result.stderr


def test_nothing_staged_needs_no_server(checkout):
    hooks = checkout.root / ".git" / "hooks"
    (hooks / "pre-commit").write_bytes(HOOK.read_bytes())
    (hooks / "pre-commit").chmod(0o755)
    checkout.env.update(PROJEKTOR_URL=f"http://127.0.0.1:{closed_port()}", PROJEKTOR_ISSUE="1")
    checkout.env.update(PROJEKTOR_API_KEY="k", PROJEKTOR_GUARD_STRICT="1")
    result = checkout.git("commit", "-q", "--allow-empty", "-m", "empty", check=False)
    assert result.returncode == 0 and result.stderr == ""


@LIVE
def test_the_script_runs_isolated_from_site_packages(guarded, workspace, mine_and_theirs):
    mine, theirs, coder = mine_and_theirs
    claim_paths(workspace, theirs, ["src/a.py"], coder)
    guarded.env["PROJEKTOR_ISSUE"] = str(mine.pk)
    guarded.write("src/a.py")

    result = guarded.run_hook("-I", "-S")

    assert result.returncode == 1
    assert "src/a.py" in result.stderr and "agent coder-2" in result.stderr


@LIVE
def test_the_hook_honours_core_hooks_path(checkout, live_server, workspace, mine_and_theirs):
    """The documented install command puts the hook where git looks for it."""
    mine, theirs, coder = mine_and_theirs
    claim_paths(workspace, theirs, ["src/a.py"], coder)
    checkout.git("config", "core.hooksPath", "tools/hooks")
    install = (
        'hook="$(git rev-parse --git-path hooks)/pre-commit" && curl -fsS --create-dirs '
        f'-o "$hook" {live_server.url}/guard/pre-commit && chmod +x "$hook"'
    )
    if subprocess.run(["sh", "-c", "command -v curl"], capture_output=True).returncode:
        pytest.skip("needs curl")
    subprocess.run(["sh", "-c", install], cwd=checkout.root, env=checkout.env, check=True)
    assert (checkout.root / "tools" / "hooks" / "pre-commit").read_bytes() == HOOK.read_bytes()
    _, key = ApiKey.issue(workspace, "guard")
    checkout.env.update(
        PROJEKTOR_URL=live_server.url, PROJEKTOR_API_KEY=key, PROJEKTOR_ISSUE=str(mine.pk)
    )
    checkout.write("src/a.py")

    result = checkout.commit()

    assert result.returncode != 0 and f"issue {theirs.pk}, agent coder-2" in result.stderr


# --- a server that answers 5xx or 429 ------------------------------------------------------


@pytest.fixture
def failing_server() -> Iterator[tuple[str, list[int]]]:
    """A stand-in server answering each POST with the next status of ``statuses``."""
    statuses: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status = statuses.pop(0)
            body = json.dumps({"code": "unavailable", "detail": "Database down."}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", statuses
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_failing_server_warns_and_strict_refuses(checkout, failing_server, status):
    url, statuses = failing_server
    checkout.env.update(PROJEKTOR_URL=url, PROJEKTOR_API_KEY="k", PROJEKTOR_ISSUE="1")
    checkout.write("src/a.py")

    statuses.append(status)
    lenient = checkout.run_hook()
    assert lenient.returncode == 0
    assert f"warning: the server at {url}/api/v1/file-claims/check/ answered HTTP {status}" in (
        lenient.stderr
    )

    statuses.append(status)
    checkout.env["PROJEKTOR_GUARD_STRICT"] = "yes"
    strict = checkout.run_hook()
    assert strict.returncode == 1 and "commit refused: the server at" in strict.stderr
