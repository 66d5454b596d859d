"""The operators' admin: every list loads, the logs are read-only, actions use services."""

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import reverse

from coordination.models import AgentSession, ClaimConflict, FileClaim, IssueLease, WipCapDenial
from coordination.services import leases
from tests.conftest import expire

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client):
    user = get_user_model().objects.create_superuser("ops", password="pw-ops-123")
    client.force_login(user)
    return client


def changelist(model):
    return reverse(f"admin:coordination_{model._meta.model_name}_changelist")


@pytest.mark.parametrize(
    "model", [m for m in admin.site._registry if m._meta.app_label == "coordination"]
)
def test_every_changelist_loads(operator, model, issue, make_session):
    leases.claim_issue(workspace=issue.workspace, issue_id=issue.pk, session_id=make_session().pk)
    assert operator.get(changelist(model)).status_code == 200


def test_live_filter_uses_the_ttl(operator, make_session):
    make_session("live-one")
    expire(make_session("stale-one"))
    page = operator.get(changelist(AgentSession) + "?live=yes").content.decode()
    assert "live-one" in page and "stale-one" not in page


@pytest.mark.parametrize("model", [WipCapDenial, ClaimConflict])
def test_contention_logs_are_read_only(operator, model):
    model_admin = admin.site._registry[model]
    request = operator.get(changelist(model)).wsgi_request
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)


def test_end_sessions_action_releases_as_agent_ended(operator, workspace, issue, make_session):
    session = make_session()
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    operator.post(
        changelist(AgentSession), {"action": "end_sessions", "_selected_action": [session.pk]}
    )
    assert IssueLease.objects.get().release_reason == "agent_ended"


def test_force_release_action_records_overridden(operator, workspace, issue, make_session):
    session = make_session()
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk).lease
    operator.post(
        changelist(IssueLease), {"action": "force_release", "_selected_action": [lease.pk]}
    )
    assert IssueLease.objects.get().release_reason == "overridden"


def test_force_release_of_file_claims_records_overridden(operator, workspace, issue):
    claim = FileClaim.objects.create(workspace=workspace, issue=issue, path="src/a.py")
    operator.post(
        changelist(FileClaim), {"action": "force_release", "_selected_action": [claim.pk]}
    )
    assert FileClaim.objects.get().release_reason == "overridden"
