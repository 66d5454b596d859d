"""backfill_requires_filesystem: positive evidence only, the seed's matching exactly
(role by substring in any case, department by equality), dry run, idempotence."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from coordination.models import Agent, Issue, Project
from coordination.services import leases
from tests.conftest import expire

pytestmark = pytest.mark.django_db


def backfill(*args):
    out = StringIO()
    call_command("backfill_requires_filesystem", *args, stdout=out)
    return out.getvalue().splitlines()


def marked():
    return set(Issue.objects.filter(requires_filesystem=True).values_list("pk", flat=True))


@pytest.fixture
def make_agent(workspace):
    def make(name, role="", department=""):
        return Agent.objects.create(
            workspace=workspace, name=name, role=role, department=department
        )

    return make


@pytest.fixture
def imported(workspace, make_issue, make_agent, make_session):
    """One issue per kind of evidence, and the counter-examples beside them."""
    engineer = make_agent("eng", role="Senior Engineer")
    engineering = make_agent("eng-dept", role="Manager", department="engineering")
    spelled = make_agent("eng-spelled", role="Manager", department=" Engineering ")
    marketer = make_agent("mkt", role="Marketing Manager", department="Marketing")
    director = make_agent("dir", role="Director of Growth")  # "cto" inside a word
    live, dead = make_session("live-holder"), make_session("dead-holder")

    issues = {
        "leased": make_issue(title="leased", status="in_progress"),
        "engineer_backlog": make_issue(title="eng backlog", assignee=engineer),
        "department_todo": make_issue(title="dept todo", status="todo", assignee=engineering),
        "done_engineer": make_issue(title="done", status="done", assignee=engineer),
        "in_progress_engineer": make_issue(title="wip", status="in_progress", assignee=engineer),
        "marketing": make_issue(title="campaign", assignee=marketer),
        "spelled_department": make_issue(title="not ===", assignee=spelled),
        "director": make_issue(title="growth plan", assignee=director),
        "unassigned": make_issue(title="nobody"),
        "dead_lease": make_issue(title="dead lease"),
        "already": make_issue(title="already", requires_filesystem=True, assignee=engineer),
    }
    leases.claim_issue(workspace=workspace, issue_id=issues["leased"].pk, session_id=live.pk)
    leases.claim_issue(workspace=workspace, issue_id=issues["dead_lease"].pk, session_id=dead.pk)
    expire(dead)
    return issues


EXPECTED = {"leased", "engineer_backlog", "department_todo", "director"}


def test_backfill_marks_only_issues_with_evidence_and_prints_it(imported):
    lines = backfill()

    assert marked() == {imported[k].pk for k in EXPECTED | {"already"}}
    assert len(lines) == len(EXPECTED) + 1
    by_issue = {line.split()[1]: line for line in lines[:-1]}
    assert set(by_issue) == {str(imported[k].pk) for k in EXPECTED}
    assert "live lease held by session" in by_issue[str(imported["leased"].pk)]
    assert "'Senior Engineer'" in by_issue[str(imported["engineer_backlog"].pk)]
    assert "department 'engineering'" in by_issue[str(imported["department_todo"].pk)]
    assert "'Director of Growth'" in by_issue[str(imported["director"].pk)]
    assert lines[-1] == "set requires_filesystem on 4 issue(s)"


def test_counter_examples_are_left_alone(imported):
    backfill()

    untouched = set(imported) - EXPECTED - {"already"}
    assert untouched == {
        "done_engineer",
        "in_progress_engineer",
        "marketing",
        "spelled_department",
        "unassigned",
        "dead_lease",
    }
    for key in untouched:
        assert not Issue.objects.get(pk=imported[key].pk).requires_filesystem, key


def test_dry_run_prints_the_same_and_changes_nothing(imported):
    before = marked()

    dry = backfill("--dry-run")

    assert marked() == before == {imported["already"].pk}
    assert dry[-1] == "dry run: would set requires_filesystem on 4 issue(s)"
    assert dry[:-1] == backfill()[:-1]


def test_second_run_changes_nothing(imported):
    backfill()
    after_first = marked()

    assert backfill() == ["set requires_filesystem on 0 issue(s)"]
    assert marked() == after_first


@pytest.mark.parametrize(
    "role",
    [
        "CTO",
        "engineer",
        "Staff Software Engineer",
        "Backend developer",
        "DevOps lead",
        "SRE",
        # The seed's expression matches inside words, in any case.
        "Director",
        "Engineering Manager",
        "Developers' advocate",
        "presre",
    ],
)
def test_roles_containing_an_engineering_word_match(make_issue, make_agent, role):
    issue = make_issue(assignee=make_agent("a", role=role))

    backfill()

    assert Issue.objects.get(pk=issue.pk).requires_filesystem


# "\u017fre": the long s, which Unicode case folding makes an s, as /i alone does not.
@pytest.mark.parametrize("role", ["Designer", "Product owner", "Dev ops", "\u017fre", ""])
def test_roles_without_an_engineering_word_do_not_match(make_issue, make_agent, role):
    issue = make_issue(assignee=make_agent("a", role=role))

    assert backfill() == ["set requires_filesystem on 0 issue(s)"]

    assert not Issue.objects.get(pk=issue.pk).requires_filesystem


@pytest.mark.parametrize(
    ("department", "matches"),
    [
        ("engineering", True),
        ("Engineering", False),
        (" engineering", False),
        ("engineering ", False),
        ("software engineering", False),
    ],
)
def test_the_department_matches_only_when_it_is_exactly_engineering(
    make_issue, make_agent, department, matches
):
    issue = make_issue(assignee=make_agent("a", role="Manager", department=department))

    backfill()

    assert Issue.objects.get(pk=issue.pk).requires_filesystem is matches


def test_workspace_option_limits_the_backfill(workspace, other_workspace, make_issue, make_agent):
    ours = make_issue(assignee=make_agent("a", role="Engineer"))
    project = Project.objects.create(workspace=other_workspace, key="x", name="X")
    theirs_agent = Agent.objects.create(workspace=other_workspace, name="b", role="Engineer")
    theirs = make_issue(project=project, assignee=theirs_agent)

    lines = backfill("--workspace", other_workspace.slug)

    assert marked() == {theirs.pk}
    assert lines[-1] == "set requires_filesystem on 1 issue(s)"
    assert not Issue.objects.get(pk=ours.pk).requires_filesystem


def test_unknown_workspace_is_a_command_error(workspace, issue):
    with pytest.raises(CommandError):
        backfill("--workspace", "nope")
    assert marked() == set()
