"""One overlap rule, held to one table: the server's (``coordination.paths``) and the
agent command's copy of it (``projektor_agent.scan``, which must stay standard library
only and is served as one file, so the two share their cases, not their code)."""

import json
from pathlib import Path

import pytest

from coordination.paths import normalise_path, overlaps
from projektor_agent.scan import covered

TABLE = json.loads((Path(__file__).parents[1] / "overlap_cases.json").read_text("utf-8"))
CASES = [pytest.param(*case[:3], id=case[3]) for case in TABLE["cases"]]


@pytest.mark.parametrize(("path", "held", "expected"), CASES)
def test_the_server_rule(path, held, expected):
    assert normalise_path(path, literal=True) == path
    assert normalise_path(held, literal=True) == held
    assert overlaps(path, held) is expected
    assert overlaps(held, path) is expected  # the rule is symmetric


@pytest.mark.parametrize(("path", "held", "expected"), CASES)
def test_the_agent_rule(path, held, expected):
    """A changed file is covered (not claimed again) exactly when the server says the
    held claim overlaps it; the agent never takes a directory as held by a claim
    below it (only the server's symmetric rule says those overlap)."""
    if path.endswith("/"):
        assert covered(path, {held}) <= expected
    else:
        assert covered(path, {held}) is expected
    assert covered(path, {held, "elsewhere/", "other.py"}) is covered(path, {held})


def test_the_table_covers_both_kinds_and_both_answers():
    files = [case for case in TABLE["cases"] if not case[0].endswith("/")]
    assert {case[2] for case in files} == {True, False}
    assert len(files) >= 20
