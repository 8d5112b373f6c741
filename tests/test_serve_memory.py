"""What a run leaves in serve's memory: a `values` event is the whole state, so each message of it
is dumped once per run and only for a client that asked for `values`; after runs, an idle server
frees what they left (at most once a second); a settled process uses two malloc arenas."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from app.config import load_settings
from app.server.standard import runs
from app.server.standard.runs import Run, Runs, StandardSink
from app.server.standard.wire import as_data
from app.service import runtime
from app.service.events import NodeUpdate, StateValues


def new_run() -> Run:
    return Run("r1", "t1", "waypoint", {}, "enqueue", {})


def test_the_values_events_of_a_run_share_each_messages_json():
    run = new_run()
    sink = StandardSink(run, ["values"], subgraphs=False)
    question = HumanMessage("what is 6 times 7", id="h1")
    answer = AIMessage("42", id="a1")
    sink.emit(StateValues({"messages": [question]}))
    sink.emit(StateValues({"messages": [question, answer]}))
    (_, first), (_, second) = [(name, as_data(data)) for name, data in run.kept_events()]
    assert second["messages"] == [question.model_dump(mode="json"), answer.model_dump(mode="json")]
    assert first["messages"][0] is second["messages"][0]  # one dump, not one per event


def test_a_values_event_no_client_asked_for_is_not_turned_into_json(monkeypatch):
    dumped: list = []
    monkeypatch.setattr(runs, "jsonable", lambda value, *rest: dumped.append(value) or value)
    run = new_run()
    sink = StandardSink(run, ["updates"], subgraphs=False)
    sink.emit(StateValues({"messages": [HumanMessage("hi", id="h1")]}))
    sink.emit(NodeUpdate("agent", {"turn": 1}))
    assert dumped == [{"turn": 1}] and [name for name, _ in run.kept_events()] == ["updates"]


def test_an_idle_server_tidies_its_heap_after_runs_at_most_once_a_second(
    monkeypatch, tmp_path: Path
):
    tidied: list[float] = []
    clock = [100.0]
    monkeypatch.setattr(runs, "tidy_heap", lambda: tidied.append(clock[0]))
    monkeypatch.setattr(runs.time, "monotonic", lambda: clock[0])
    server = Runs(load_settings(db=tmp_path / "agent.sqlite", workspace=tmp_path))
    server.tidy_when_idle()
    clock[0] += 0.5
    server.tidy_when_idle()  # too soon
    clock[0] += 1
    server.adopt(new_run())
    server.tidy_when_idle()  # another run is live here
    server.forget(new_run())
    server.tidy_when_idle()
    assert tidied == [100.0, 101.5]


# Starts threads that stay alive until each has called malloc, then counts glibc's arenas
# (malloc_info's <heap> elements); prints the count.
COUNT_ARENAS = """
import ctypes, re, sys, tempfile, threading
from app.service.runtime import settle_heap
if sys.argv[1] == "settled":
    settle_heap()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.fclose.argtypes = [ctypes.c_void_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
all_allocated = threading.Barrier(7)
def allocate():
    libc.malloc(4096)
    all_allocated.wait(timeout=60)
    all_allocated.wait(timeout=60)  # alive until the arenas are counted
threads = [threading.Thread(target=allocate) for _ in range(6)]
for thread in threads:
    thread.start()
all_allocated.wait(timeout=60)
with tempfile.NamedTemporaryFile(suffix=".xml") as out:
    stream = libc.fopen(out.name.encode(), b"w")
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    print(len(re.findall(r'<heap nr=', open(out.name).read())))
all_allocated.wait(timeout=60)
"""


def arenas_after_six_threads(settled: bool, **env: str) -> int:
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env
    done = subprocess.run(
        [sys.executable, "-c", COUNT_ARENAS, "settled" if settled else "plain"],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout)


@pytest.mark.skipif(not runtime._libc_function("malloc_info"), reason="glibc's malloc only")
def test_a_settled_process_keeps_its_threads_to_two_malloc_arenas():
    """serve, the REPL and the benchmark's workers settle their heap once set up: each run's thread
    would otherwise get a malloc arena of its own (up to 8 per core) whose free space stays."""
    assert arenas_after_six_threads(settled=False) >= 6  # glibc's own default, as a control
    assert arenas_after_six_threads(settled=True) <= runtime.MALLOC_ARENAS


@pytest.mark.skipif(not runtime._libc_function("malloc_info"), reason="glibc's malloc only")
def test_malloc_arena_max_in_the_environment_wins_over_the_settled_limit():
    assert arenas_after_six_threads(settled=True, MALLOC_ARENA_MAX="4") == 4
