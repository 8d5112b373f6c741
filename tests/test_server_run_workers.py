"""The threads that run serve's runs: an idle one is reused, a run never waits for another, and
nothing one run set in its context is seen by the next."""

from __future__ import annotations

import contextvars
import threading

from app.server.standard.run_workers import RunWorkers

WAIT = 10.0
SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


def run(workers: RunWorkers, job, name: str = "run-x") -> threading.Event:  # type: ignore[no-untyped-def]
    done = threading.Event()

    def then_done() -> None:
        try:
            job()
        finally:
            done.set()

    workers.start(then_done, name)
    return done


def until_idle(workers: RunWorkers) -> None:
    """Until a thread is idle (after its job's last line has run), for at most WAIT seconds."""
    pause = threading.Event()
    for _ in range(int(WAIT / 0.001)):
        if workers.idle():
            return
        pause.wait(0.001)


def test_a_run_starts_on_the_thread_an_ended_run_left_idle():
    workers, threads = RunWorkers(), []
    for name in ("run-a", "run-b"):
        assert run(workers, lambda: threads.append(threading.current_thread()), name).wait(WAIT)
        until_idle(workers)
    assert threads[0] is threads[1] and workers.idle() == 1


def test_a_run_is_named_while_it_runs():
    names: list[str] = []
    assert run(RunWorkers(), lambda: names.append(threading.current_thread().name), "run-1").wait(
        WAIT
    )
    assert names == ["run-1"]


def test_a_run_never_waits_for_another():
    workers, release = RunWorkers(keep=1), threading.Event()
    held = run(workers, lambda: release.wait(WAIT))
    assert run(workers, lambda: None).wait(WAIT)
    assert not held.is_set()
    release.set()
    assert held.wait(WAIT)


def test_what_a_run_set_in_its_context_is_not_seen_by_the_next():
    workers, seen = RunWorkers(), []
    assert run(workers, lambda: SEEN.set("first")).wait(WAIT)
    assert run(workers, lambda: seen.append(SEEN.get())).wait(WAIT)
    assert seen == ["unset"]


def test_a_failing_run_leaves_its_thread_usable():
    workers = RunWorkers()

    def fails() -> None:
        raise RuntimeError("a bug")

    assert run(workers, fails).wait(WAIT)
    assert run(workers, lambda: None).wait(WAIT)


def test_a_thread_idle_too_long_ends_and_frees_what_it_kept():
    retired = threading.Event()
    workers = RunWorkers(on_retire=retired.set, idle_seconds=0.01)
    assert run(workers, lambda: None).wait(WAIT)
    assert retired.wait(WAIT)
    assert workers.idle() == 0


def test_closing_ends_the_idle_threads():
    retired = threading.Event()
    workers = RunWorkers(on_retire=retired.set)
    assert run(workers, lambda: None).wait(WAIT)
    until_idle(workers)
    workers.close()
    assert retired.wait(WAIT) and workers.idle() == 0
