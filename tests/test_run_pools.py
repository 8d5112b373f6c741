"""Graph runs reuse LangGraph's thread pools (app/service/pools.py): one pool per run at a time, kept
between runs, and LangGraph's own for a run that sets max_concurrency."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from langgraph.pregel import _executor

from app.service.pools import RunPools
from tests.test_delta_storage import run_turns


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch) -> RunPools:
    """RunPools in place of LangGraph's pools for this test only."""
    pools = RunPools()
    pools.own_pool = _executor.get_executor_for_config
    monkeypatch.setattr(_executor, "get_executor_for_config", pools.executor_for)
    return pools


def saving_threads(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """The threads the checkpoints are saved on (LangGraph's background work), from now on."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    seen: list[threading.Thread] = []
    put = SqliteSaver.put

    def recorded(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(threading.current_thread())
        return put(self, *args, **kwargs)

    monkeypatch.setattr(SqliteSaver, "put", recorded)
    return seen


def test_turns_one_after_another_save_on_the_same_kept_threads(
    tmp_path: Path, pools: RunPools, monkeypatch: pytest.MonkeyPatch
):
    threads = saving_threads(monkeypatch)
    run_turns(tmp_path / "agent.sqlite", "t", [f"what is {n} plus {n}" for n in range(5)])
    distinct = set(threads)
    assert len(threads) >= 20 and len(distinct) <= (os.cpu_count() or 1) + 4  # one pool's at most
    assert all(thread.is_alive() for thread in distinct)  # a kept pool's, not shut down
    assert len(pools._idle) == 1


def test_without_reuse_every_run_starts_threads_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """What the pools save: LangGraph's own way, a pool per run, shut down when the run ends."""
    threads = saving_threads(monkeypatch)
    run_turns(tmp_path / "agent.sqlite", "t", [f"what is {n} plus {n}" for n in range(5)])
    assert len(set(threads)) >= 5 and not any(thread.is_alive() for thread in threads)


def test_runs_at_the_same_time_never_share_a_pool(pools: RunPools):
    with pools.executor_for({}) as first, pools.executor_for({}) as second:
        assert first is not second
    assert len(pools._idle) == 2
    with pools.executor_for({}) as again:
        assert again in (first, second)


def test_pools_beyond_those_kept_are_shut_down():
    pools = RunPools(keep=1)
    with pools.executor_for({}) as first, pools.executor_for({}) as second:
        pass
    assert pools._idle == [second]
    with pytest.raises(RuntimeError, match="shutdown"):
        first.submit(print)


def test_a_run_that_sets_max_concurrency_gets_a_pool_of_its_own(pools: RunPools):
    with pools.executor_for({"max_concurrency": 2}) as executor:
        assert executor.submit(lambda: 6 * 7).result() == 42
    assert pools._idle == []
    with pytest.raises(RuntimeError, match="shutdown"):
        executor.submit(print)


def test_reuse_hooks_langgraph_once_and_a_forked_child_keeps_no_idle_pool():
    """In a process of its own: installing changes LangGraph's module for good."""
    script = (
        "import os\n"
        "from langgraph.pregel import _executor\n"
        "from app.service.pools import POOLS, reuse_run_pools\n"
        "assert reuse_run_pools() and reuse_run_pools()\n"
        "assert _executor.get_executor_for_config == POOLS.executor_for\n"
        "assert POOLS.own_pool != POOLS.executor_for\n"
        "with POOLS.executor_for({}) as pool:\n"
        "    pool.submit(print, 'ran').result()\n"
        "assert len(POOLS._idle) == 1\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0 if POOLS._idle == [] else 1)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print('child', os.waitstatus_to_exitcode(status))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ran", "child", "0"]
