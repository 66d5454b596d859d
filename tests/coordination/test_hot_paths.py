"""The agents' hot paths are SQL with hand-built instances and once-bound output
fields: they must give exactly what the ORM and DRF's own rendering give."""

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from coordination import selectors
from coordination.api.serializers import (
    ClaimedFilesSerializer,
    FieldsBoundOnce,
    FileClaimSerializer,
    IssueSerializer,
    LeaseSerializer,
    SessionSerializer,
)
from coordination.models import ApiKey, FileClaim, Worktree
from coordination.services import agents, file_claims, keys, leases
from projektor.settings import env_rate
from tests.api_helpers import V1

pytestmark = pytest.mark.django_db


def drf_rendering(serializer: Any, instance: Any) -> Any:
    """What DRF's own ``to_representation`` gives, with per-instance fields."""
    base = next(c for c in type(serializer).__mro__[1:] if c is not FieldsBoundOnce)
    return base.to_representation(serializer, instance)


def test_claims_come_back_as_the_orm_reads_them(workspace, issue, make_session):
    session = make_session("ada")
    claimed = file_claims.claim_files(
        workspace=workspace,
        issue_id=issue.pk,
        paths=["src/b.py", "src/a.py"],
        session_id=session.pk,
    )
    again = file_claims.claim_files(
        workspace=workspace,
        issue_id=issue.pk,
        paths=["src/a.py", "src/c.py"],
        session_id=session.pk,
    )
    for result in (claimed, again):
        stored = {c.pk: c for c in selectors.file_claims(workspace)}
        assert [c.path for c in result.claims] == sorted(c.path for c in result.claims)
        for claim in result.claims:
            orm = stored[claim.pk]
            for field in FileClaim._meta.concrete_fields:
                assert getattr(claim, field.attname) == getattr(orm, field.attname), field
            assert claim.claimed_at.tzinfo is not None
            assert claim.agent.name == "ada"
            assert FileClaimSerializer(claim).data == FileClaimSerializer(orm).data


def test_heartbeat_returns_the_session_as_listed(workspace, make_session):
    worktree = Worktree.objects.create(workspace=workspace, slug="main", name="Main")
    session = make_session("ada")
    session.agent.worktree = worktree
    session.agent.role = "builder"
    session.agent.save()
    beaten = agents.heartbeat_session(workspace=workspace, session_id=session.pk)
    listed = selectors.sessions(workspace).get(pk=session.pk)
    assert SessionSerializer(beaten).data == SessionSerializer(listed).data
    assert SessionSerializer(beaten).data["worktree"] == "main"
    assert beaten.is_live is True


def test_the_key_lookup_gives_key_and_workspace(workspace):
    key, raw = ApiKey.issue(workspace, "fleet")
    found = keys.active_key(raw)
    assert found is not None and found.pk == key.pk and found.workspace.slug == "acme"
    assert found.created_at == ApiKey.objects.get(pk=key.pk).created_at
    assert keys.active_key(raw + "x") is None
    key.revoked_at = key.created_at
    key.save()
    assert keys.active_key(raw) is None


def test_fields_bound_once_render_as_drf_does(workspace, issue, make_session):
    session = make_session("ada")
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk).lease
    claimed = file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["a", "b"], session_id=session.pk
    )
    cases = [
        (SessionSerializer, selectors.sessions(workspace).get(pk=session.pk)),
        (LeaseSerializer, selectors.leases(workspace).get(pk=lease.pk)),
        (IssueSerializer, selectors.issues(workspace).get(pk=issue.pk)),
        (FileClaimSerializer, claimed.claims[0]),
        (ClaimedFilesSerializer, claimed),
    ]
    for serializer_class, instance in cases:
        serializer = serializer_class(instance)
        assert serializer.data == drf_rendering(serializer, instance), serializer_class


def test_a_throttle_scope_can_be_off(monkeypatch, settings, api):
    monkeypatch.setenv("PROJEKTOR_THROTTLE_KEY", "off")
    assert env_rate("PROJEKTOR_THROTTLE_KEY", "6000/min") is None
    monkeypatch.setenv("PROJEKTOR_THROTTLE_KEY", "often")
    with pytest.raises(ImproperlyConfigured):
        env_rate("PROJEKTOR_THROTTLE_KEY", "6000/min")
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"key": None, "anon": "1/min"},
    }
    for _ in range(5):  # over any limit: a scope that is off counts nothing
        assert api.get(f"{V1}/workflow/").status_code == 200
