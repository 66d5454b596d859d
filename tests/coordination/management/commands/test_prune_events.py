"""prune_events: old events go, a prefix of ids per workspace, and a cursor before the
prefix is told it missed them."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from coordination import feed
from coordination.models import Event, Workspace
from coordination.services import agents


def register(workspace: Workspace, name: str) -> int:
    agents.register_session(workspace=workspace, agent_name=name)
    return Event.objects.filter(workspace=workspace).order_by("-pk").values_list("pk").first()[0]


def age(event_id: int, days: int) -> None:
    Event.objects.filter(pk=event_id).update(occurred_at=timezone.now() - timedelta(days=days))


@pytest.mark.django_db
def test_old_events_go_and_a_cursor_before_them_has_missed_them(workspace, other_workspace, capsys):
    old = [register(workspace, f"old-{n}") for n in range(3)]
    kept = register(workspace, "recent")
    elsewhere = register(other_workspace, "stranger")
    for event_id in [*old, elsewhere]:
        age(event_id, days=40)

    call_command("prune_events")

    assert capsys.readouterr().out.splitlines() == [
        f"{workspace.slug}: 3 events pruned",
        f"{other_workspace.slug}: 1 events pruned",
    ]
    assert list(Event.objects.filter(workspace=workspace).values_list("pk", flat=True)) == [kept]
    workspace.refresh_from_db()
    assert workspace.events_pruned_through == old[-1]

    everything = feed.EventFilter()
    behind = feed.read(workspace, after=0, filters=everything, limit=10)
    assert behind.missed and [e.pk for e in behind.events] == [kept]
    caught_up = feed.read(workspace, after=old[-1], filters=everything, limit=10)
    assert not caught_up.missed and [e.pk for e in caught_up.events] == [kept]
    # Nothing after the pruned prefix: the cursor moves past it, so it is said once.
    nothing = feed.read(other_workspace, after=0, filters=everything, limit=10)
    assert nothing.missed and nothing.events == [] and nothing.next == elsewhere
    assert not feed.read(other_workspace, after=nothing.next, filters=everything, limit=10).missed


@pytest.mark.django_db
def test_recent_events_stay_and_a_second_run_prunes_nothing(workspace, capsys):
    register(workspace, "recent")
    call_command("prune_events", "--days", "1")
    call_command("prune_events")
    assert capsys.readouterr().out.splitlines() == ["nothing to prune", "nothing to prune"]
    assert Event.objects.count() == 1


@pytest.mark.django_db
def test_days_must_be_positive(capsys):
    with pytest.raises(SystemExit) as stopped:
        call_command("prune_events", "--days", "0")
    assert stopped.value.code == 2
