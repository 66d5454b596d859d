"""Every API endpoint, every allowed method, against three callers who must get nothing:
no key (401), a revoked key (401), and another workspace's key (invariant 9 (workspace isolation):
404 for the first workspace's objects, lists without them, writes that change none of them).
All answers are JSON. Also the keys one by one, and a logged-in person's workspace.
"""

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.apps import apps
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from rest_framework.test import APIClient

from coordination.api import urls as api_urls
from coordination.errors import CoordinationError
from coordination.models import ApiKey, Issue, IssueLease, IssueLink, Project, Workspace
from coordination.services import (
    agents,
    file_claims,
    keys,
    landings,
    leases,
    messages,
    resources,
    runs,
    webhooks,
    worktrees,
)
from tests.api_helpers import V1, assert_error
from tests.conftest import make_client

MARK = "acme"  # in every name, path and text of the first workspace: never shown to others


@dataclass(frozen=True)
class Route:
    name: str
    method: str
    kwargs: frozenset[str]  # URL arguments: pk, format

    @property
    def id(self) -> str:
        suffix = ".json" if "format" in self.kwargs else ""
        return f"{self.method.upper()} {self.name}{suffix}"


def api_patterns() -> list[Any]:
    """Each URL pattern included under /api/v1/ (coordination's API and the heatmap's)."""
    return [
        pattern
        for entry in get_resolver().url_patterns
        if isinstance(entry, URLResolver) and str(entry.pattern) == "api/v1/"
        for pattern in entry.url_patterns
    ]


def enumerate_routes() -> list[Route]:
    """Each URL pattern of the API with each method its view allows."""
    routes = []
    for pattern in api_patterns():
        assert isinstance(pattern, URLPattern)
        view = pattern.callback
        view_class = getattr(view, "cls", None) or view.view_class  # type: ignore[attr-defined]
        actions = getattr(view, "actions", None)  # a viewset route: {method: action}
        if actions is None:
            actions = {m: m for m in view_class.http_method_names if m != "options"}
            actions = {m: a for m, a in actions.items() if hasattr(view_class, m)}
        kwargs = frozenset(pattern.pattern.regex.groupindex)
        routes += [Route(str(pattern.name), method, kwargs) for method in actions]
    return routes


ROUTES = enumerate_routes()


@pytest.fixture
def world(workspace: Workspace, api: APIClient) -> dict[str, Any]:
    """The first workspace with one object of each kind, each named with MARK."""
    worktree = worktrees.create_worktree(workspace=workspace, slug=f"{MARK}-tree", name=MARK)
    project = Project.objects.create(
        workspace=workspace, key=f"{MARK}core", name=f"{MARK} core", agent_wip_limit=1
    )

    def issue(title: str) -> Issue:
        return Issue.objects.create(
            workspace=workspace,
            project=project,
            title=title,
            description=f"{MARK}: done when it works",
            requires_filesystem=True,
            worktree=worktree,
        )

    first, second = issue(f"{MARK} first"), issue(f"{MARK} second")
    Issue.objects.filter(pk=second.pk).update(status=Issue.Status.TODO)  # in the ready queue
    session = agents.register_session(workspace=workspace, agent_name=f"{MARK}-agent")
    other = agents.register_session(workspace=workspace, agent_name=f"{MARK}-other")
    run = runs.dispatch_run(workspace=workspace, session_id=session.pk, issue_id=first.pk)
    path = f"src/{MARK}_secret.py"
    claimed = file_claims.claim_files(
        workspace=workspace, issue_id=first.pk, paths=[path], session_id=session.pk
    )
    for refused in (  # a claim conflict and a WIP cap denial, on the record
        lambda: file_claims.claim_files(
            workspace=workspace, issue_id=second.pk, paths=[path], session_id=other.pk
        ),
        lambda: leases.claim_issue(workspace=workspace, issue_id=second.pk, session_id=other.pk),
    ):
        with pytest.raises(CoordinationError):
            refused()
    messages.post_message(workspace=workspace, scope=f"issue:{first.pk}", body=f"{MARK} note")
    lease = IssueLease.objects.get(issue=first, released_at__isnull=True)
    hook = webhooks.create_webhook(workspace=workspace, url=f"http://93.184.216.34/{MARK}")
    webhooks.enqueue(hook.pk)  # a delivery of each event so far
    resources.create_resource(workspace=workspace, name=f"{MARK}-db", capacity=2)
    resources.acquire(workspace=workspace, name=f"{MARK}-db", session_id=session.pk)
    agent_key, _ = keys.mint_key(
        workspace=workspace, name=f"{MARK} key", kind="agent", agent_name=f"{MARK}-agent"
    )
    landing = landings.queue_landing(
        workspace=workspace,
        issue_id=first.pk,
        session_id=session.pk,
        branch=f"{MARK}-branch",
        commit="abcdef1",
        fence=lease.fence,
    )
    batch = landings.take_batch(workspace=workspace, project_key=project.key, session_id=session.pk)
    ids = {
        "landings": landing.pk,
        "keys": agent_key.pk,
        "webhooks": hook.pk,
        "sessions": session.pk,
        "projects": project.pk,
        "issues": first.pk,
        "leases": lease.pk,
        "runs": run.pk,
        "file-claims": claimed.claims[0].pk,
        "resources": f"{MARK}-db",  # a resource's URL names it
        "links": IssueLink.objects.create(
            workspace=workspace, source=first, type="relates_to", target=second
        ).pk,
    }
    return {
        "ids": ids,
        "session": session.pk,
        "issue": first.pk,
        "path": path,
        "api": api,
        "fence": batch.fence,
    }


def body_for(route: Route, world: dict[str, Any]) -> dict[str, Any]:
    """A well-formed body that names the first workspace's objects wherever it can."""
    issue, session, path = world["issue"], world["session"], world["path"]
    bodies: dict[str, dict[str, Any]] = {
        "work-start": {"agent": f"{MARK}-agent", "issue": issue, "paths": [path]},
        "work-finish": {"session": session, "issue": issue, "to": "in_review"},
        "session-list": {"agent": f"{MARK}-agent"},
        "session-end": {},
        "session-heartbeat": {},
        "session-progress": {"note": f"{MARK} moved"},
        "project-list": {"key": f"{MARK}core", "name": f"{MARK} core"},
        "project-detail": {"name": f"{MARK} renamed", "agent_wip_limit": 9},
        "issue-list": {"project": f"{MARK}core", "title": f"{MARK} new"},
        "issue-detail": {"title": f"{MARK} renamed"},
        "issue-claim": {"session": session},
        "issue-release": {"session": session},
        "issue-transition": {"to": "cancelled"},
        "issue-links": {"type": "blocks", "target": issue},
        "issue-link": {},
        "worktree-list": {"slug": f"{MARK}-tree", "name": MARK},
        "run-list": {"session": session, "issue": issue},
        "run-finish": {"outcome": "failed"},
        "file-claim-list": {"issue": issue, "paths": [path], "force": True},
        "file-claim-check": {"issue": issue, "paths": [path]},
        "file-claim-release": {"issue": issue},
        "message-list": {"scope": f"issue:{issue}", "body": f"{MARK} spoofed"},
        "webhook-list": {"url": f"http://93.184.216.34/{MARK}-spoofed"},
        "webhook-detail": {"active": False},
        "key-list": {"name": f"{MARK} key", "kind": "agent", "agent": f"{MARK}-agent"},
        "key-revoke": {},
        "resource-list": {"name": f"{MARK}-ports", "capacity": 4},
        "resource-detail": {"capacity": 3},
        "resource-acquire": {"session": session},
        "resource-release": {"session": session},
        "landing-list": {
            "issue": issue,
            "session": session,
            "branch": f"{MARK}-spoofed",
            "commit": "abcdef2",
            "fence": 1,
        },
        "landing-take": {"session": session, "project": f"{MARK}core"},
        "landing-land": {"session": session, "fence": world["fence"], "commit": "abcdef3"},
        "landing-reject": {"session": session, "fence": world["fence"], "reason": "conflict"},
        "landing-return-batch": {"session": session, "fence": world["fence"]},
    }
    return bodies[route.name]


def call(client: APIClient, route: Route, world: dict[str, Any]) -> Any:
    kwargs: dict[str, Any] = {}
    if "pk" in route.kwargs:
        kwargs["pk"] = world["ids"][route.name.rsplit("-", 1)[0] + "s"]
    if "link" in route.kwargs:
        kwargs["link"] = world["ids"]["links"]
    if "format" in route.kwargs:
        kwargs["format"] = "json"
    url = reverse(route.name, kwargs=kwargs)
    if route.method == "get":
        return client.get(url)
    return getattr(client, route.method)(url, body_for(route, world), format="json")


def snapshot(workspace: Workspace) -> dict[str, list[dict[str, Any]]]:
    """Every row of the workspace, in every model that has one."""
    rows = {"workspace": list(Workspace.objects.filter(pk=workspace.pk).values())}
    for model in apps.get_app_config("coordination").get_models():
        if any(field.name == "workspace" for field in model._meta.fields):
            rows[model._meta.label] = list(
                model._default_manager.filter(workspace=workspace).order_by("pk").values()
            )
    return rows


def assert_json_error(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert body["code"] == code and body["detail"], body


# The stranger's writes that name no object of the first workspace in their URL, and
# what they answer: a new object of the stranger's own (201), or the first
# workspace's objects named in the body are unknown (404 for an issue, else 400).
STRANGER_WRITES = {
    "work-start": 404,
    "work-finish": 404,
    "session-list": 201,
    "project-list": 201,
    "issue-list": 400,
    "worktree-list": 201,
    "run-list": 404,
    "file-claim-list": 404,
    "file-claim-check": 404,
    "file-claim-release": 404,
    "message-list": 400,
    "webhook-list": 201,
    "key-list": 201,  # a key of the stranger's own workspace, for its own agent
    "resource-list": 201,
    "landing-list": 404,  # the body's issue
    "landing-take": 400,  # the body's project
    "landing-return-batch": 400,  # the body's session
}


def test_the_matrix_covers_every_route():
    names = {route.name for route in ROUTES}
    assert {"workflow", "heatmap", "work-start", "work-finish", "issue-claim"} <= names
    for _, _, basename in api_urls.router.registry:
        assert any(name.startswith(f"{basename}-") for name in names), basename
    writes = {r.name for r in ROUTES if r.method != "get" and "pk" not in r.kwargs}
    assert writes == set(STRANGER_WRITES)


@pytest.mark.django_db
@pytest.mark.parametrize("route", ROUTES, ids=lambda route: route.id)
def test_no_key_and_a_revoked_key_get_401(route, world, workspace):
    revoked, raw = ApiKey.issue(workspace, "revoked")
    revoked.revoked_at = timezone.now()
    revoked.save()
    before = snapshot(workspace)
    for client in (APIClient(), make_client(raw)):
        response = call(client, route, world)
        assert_json_error(response, 401, "unauthenticated")
        assert response["WWW-Authenticate"] == "Bearer"
    assert snapshot(workspace) == before


@pytest.mark.django_db
@pytest.mark.parametrize("route", ROUTES, ids=lambda route: route.id)
def test_another_workspace_sees_and_changes_nothing(
    route, world, workspace, stranger_api, settings
):
    before = snapshot(workspace)
    if route.name == "events-stream":  # a stream of the stranger's own events: none
        settings.PROJEKTOR_EVENT_STREAM_SECONDS = 1
        response = call(stranger_api, route, world)
        assert response.status_code == 200
        assert response["Content-Type"] == "text/event-stream"
        frames = b"".join(response.streaming_content).decode()
        assert frames.startswith("retry: ") and "\nid: " not in frames, frames
        assert MARK not in frames.lower()
        assert snapshot(workspace) == before
        return
    response = call(stranger_api, route, world)
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    if "pk" in route.kwargs:
        assert_json_error(response, 404, "not_found")
        assert MARK not in response.content.decode().lower()
    elif route.method == "get":
        assert response.status_code == 200, response.content[:300]
        assert MARK not in response.content.decode().lower()
        body = response.json()
        if route.name == "key-list":  # the stranger's own key, and none of the first's
            assert [key["workspace"] for key in body["results"]] == ["globex"]
            body["results"] = []
        if "results" in body:
            assert body["results"] == []
            # The owner's key does see its own rows here: the check above is not empty.
            owner = call(world["api"], route, world).json()
            assert owner["results"] and MARK in json.dumps(owner).lower()
        if route.name == "heatmap":
            assert body["total"] == 0 and body["nodes"] == []
    else:
        expected = STRANGER_WRITES[route.name]
        assert response.status_code == expected, (expected, response.content[:300])
        if expected >= 400:
            assert response.json()["code"] in {"invalid", "not_found"}
    assert snapshot(workspace) == before


# --- keys, one by one, and a logged-in person -----------------------------------------


@pytest.mark.django_db
def test_missing_key_is_401(workspace):
    assert_error(APIClient().get(f"{V1}/issues/"), 401, "unauthenticated")


@pytest.mark.django_db
def test_unknown_key_is_401(workspace):
    assert_error(make_client("pk_nope").get(f"{V1}/issues/"), 401, "unauthenticated")


@pytest.mark.django_db
def test_revoked_key_is_401(workspace):
    key, raw = ApiKey.issue(workspace)
    key.revoked_at = timezone.now()
    key.save()
    assert_error(make_client(raw).get(f"{V1}/issues/"), 401, "unauthenticated")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "header",
    [
        lambda raw: f"Bearer {raw}",
        lambda raw: f"bearer {raw}",
        lambda raw: f"Bearer  {raw} ",
        lambda raw: f"Bearer {raw}".encode("latin-1"),  # what a test client may pass
    ],
    ids=["as-sent", "scheme-in-lower-case", "spaces-around-the-key", "bytes"],
)
def test_the_key_is_read_from_the_header_as_sent(workspace, header):
    _, raw = ApiKey.issue(workspace)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header(raw))
    assert client.get(f"{V1}/issues/").status_code == 200


@pytest.mark.django_db
def test_wrong_scheme_is_401(workspace):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token abc")
    assert_error(client.get(f"{V1}/issues/"), 401, "unauthenticated")


@pytest.mark.django_db
def test_logged_in_non_member_gets_404(charlie, make_issue):
    make_issue()
    client = APIClient()
    client.force_login(charlie)
    response = client.get(f"{V1}/issues/", headers={"X-Projektor-Workspace": "acme"})
    assert_error(response, 404, "not_found")
