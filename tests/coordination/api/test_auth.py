"""Every API endpoint, every allowed method, against three callers who must get nothing:
no key (401), a revoked key (401), and another workspace's key (invariant 9: 404 for
the first workspace's objects, lists without them, writes that change none of them).
All answers are JSON. Also: the production settings pass ``check --deploy``.
"""

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.urls import URLPattern, reverse
from django.utils import timezone
from rest_framework.test import APIClient

from coordination.api import urls as api_urls
from coordination.errors import CoordinationError
from coordination.models import ApiKey, Issue, IssueLease, Project, Workspace
from coordination.services import agents, file_claims, leases, messages, worktrees
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


def enumerate_routes() -> list[Route]:
    """Each URL pattern of coordination.api.urls with each method its view allows."""
    routes = []
    for pattern in api_urls.urlpatterns:
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
    run = worktrees.dispatch_run(workspace=workspace, session_id=session.pk, issue_id=first.pk)
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
    ids = {
        "sessions": session.pk,
        "projects": project.pk,
        "issues": first.pk,
        "leases": lease.pk,
        "runs": run.pk,
        "file-claims": claimed.claims[0].pk,
    }
    return {"ids": ids, "session": session.pk, "issue": first.pk, "path": path, "api": api}


def body_for(route: Route, world: dict[str, Any]) -> dict[str, Any]:
    """A well-formed body that names the first workspace's objects wherever it can."""
    issue, session, path = world["issue"], world["session"], world["path"]
    bodies: dict[str, dict[str, Any]] = {
        "work-start": {"agent": f"{MARK}-agent", "issue": issue, "paths": [path]},
        "work-finish": {"session": session, "issue": issue, "to": "in_review"},
        "session-list": {"agent": f"{MARK}-agent"},
        "session-end": {},
        "session-heartbeat": {},
        "project-list": {"key": f"{MARK}core", "name": f"{MARK} core"},
        "project-detail": {"name": f"{MARK} renamed", "agent_wip_limit": 9},
        "issue-list": {"project": f"{MARK}core", "title": f"{MARK} new"},
        "issue-detail": {"title": f"{MARK} renamed"},
        "issue-claim": {"session": session},
        "issue-release": {"session": session},
        "issue-transition": {"to": "cancelled"},
        "worktree-list": {"slug": f"{MARK}-tree", "name": MARK},
        "run-list": {"session": session, "issue": issue},
        "run-finish": {"outcome": "failed"},
        "file-claim-list": {"issue": issue, "paths": [path], "force": True},
        "file-claim-check": {"issue": issue, "paths": [path]},
        "file-claim-release": {"issue": issue},
        "message-list": {"scope": f"issue:{issue}", "body": f"{MARK} spoofed"},
    }
    return bodies[route.name]


def call(client: APIClient, route: Route, world: dict[str, Any]) -> Any:
    kwargs: dict[str, Any] = {}
    if "pk" in route.kwargs:
        kwargs["pk"] = world["ids"][route.name.rsplit("-", 1)[0] + "s"]
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
def test_another_workspace_sees_and_changes_nothing(route, world, workspace, stranger_api):
    before = snapshot(workspace)
    response = call(stranger_api, route, world)
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    if "pk" in route.kwargs:
        assert_json_error(response, 404, "not_found")
        assert MARK not in response.content.decode().lower()
    elif route.method == "get":
        assert response.status_code == 200, response.content[:300]
        assert MARK not in response.content.decode().lower()
        body = response.json()
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


# --- check --deploy -------------------------------------------------------------------

PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": "k3y-" + "x7Qp2Lm9Zr4Vt8Nw1Ys6Hb0Jd5Fc3Gk" * 2,
    "ALLOWED_HOSTS": "tracker.example.com",
    "PROJEKTOR_HTTPS": "true",
}


def deploy_check(**env: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PROJEKTOR_", "SECURE_")) and k not in {"DEBUG", "SECRET_KEY"}
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=Path(settings.BASE_DIR),
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_settings_pass_check_deploy():
    result = deploy_check(**PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_flags_a_site_not_declared_https():
    """Without PROJEKTOR_HTTPS (plain http, as for local use) the check says what is off."""
    result = deploy_check(**{**PRODUCTION, "PROJEKTOR_HTTPS": "false"})
    assert result.returncode != 0
    flagged = {w for w in ("W004", "W008", "W012", "W016") if f"security.{w}" in result.stderr}
    assert flagged == {"W004", "W008", "W012", "W016"}, result.stderr
