"""How the admin shows state in little room: short times, clipped text with the whole
on hover, the holder cell, and a session's one derived state."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from coordination.admin import display
from coordination.models import AgentSession, FileClaim
from coordination.services import agents, file_claims
from tests.conftest import expire


def test_times_are_short_this_year_with_the_whole_time_on_hover():
    now = timezone.now()
    moment = now.replace(month=3, day=4, hour=9, minute=5, second=7, microsecond=0)
    html = str(display.when(moment))
    assert ">Mar\u00a04 09:05</time>" in html  # the date never breaks
    assert f'title="{now.year}-03-04 09:05:07 UTC"' in html
    assert ">2019-03-04</time>" in str(display.when(moment.replace(year=2019)))
    assert display.when(None) == "—"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(45, "45 s"), (12 * 60 + 5, "12 min"), (3 * 3600 + 5 * 60, "3 h 05"), (2 * 86400, "2 d")],
)
def test_durations_are_one_short_figure(seconds, shown):
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert f">{shown}</span>" in str(display.took(start, start + timedelta(seconds=seconds)))
    assert display.took(start, None) == "—"


def test_long_text_is_clipped_and_whole_on_hover():
    path = "src/coordination/services/file_claims/release.py"
    tail = str(display.clip(path, 20, keep_end=True))
    assert ">…e_claims/release.py</span>" in tail and f'title="{path}"' in tail
    head = str(display.clip("A title that goes on and on", 10))
    assert ">A title t…</span>" in head and 'title="A title that goes on and on"' in head
    assert "title=" not in str(display.clip("short", 10))
    assert display.clip("", 10) == "—"


def test_clipped_text_is_escaped():
    html = str(display.clip("<script>alert(1)</script> and more", 12))
    assert "<script>" not in html and "&lt;script&gt;" in html


@pytest.mark.django_db
def test_a_session_is_live_stale_or_ended_by_the_one_ttl(workspace, make_session):
    live, stale, ended = make_session("a"), make_session("b"), make_session("c")
    expire(stale)
    agents.end_session(workspace=workspace, session_id=ended.pk)
    states = dict(
        AgentSession.objects.annotate(state=display.session_state()).values_list("pk", "state")
    )
    assert states == {live.pk: "live", stale.pk: "stale", ended.pk: "ended"}


@pytest.mark.django_db
def test_the_holder_cell_names_agent_session_and_state(workspace, issue, make_session):
    session = make_session("release-manager-with-a-long-name")
    file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["a.py"], session_id=session.pk
    )
    orphan = FileClaim.objects.create(workspace=workspace, issue=issue, path="b.py")
    claims = FileClaim.objects.select_related("agent", "session__agent").annotate(
        holder_state=display.session_state("session__")
    )
    held, lost = (str(display.holder(claim)) for claim in claims.order_by("path"))
    assert f'release-manager-wit… ·</span> <span class="nowrap">session {session.pk}<' in held
    assert f'title="release-manager-with-a-long-name · session {session.pk}"' in held
    assert f"/admin/coordination/agentsession/{session.pk}/change/" in held
    assert 'class="state state-live">live<' in held
    assert orphan.session_id is None and ">no session<" in lost
