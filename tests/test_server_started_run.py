"""A run started from the event loop is made on the thread it then runs on: no thread of the loop's
executor is taken, and a request's problem is still raised to the caller."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.config import load_settings
from app.errors import NotFoundError
from app.server.standard.runs import RunRequest, Runs, started_run, until_set


class RefusingExecutor(ThreadPoolExecutor):
    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the loop's executor was used")


def request(**extra: object) -> RunRequest:
    body = {"assistant_id": "waypoint", "input": {"messages": [{"role": "user", "content": "2+2"}]}}
    return RunRequest.model_validate({**body, **extra})


def started(runs: Runs, thread: str, body: RunRequest):  # type: ignore[no-untyped-def]
    async def start_and_wait():  # type: ignore[no-untyped-def]
        asyncio.get_running_loop().set_default_executor(RefusingExecutor())
        run = await started_run(runs.settings, runs, thread, body)
        await until_set(run, run.done)
        return run

    return asyncio.run(start_and_wait())


@pytest.fixture
def runs():  # type: ignore[no-untyped-def]
    kept = Runs(load_settings())
    yield kept
    kept.close()


def test_a_run_started_from_the_loop_runs_without_the_loops_executor(runs: Runs):
    run = started(runs, "s", request(if_not_exists="create"))
    assert run.status == "success" and run.values["messages"][-1]["type"] == "ai"


def test_a_request_problem_is_raised_to_the_caller(runs: Runs):
    with pytest.raises(NotFoundError, match="does not exist"):
        started(runs, "missing", request())
