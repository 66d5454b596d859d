"""The rows a request names, found in its workspace or refused: a URL id (or the
``issue`` of a body) that is not there is 404; any other unknown reference in a body
is 400 (docs/design.md, error shape)."""

from coordination.errors import InvalidInput, NotFound
from coordination.models import Agent, AgentSession, Issue, Project, Run, Workspace, Worktree
from coordination.selectors.runs import runs


def get_issue(workspace: Workspace, issue_id: int, *, for_update: bool = False) -> Issue:
    rows = Issue.objects.filter(workspace=workspace, pk=issue_id)
    if for_update:  # read-modify-write inside a transaction; NO KEY lets rows that
        # point at the issue (claims, leases) pass their foreign-key checks.
        rows = rows.select_for_update(of=("self",), no_key=True)
    issue = rows.select_related("project").first()
    if issue is None:
        raise NotFound(f"Issue {issue_id} does not exist.")
    return issue


def get_session(workspace: Workspace, session_id: int, *, in_url: bool = False) -> AgentSession:
    session = (
        AgentSession.objects.filter(workspace=workspace, pk=session_id)
        .select_related("agent")
        .first()
    )
    if session is None:
        error = NotFound if in_url else InvalidInput
        raise error(f"Session {session_id} does not exist.")
    return session


def get_worktree(workspace: Workspace, slug: str) -> Worktree:
    worktree = Worktree.objects.filter(workspace=workspace, slug=slug).first()
    if worktree is None:
        raise InvalidInput(f"Worktree {slug!r} does not exist.")
    return worktree


def named(field: str | None) -> dict[str, str]:
    """The ``field`` of an error, when the caller knows which input named it."""
    return {"field": field} if field else {}


def get_agent(workspace: Workspace, name: str, *, field: str | None = None) -> Agent:
    agent = Agent.objects.filter(workspace=workspace, name=name).first()
    if agent is None:
        raise InvalidInput(f"Agent {name!r} does not exist.", **named(field))
    return agent


def get_project(workspace: Workspace, key: str, *, field: str | None = None) -> Project:
    project = Project.objects.filter(workspace=workspace, key=key).first()
    if project is None:
        raise InvalidInput(f"Project {key!r} does not exist.", **named(field))
    return project


def get_run(workspace: Workspace, run_id: int) -> Run:
    run = runs(workspace).filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"Run {run_id} does not exist.")
    return run
