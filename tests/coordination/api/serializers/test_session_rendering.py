"""SessionSerializer writes its mapping out (every heartbeat answers with it): each
session renders exactly as DRF's fields render it, whatever its state and however it
was loaded (the heartbeat's SQL row or the ORM's queryset)."""

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from rest_framework import serializers

from coordination.api.serializers.sessions import SessionSerializer
from coordination.models import AgentSession
from coordination.selectors.sessions import sessions
from coordination.services import agents, worktrees
from tests.conftest import expire


def drf_rendering(session: AgentSession) -> dict:
    """The session through the serializer's declared fields, as DRF renders them."""
    return dict(serializers.ModelSerializer.to_representation(SessionSerializer(), session))


@pytest.fixture
def every_state(workspace, make_session) -> list[int]:
    """Sessions live, bound to a worktree, with a note, stalled, lapsed and ended."""
    worktrees.create_worktree(workspace=workspace, slug="wt-main", name="Main")
    bound = make_session("coder-1", role="backend", department="payments", worktree_slug="wt-main")
    plain = make_session("coder-2")
    noted = make_session("coder-3")
    agents.report_progress(workspace=workspace, session_id=noted.pk, note="tests pass ✓")
    stalled = make_session("coder-4")
    AgentSession.objects.filter(pk=stalled.pk).update(
        last_progress_at=timezone.now() - timedelta(days=2)
    )
    lapsed = make_session("coder-5")
    expire(lapsed)
    ended = make_session("coder-6")
    agents.end_session(workspace=workspace, session_id=ended.pk)
    return [bound.pk, plain.pk, noted.pk, stalled.pk, lapsed.pk, ended.pk]


def test_sessions_loaded_by_the_orm_render_as_drfs_fields_render_them(workspace, every_state):
    loaded = list(sessions(workspace).filter(pk__in=every_state))
    rendered = [SessionSerializer(session).data for session in loaded]
    assert rendered == [drf_rendering(session) for session in loaded]
    assert all(list(answer) == SessionSerializer.Meta.fields for answer in rendered)
    # the states the fixture made are all there
    assert {answer["worktree"] for answer in rendered} == {"wt-main", None}
    assert {answer["status"] for answer in rendered} == {"active", "ended"}
    assert {answer["live"] for answer in rendered} == {True, False}
    assert {answer["stalled"] for answer in rendered} == {True, False}
    assert "tests pass ✓" in {answer["progress_note"] for answer in rendered}
    assert any(answer["ended_at"] is not None for answer in rendered)


def test_a_heartbeats_session_renders_as_drfs_fields_render_it(workspace, every_state):
    for session_id in every_state[:4]:  # the heartbeat's SQL row; the live ones
        beaten = agents.heartbeat_session(workspace=workspace, session_id=session_id)
        assert SessionSerializer(beaten).data == drf_rendering(beaten)


@pytest.mark.parametrize("current", ["UTC", "Asia/Kolkata"])
def test_times_follow_the_current_time_zone_as_drfs_do(workspace, every_state, current):
    with timezone.override(ZoneInfo(current)):
        for session in sessions(workspace).filter(pk__in=every_state):
            assert SessionSerializer(session).data == drf_rendering(session)
