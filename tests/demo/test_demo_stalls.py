"""The demo's stalled agents: now and then the scripted agent sits idle between its
edits for longer than the stall threshold while its runner heartbeats; the server
shows its session stalled (invariant 17 (stalled is derived)), it keeps its lease, and it carries on
to land the issue through the landing queue and hand it in."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.utils import timezone

from coordination.models import AgentSession, Issue, IssueLease, Landing, Workspace
from tests.demo.conftest import FleetProcess, served, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

STALL_AFTER = 2  # seconds: an idle agent is stalled soon; its idles last 1.3 times that


def test_an_idle_agent_is_stalled_while_its_runner_heartbeats_then_carries_on(
    small_demo: Workspace, demo_dir: Path, tmp_path: Path, settings
) -> None:
    settings.PROJEKTOR_STALL_AFTER_SECONDS = STALL_AFTER  # as the test judges it
    threshold = {"PROJEKTOR_STALL_AFTER_SECONDS": str(STALL_AFTER)}
    with served(tmp_path, **threshold) as (url, env):
        began = timezone.now()
        fleet = FleetProcess(
            url, demo_dir, env, "--agents", "1", "--work", "1,2", "--crash-chance", "0",
            "--stall-chance", "1",
        )  # fmt: skip
        try:
            fleet_sessions = AgentSession.objects.filter(
                workspace=small_demo, started_at__gte=began
            )

            def stalled() -> AgentSession | None:
                return fleet_sessions.stalled().live().first()

            wait_until(stalled, "a runner's session stalled while live")
            session = stalled()
            assert session is not None
            held = IssueLease.objects.live().filter(session=session)
            issue = held.values_list("issue", flat=True).first()
            assert issue is not None, "a stalled session keeps its lease"
            wait_until(
                lambda: Issue.objects.filter(pk=issue, status__in=["in_review", "done"]).exists(),
                "the idle agent's issue handed in after all",
            )
            # Handed in once its landing landed, tested by the runner in its batch.
            landing = Landing.objects.get(issue=issue, state=Landing.State.LANDED)
            assert landing.tester_id is not None and landing.landed_commit
        finally:
            status = fleet.stop()
    assert status == 0, fleet.output()
