"""The demo's work graph: a few features split into issues that wait for one another
(the model, the API on it, the page on the API), and an epic with its children,
created and linked through the services as an orchestrator would (invariant 16 (the work graph)).
The fleet reads the ready queue, which leaves blocked issues out, so it takes each chain
in order by itself; each issue names the paths it expects to touch, so the queue can
steer agents away from files others hold."""

from coordination.models import Project, Workspace
from coordination.services import graph, projects

FEATURES = ("saved searches", "audit trail", "team invites")
STEPS = (  # title, the path it expects to touch (under the feature's directory)
    ("Add the {} model", "models.py"),
    ("Add the API for {}", "api/"),
    ("Add the page for {}", "templates/"),
)
EPIC = "Billing, the whole of it"
EPIC_CHILDREN = ("Plans and prices", "Invoices", "Payment retries", "The billing page")


def create(workspace: Workspace, project: Project, title: str, paths: list[str]) -> int:
    fields = {
        "project": project.key,
        "title": title,
        "description": f"Done when {title.lower()} is merged with its tests.",
        "status": "todo",
        "paths": paths,
    }
    return projects.create_issue(workspace=workspace, fields=fields).pk


def link_work(workspace: Workspace) -> None:
    """The chains, one per feature, in the workspace's projects in turn; the epic in
    the first project, parent of its children."""
    chosen = list(Project.objects.filter(workspace=workspace).order_by("key"))
    for number, feature in enumerate(FEATURES):
        project = chosen[number % len(chosen)]
        where = f"{project.key}/{feature.replace(' ', '_')}"
        chain = [
            create(workspace, project, title.format(feature), [f"{where}/{path}"])
            for title, path in STEPS
        ]
        for blocker, blocked in zip(chain, chain[1:], strict=False):
            graph.link_issues(
                workspace=workspace, source_id=blocker, type="blocks", target_id=blocked
            )
    epic = create(workspace, chosen[0], EPIC, [])
    for title in EPIC_CHILDREN:
        child = create(workspace, chosen[0], title, [f"{chosen[0].key}/billing/"])
        graph.link_issues(workspace=workspace, source_id=epic, type="parent_of", target_id=child)
