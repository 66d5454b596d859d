"""The pre-commit guard's script: the git hook that calls ``POST /file-claims/check/``,
with the standard library only, run isolated from site-packages, and installed
where git looks for it."""

import ast
import io
import subprocess
import sys
import zipfile

import pytest

from coordination.models import ApiKey
from projektor_agent import guard as pre_commit
from tests.coordination.conftest import claim_paths
from tests.coordination.guard.guard_helpers import (
    HOOK,
    LIVE,
)

# --- the script --------------------------------------------------------------------------


def test_the_script_imports_only_the_standard_library():
    """The hook is the command's zipapp: its modules import the standard library and
    the package itself, nothing else."""
    archive = zipfile.ZipFile(io.BytesIO(HOOK.read_bytes()))
    modules = set()
    for name in archive.namelist():
        for node in ast.walk(ast.parse(archive.read(name).decode("utf-8"))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, "no relative imports"
                modules.add((node.module or "").split(".")[0])
    assert "projektor_agent/guard.py" in archive.namelist()
    assert modules and modules - {"projektor_agent"} <= set(sys.stdlib_module_names)


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
