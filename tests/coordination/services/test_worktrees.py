"""Lock-mode resolution: the decision table of invariant 10 (lock mode per run), one test per
row."""

import textwrap
from pathlib import Path

import pytest
from mypy import api as mypy_api

from coordination.errors import InvalidInput, WorktreeUnresolved
from coordination.models import Issue, Run, Worktree
from coordination.services import worktrees
from coordination.services.worktrees import (
    ExclusiveLock,
    NoLock,
    WorktreeConfigurationError,
    resolve_run_lock,
)

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def make_worktree(workspace):
    def make(slug, ws=None):
        return Worktree.objects.create(workspace=ws or workspace, slug=slug, name=slug.title())

    return make


# --- the decision table -----------------------------------------------------------


def test_explicit_issue_worktree_is_exclusive_on_it(make_issue, agent, project, make_worktree):
    explicit, bound, primary = make_worktree("explicit"), make_worktree("bound"), make_worktree("p")
    agent.worktree = bound
    agent.save()
    project.primary_worktree = primary
    project.save()
    issue = make_issue(worktree=explicit, requires_filesystem=True)

    assert resolve_run_lock(issue=issue, agent=agent) == ExclusiveLock(worktree=explicit)


def test_explicit_issue_worktree_wins_even_without_requires_filesystem(
    make_issue, agent, make_worktree
):
    explicit = make_worktree("explicit")
    issue = make_issue(worktree=explicit, requires_filesystem=False)

    assert resolve_run_lock(issue=issue, agent=agent) == ExclusiveLock(worktree=explicit)


def test_requires_filesystem_uses_the_agents_worktree_before_the_primary(
    make_issue, agent, project, make_worktree
):
    bound, primary = make_worktree("bound"), make_worktree("primary")
    agent.worktree = bound
    agent.save()
    project.primary_worktree = primary
    project.save()
    issue = make_issue(requires_filesystem=True)

    assert resolve_run_lock(issue=issue, agent=agent) == ExclusiveLock(worktree=bound)


def test_requires_filesystem_falls_back_to_the_projects_primary(
    make_issue, agent, project, make_worktree
):
    primary = make_worktree("primary")
    project.primary_worktree = primary
    project.save()
    issue = make_issue(requires_filesystem=True)

    assert resolve_run_lock(issue=issue, agent=agent) == ExclusiveLock(worktree=primary)


def test_requires_filesystem_with_nothing_configured_is_a_configuration_error(
    make_issue, agent, make_worktree
):
    # A worktree exists in the workspace, but nothing names it: no fallback to it.
    make_worktree("somewhere")
    issue = make_issue(requires_filesystem=True)

    with pytest.raises(WorktreeConfigurationError) as raised:
        resolve_run_lock(issue=issue, agent=agent)

    error = raised.value
    assert isinstance(error, WorktreeUnresolved)
    assert (error.status, error.code) == (422, "worktree_unresolved")
    assert "primary worktree" in error.detail and "coder-1" in error.detail


def test_no_filesystem_is_no_lock_even_with_worktrees_configured(
    make_issue, agent, project, make_worktree
):
    agent.worktree = make_worktree("bound")
    agent.save()
    project.primary_worktree = make_worktree("primary")
    project.save()
    issue = make_issue(requires_filesystem=False)

    lock = resolve_run_lock(issue=issue, agent=agent)

    assert lock == NoLock()
    assert lock.lock_mode == Run.LockMode.NONE and not hasattr(lock, "worktree")


def test_a_worktree_of_another_workspace_is_never_locked(
    project, agent, other_workspace, make_worktree
):
    """The database refuses such a link (test_workspace_links); resolution refuses
    it too, as a second layer, for an issue built in memory."""
    foreign = make_worktree("foreign", ws=other_workspace)
    issue = Issue(workspace=project.workspace, project=project, title="Foreign", worktree=foreign)

    with pytest.raises(WorktreeConfigurationError):
        resolve_run_lock(issue=issue, agent=agent)


def test_resolutions_are_frozen(make_worktree):
    lock = ExclusiveLock(worktree=make_worktree("a"))
    with pytest.raises(AttributeError):
        lock.worktree = make_worktree("b")  # type: ignore[misc]
    assert lock.lock_mode == Run.LockMode.EXCLUSIVE


def test_lock_fields_map_each_resolution_to_run_columns(make_worktree):
    tree = make_worktree("a")
    assert worktrees.lock_fields(ExclusiveLock(worktree=tree)) == {
        "lock_mode": "exclusive",
        "worktree": tree,
    }
    assert worktrees.lock_fields(NoLock()) == {"lock_mode": "none", "worktree": None}


def test_mypy_rejects_reading_a_worktree_off_an_unnarrowed_resolution(tmp_path):
    snippet = tmp_path / "uses_resolution.py"
    snippet.write_text(
        textwrap.dedent(
            """
            from coordination.services.worktrees import ExclusiveLock, RunLock

            def unchecked(lock: RunLock) -> object:
                return lock.worktree

            def narrowed(lock: RunLock) -> object:
                if isinstance(lock, ExclusiveLock):
                    return lock.worktree
                return None
            """
        )
    )

    out, _, status = mypy_api.run(
        [
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "cache"),
            str(snippet),
        ]
    )

    assert status == 1, out
    # Only the snippet's own lines: the modules it imports are checked by `make lint`.
    errors = [line for line in out.splitlines() if line.startswith(f"{snippet}:")]
    assert len(errors) == 1, out
    assert ':5: error: Item "NoLock"' in errors[0] and '"worktree"' in errors[0]


# --- worktrees ----------------------------------------------------------------------


def test_create_worktree(workspace):
    tree = worktrees.create_worktree(
        workspace=workspace, slug="main", name="Main", path="/srv/main", branch="main"
    )
    assert Worktree.objects.get(pk=tree.pk).path == "/srv/main"


def test_duplicate_worktree_slug_is_invalid(workspace):
    worktrees.create_worktree(workspace=workspace, slug="main", name="Main")
    with pytest.raises(InvalidInput):
        worktrees.create_worktree(workspace=workspace, slug="main", name="Again")
    assert Worktree.objects.filter(workspace=workspace).count() == 1


def test_the_same_slug_may_exist_in_another_workspace(workspace, other_workspace):
    worktrees.create_worktree(workspace=workspace, slug="main", name="Main")
    worktrees.create_worktree(workspace=other_workspace, slug="main", name="Main")
    assert Worktree.objects.filter(slug="main").count() == 2
