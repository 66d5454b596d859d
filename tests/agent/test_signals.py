"""The runner's SIGINT/SIGTERM handling never waits on itself: the handler runs in the
main thread, which holds the agent's lock while it starts the agent; a stop that
came then was never handled (the runner hung until the fleet killed it, its session
left live). A stop that comes while the agent starts reaches the agent too."""

from __future__ import annotations

import signal
import sys
import threading

from projektor_agent.context import Signals

DEADLINE = 30.0  # seconds; a handler that waits on its own lock never returns


def test_a_stop_while_the_runners_thread_holds_the_agents_lock_is_handled_at_once():
    signals = Signals(grace=1.0)
    handled = threading.Event()

    def stopped_while_starting_the_agent() -> None:
        with signals.child_lock:  # as the main thread holds it while the agent starts
            signals.handle(signal.SIGTERM, None)
        handled.set()

    threading.Thread(target=stopped_while_starting_the_agent, daemon=True).start()
    assert handled.wait(DEADLINE), "the handler waited for a lock its own thread held"
    assert signals.interrupted


def test_an_agent_started_after_the_stop_came_is_stopped_too(tmp_path):
    signals = Signals(grace=1.0)
    signals.interrupts = 1  # the stop came while the agent was being started
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    child = signals.spawn(sleeper, str(tmp_path), {"PATH": "/usr/bin:/bin"})
    finished = threading.Event()
    status: list[int] = []

    def supervise() -> None:
        status.append(signals.supervise(child))
        finished.set()

    threading.Thread(target=supervise, daemon=True).start()
    assert finished.wait(DEADLINE), "the agent kept running after the runner was stopped"
    assert status == [-signal.SIGTERM]
