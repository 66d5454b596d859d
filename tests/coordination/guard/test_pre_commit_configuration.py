"""The pre-commit guard's configuration: git config and the environment (which wins),
a missing or wrong setting warned of, or refused with the reason.

The hook tests build a real git repository in ``tmp_path``, install the hook as
downloaded from the live server, and run ``git commit`` against that server."""

import pytest

from tests.coordination.conftest import claim_paths
from tests.coordination.guard.guard_helpers import (
    LIVE,
)

# --- the hook in a real repository ---------------------------------------------------------


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
