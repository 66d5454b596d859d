"""Fuzzing the API against its own OpenAPI schema: every operation, with data that
fits the schema and data that does not. No answer may be a 5xx, and every answer
the schema describes must match it. The example count is bounded to keep
``make test`` short; raise ``FUZZ_EXAMPLES`` for a deeper run."""

import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

from coordination.models import ApiKey, Issue, Project, Workspace
from coordination.services import agents

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))
CONFIG = SchemathesisConfig.from_dict(
    {"generation": {"mode": "all", "max-examples": EXAMPLES, "deterministic": True}}
)
# The schema endpoint is public and reads no table: it can load at collection time.
# The event stream is left out: an answer is a stream the server holds open for up to a
# minute, and its frames are checked by tests/coordination/api/test_events*.py.
schema = schemathesis.openapi.from_wsgi(
    "/api/v1/schema/", get_wsgi_application(), config=CONFIG
).exclude(path="/api/v1/events/stream/")


@pytest.fixture(params=[ApiKey.Kind.FLEET, ApiKey.Kind.AGENT, ApiKey.Kind.READ])
def fuzz_key(request, db):
    """A workspace with a little of everything, and a key of each kind (invariant 13 (the key is the
    actor)): a refusal, like any other answer, is a 4xx in the schema's shape, never a 5xx."""
    workspace = Workspace.objects.create(slug="fuzz", name="Fuzz")
    project = Project.objects.create(workspace=workspace, key="core", name="Core")
    Issue.objects.create(workspace=workspace, project=project, title="T", description="D")
    session = agents.register_session(workspace=workspace, agent_name="coder-1")
    agent = session.agent if request.param == ApiKey.Kind.AGENT else None
    _, raw = ApiKey.issue(workspace, "fuzz", kind=request.param, agent=agent)
    return raw


@pytest.fixture
def connection_kept_across_requests():
    """As Django's test client does: the WSGI app leaves the test's connection open,
    so the test runs in one transaction rolled back at its end (instead of every table
    truncated after it, a third of the test's time on PostgreSQL)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.django_db
@pytest.mark.usefixtures("connection_kept_across_requests")
@schema.parametrize()
@settings(suppress_health_check=list(HealthCheck), deadline=None)
def test_api_never_fails_and_keeps_its_schema(case, fuzz_key, django_capture_on_commit_callbacks):
    # What a commit would run (the event feed's wake-up) runs after each call: its
    # failure fails the test as it would fail the request.
    with django_capture_on_commit_callbacks(execute=True):
        case.call_and_validate(
            headers={"Authorization": f"Bearer {fuzz_key}"},
            checks=[not_a_server_error, response_schema_conformance, content_type_conformance],
        )
