"""How a run's events reach the caller's thread (app/service/worker.Handoff): a burst of events in
one batch, the first event and the end of the run at once."""

from __future__ import annotations

import time

from app.service.worker import BATCH_SECONDS, Handoff


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_of_events_reaches_the_caller_in_one_batch():
    clock = Clock()
    handoff = Handoff(clock)
    handoff.put("event", "first")  # wakes the caller: the first event after a quiet spell
    assert handoff._wake.is_set()
    handoff._wake.clear()
    for number in range(50):  # within BATCH_SECONDS of that wake-up: no wake-up of their own
        clock.now += BATCH_SECONDS / 100
        handoff.put("event", number)
    assert not handoff._wake.is_set()
    assert handoff.take() == [("event", "first"), *[("event", n) for n in range(50)]]
    clock.now += BATCH_SECONDS
    handoff.put("event", "later")  # a batch time after the last wake-up: wakes the caller again
    assert handoff._wake.is_set()


def test_the_end_of_the_run_wakes_the_caller_at_once():
    handoff = Handoff(Clock())  # the clock stands still: no event is a batch time after another
    handoff.put("event", "first")
    assert handoff.take() == [("event", "first")]
    handoff.put("event", "token")  # within the batch: waits for the caller's next look
    assert not handoff._wake.is_set()
    handoff.put("done", None)
    assert handoff._wake.is_set()
    assert handoff.take() == [("event", "token"), ("done", None)]


def test_what_the_user_may_act_on_wakes_the_caller_at_once():
    handoff = Handoff(Clock())
    handoff.put("event", "first")
    handoff.take()
    handoff.put("event", "token")
    assert not handoff._wake.is_set()
    handoff.put("event", "a tool starts", urgent=True)
    assert handoff._wake.is_set()


def test_a_look_when_nothing_arrived_returns_empty_once_the_batch_time_is_over():
    handoff = Handoff()
    started = time.monotonic()
    assert handoff.take() == []
    assert time.monotonic() - started >= BATCH_SECONDS * 0.9
