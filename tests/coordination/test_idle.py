"""The active-request gate: a request that sleeps in ``idle()`` gives its place up to
another, and takes a place again before it goes on."""

import threading

from coordination.idle import Gate, idle

DEADLINE = 30  # seconds, for anything a test waits on


def test_a_sleeping_request_lets_another_run_and_waits_for_a_place_to_go_on():
    gate = Gate(1)  # one place
    asleep, other_ran, wake, finished = (threading.Event() for _ in range(4))
    steps: list[str] = []

    def waiter() -> None:
        with gate.running() as place:
            with idle():
                asleep.set()
                assert wake.wait(DEADLINE)
            steps.append("waiter goes on")
            assert place.slept
        finished.set()

    def other() -> None:
        with gate.running() as place:
            steps.append("other runs")
            other_ran.set()
            assert wake.wait(DEADLINE)  # holds the only place while the waiter wakes
            steps.append("other ends")
            assert not place.slept

    first = threading.Thread(target=waiter)
    first.start()
    assert asleep.wait(DEADLINE)
    second = threading.Thread(target=other)
    second.start()
    assert other_ran.wait(DEADLINE)  # the sleeping waiter's place went to it
    wake.set()
    first.join(DEADLINE)
    second.join(DEADLINE)
    assert finished.is_set()
    # The waiter went on only once the other gave the one place back.
    assert steps == ["other runs", "other ends", "waiter goes on"]
