"""report_progress through the SDK client (invariant 17 (stalled is derived)): the note shown, the
stall ended, a heartbeat no progress; an ended session refused, a long note invalid."""

from datetime import timedelta

import pytest
from django.utils import timezone

from coordination.models import AgentSession
from tests.coordination.mcp.conftest import call, connect, refused, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_report_progress_ends_a_stall_and_refuses_bad_input(
    mcp_url, raw_key, make_session, settings
):
    settings.PROJEKTOR_STALL_AFTER_SECONDS = 60
    session = make_session("atlas")
    stamp = timezone.now() - timedelta(seconds=120)
    AgentSession.objects.filter(pk=session.pk).update(last_progress_at=stamp)

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            beat = await call(client, "heartbeat_agent", session=session.pk)
            assert beat["stalled"] is True
            moved = await call(client, "report_progress", session=session.pk, note="green")
            assert moved["stalled"] is False and moved["progress_note"] == "green"
            long = await refused(client, "report_progress", session=session.pk, note="x" * 501)
            assert long["code"] == "invalid"
            await call(client, "end_agent", session=session.pk)
            ended = await refused(client, "report_progress", session=session.pk)
            assert ended["code"] == "session_ended"

    run(scenario)
    assert AgentSession.objects.get(pk=session.pk).progress_note == "green"
