"""Waypoint's graphs on Aegra 0.11 (issue 29): aegra.json and langgraph.json agree with the strategy
registry; two Aegra instances (real processes, Python 3.12 venv from scripts/aegra_env.sh) on one
PostgreSQL database and one Redis run the SDK scenario, share threads and the store, and keep turns."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from app.server.standard.assistants import GRAPH_IDS
from graphs.strategies import STRATEGIES
from tests.aegra_servers import (
    AegraUnavailable,
    Instance,
    aegra_pair,
    unavailable,
)
from tests.aegra_workloads import Done, linear_history, shared_thread_workload
from tests.pg_server import Server
from tests.sdk_scenario import answer, run_scenario, user
from tests.test_langgraph_api import expected_outcome

REPO = Path(__file__).resolve().parent.parent
PORTABLE = "./app/portable.py"
# Two instances start in the first test's setup: more than the suite's 120 s under heavy load.
pytestmark = pytest.mark.timeout(300)


def deployment_file(name: str) -> dict:
    return json.loads((REPO / name).read_text())


@pytest.mark.parametrize("name", ["aegra.json", "langgraph.json"])
def test_each_deployment_file_serves_one_graph_per_strategy_by_file_path(name: str):
    """Aegra takes only `path/to/file.py:attr` (a module path stops it at start-up)."""
    expected = {GRAPH_IDS[strategy]: f"{PORTABLE}:{strategy}" for strategy in STRATEGIES}
    config = deployment_file(name)
    assert config["graphs"] == expected
    assert config["dependencies"] == ["."]
    assert (REPO / PORTABLE).is_file()


def test_aegra_json_and_langgraph_json_name_the_same_graphs():
    assert deployment_file("aegra.json")["graphs"] == deployment_file("langgraph.json")["graphs"]


@dataclass
class Aegra:
    """Two instances on one PostgreSQL database and one Redis, with a shared workspace."""

    a: Instance
    b: Instance
    workspace: Path

    def client(self, instance: Instance) -> SyncLangGraphClient:
        return get_sync_client(url=instance.base, timeout=90)


@pytest.fixture(scope="module")
def aegra(pg_server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Aegra]:
    tmp = tmp_path_factory.mktemp("aegra")
    workspace = tmp / "workspace"
    workspace.mkdir()
    with contextlib.ExitStack() as stack:
        try:
            pair = stack.enter_context(aegra_pair(pg_server, tmp, workspace))
        except AegraUnavailable as exc:
            unavailable(str(exc))
        yield Aegra(pair.a, pair.b, workspace)


def test_the_sdk_scenario_runs_on_aegra(aegra: Aegra):
    (aegra.workspace / "notes.txt").write_text("old")
    seen = run_scenario(aegra.a.base, "aegra", aegra.client(aegra.a))
    expected = expected_outcome("aegra")
    # Aegra 0.11's own differences: more keys in a thread's metadata, an `end` event closing a
    # stream, and no threads.copy (404).
    metadata, status = seen.pop("created")
    assert {k: metadata[k] for k in ("suite", "kind")} == expected.pop("created")[0]
    assert status == "idle"
    assert seen.pop("modes") == sorted([*expected.pop("modes"), "end"])
    assert seen.pop("copy") == "404"
    assert seen == expected
    assert (aegra.workspace / "notes.txt").read_text() == "hi"


def checkpoints(client: SyncLangGraphClient, thread_id: str) -> list[str]:
    return [
        h["checkpoint"]["checkpoint_id"] for h in client.threads.get_history(thread_id, limit=200)
    ]


def test_a_thread_continues_across_instances(aegra: Aegra):
    a, b = aegra.client(aegra.a), aegra.client(aegra.b)
    tid = a.threads.create()["thread_id"]
    first = a.runs.wait(tid, "waypoint", input=user("what is 6 times 7"))
    second = b.runs.wait(tid, "waypoint", input=user("what is 2 plus 2"))
    assert (answer(first), answer(second), second["turn"]) == ("6 * 7 = 42", "2 + 2 = 4", 2)

    head_a, head_b = a.threads.get_state(tid), b.threads.get_state(tid)
    assert head_a["checkpoint"] == head_b["checkpoint"]
    assert head_a["values"]["turn"] == 2
    assert checkpoints(a, tid) == checkpoints(b, tid)

    # A background run made on one instance, joined and streamed from the other (Redis's broker).
    run = a.runs.create(tid, "waypoint", input=user("what is 3 times 3"))
    assert answer(b.runs.join(tid, run["run_id"])) == "3 * 3 = 9"
    assert b.runs.get(tid, run["run_id"])["status"] == "success"
    streamed = a.runs.create(tid, "waypoint", input=user("what is 5 minus 1"))
    parts = list(b.runs.join_stream(tid, streamed["run_id"], stream_mode="values"))
    assert answer([p.data for p in parts if p.event == "values"][-1]) == "5 - 1 = 4"


def test_an_approval_raised_on_one_instance_is_resumed_on_the_other(aegra: Aegra):
    (aegra.workspace / "shared.txt").write_text("old")
    a, b = aegra.client(aegra.a), aegra.client(aegra.b)
    tid = a.threads.create()["thread_id"]
    asking = {"approval": "ask"}
    a.runs.wait(tid, "waypoint", input=user("write 'hi' to shared.txt"), context=asking)
    [pending] = b.threads.get_state(tid)["interrupts"]
    [question] = pending["value"]["calls"]
    assert (b.threads.get(tid)["status"], question["name"]) == ("interrupted", "write_file")

    resume = {"resume": {question["id"]: {"action": "approve"}}}
    resumed = b.runs.wait(tid, "waypoint", command=resume, context=asking)
    assert resumed["status"] == "answered"
    assert (aegra.workspace / "shared.txt").read_text() == "hi"
    assert a.threads.get(tid)["status"] == b.threads.get(tid)["status"] == "idle"
    assert a.threads.get_state(tid)["checkpoint"] == b.threads.get_state(tid)["checkpoint"]


class MemoryNotInStoreError(AssertionError):
    """The agent's memory is not in the server's store."""


class TurnsLostError(AssertionError):
    """Turns that succeeded are missing from the thread's linear history."""


def test_a_memory_is_in_the_servers_store_seen_from_either_instance(aegra: Aegra):
    a = aegra.client(aegra.a)
    tid = a.threads.create()["thread_id"]
    said = a.runs.wait(
        tid,
        "waypoint",
        input=user("remember that my favourite colour is green"),
        context={"user": "alice"},
    )
    assert said["status"] == "answered", said
    for instance in (aegra.a, aegra.b):
        found = aegra.client(instance).store.search_items(["memories", "alice"])["items"]
        if not any("green" in json.dumps(item["value"]) for item in found):
            raise MemoryNotInStoreError(f"{instance.name}: {found}")


def test_four_clients_on_one_thread_across_both_instances_lose_no_turn(aegra: Aegra):
    """Without the thread guard 5-17 of 40 turns were lost here. With it a turn that would fork the
    thread fails with ThreadChangedError and the client sends it again (unless its answer is on the
    thread already): every turn that succeeded is on the thread's one linear history, answered
    once, and no checkpoint is off it."""
    clients = [aegra.client(aegra.a), aegra.client(aegra.b)]
    tid = clients[0].threads.create()["thread_id"]
    done = shared_thread_workload(clients, tid, n_clients=4, runs_per_client=10)
    each_turn_kept_once(clients[0], tid, done, 40)


def test_reflexion_clients_that_resend_every_refused_turn_get_each_answer_once(aegra: Aegra):
    """Reflexion stores its answer, then evaluates it: a run refused at the evaluation, after
    another run started from its answer, ends as answered (graphs/shared/carried_turns.py). So
    clients that send every refused turn again, without looking at the thread, are answered once."""
    clients = [aegra.client(aegra.a), aegra.client(aegra.b)]
    tid = clients[0].threads.create()["thread_id"]
    done = shared_thread_workload(
        clients,
        tid,
        n_clients=4,
        runs_per_client=5,
        assistant="waypoint-reflexion",
        look_first=False,
    )
    each_turn_kept_once(clients[0], tid, done, 20)


def each_turn_kept_once(client: SyncLangGraphClient, tid: str, done: Done, turns: int) -> None:
    """Every turn succeeded and is on the thread's one linear history, answered once, and no
    checkpoint is off it."""
    kept = linear_history(client, tid)
    lost = [question for question in done.succeeded if question not in kept.questions]
    twice = {answer: n for answer, n in kept.answers.items() if n > 1}
    print(
        f"shared thread: {len(done.succeeded)} turns succeeded, {len(lost)} lost, "
        f"{done.retries} retries, {done.kept_though_refused} refused but carried on"
    )
    assert len(done.succeeded) == turns, done.failures
    if lost:
        raise TurnsLostError(f"{len(lost)} of {turns} turns lost: {lost}")
    assert twice == {}, f"turns answered twice: {kept.said}"
    assert kept.off_history == [], "checkpoints off the linear history (a fork)"
