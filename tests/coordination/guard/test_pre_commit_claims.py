"""The pre-commit guard: the git hook that calls ``POST /file-claims/check/``, refusing
a commit that touches another issue's claimed files (or a file under its claimed
directory) and letting free paths and the issue's own claims through.

The hook tests build a real git repository in ``tmp_path``, install the hook as
downloaded from the live server, and run ``git commit`` against that server."""

import pytest

from coordination.models import ClaimConflict, FileClaim
from coordination.services import keys
from tests.conftest import expire
from tests.coordination.conftest import claim_paths
from tests.coordination.guard.guard_helpers import (
    LIVE,
)

# --- the hook in a real repository ---------------------------------------------------------


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
    """It only checks (invariant 13 (the key is the actor): a read key may, and writes nothing)."""
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
    """Invariant 11 (overlap): ``src/api/`` holds every file under it, at any depth, including
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
