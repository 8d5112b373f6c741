"""The Aegra figures of docs/notes/aegra.md: SDK calls that work, runs/s on one and two instances, and
turns lost on one shared thread. Run from the repository after scripts/aegra_env.sh:
    PYTHONPATH=. python scripts/aegra_figures.py [--runs-per-client 10] [--shared-repeats 5]"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

from langgraph_sdk import get_sync_client

from tests.aegra_servers import aegra_python, instance_env, redis_server, start_instance
from tests.aegra_workloads import (
    CountingClient,
    linear_history,
    own_thread_runs_per_second,
    seconds_per_turn,
    shared_thread_workload,
)
from tests.pg_server import session_server
from tests.sdk_scenario import run_scenario

N_CLIENTS = 4


def sdk_census(base: str, workspace: Path) -> dict:
    (workspace / "notes.txt").write_text("old")
    client = CountingClient(get_sync_client(url=base, timeout=90))
    run_scenario(base, "census", client)
    failing = [f"{name} ({outcome})" for name, outcome in client.calls if outcome != "ok"]
    kinds = Counter(name for name, _ in client.calls)
    return {
        "calls": len(client.calls),
        "working": len(client.calls) - len(failing),
        "distinct_methods": len(kinds),
        "failing": failing,
    }


def lost_on_one_thread(bases: list[str], runs_per_client: int) -> dict:
    clients = [get_sync_client(url=base, timeout=90) for base in bases]
    tid = clients[0].threads.create()["thread_id"]
    done = shared_thread_workload(
        clients, tid, n_clients=N_CLIENTS, runs_per_client=runs_per_client
    )
    kept = linear_history(clients[0], tid)
    lost = [q for q in done.succeeded if q not in kept.questions]
    total = N_CLIENTS * runs_per_client
    return {
        "succeeded": f"{len(done.succeeded)}/{total}",
        "lost": f"{len(lost)}/{total}",
        "answered_twice": sum(1 for n in kept.answers.values() if n > 1),
        "off_history": len(kept.off_history),
        "retries": done.retries,
        "kept_though_refused": done.kept_though_refused,
    }


def runs_per_second(bases: list[str], runs_per_client: int, repeats: int = 3) -> list[float]:
    """Each of `repeats` measures: one alone is noise on a machine others share."""
    clients = [get_sync_client(url=base, timeout=90) for base in bases]
    return [
        round(
            own_thread_runs_per_second(
                clients, n_clients=N_CLIENTS, runs_per_client=runs_per_client
            ),
            1,
        )
        for _ in range(repeats)
    ]


def runs_per_second_one_two_one(
    python: Path, env: dict[str, str], tmp: Path, base: str, runs: int
) -> dict:
    """Runs/s on one instance, on two, then on the first alone again (the second stopped: with
    Redis, any instance's workers take any instance's runs), so a change in the machine's load
    shows as a difference between the two one-instance measures."""
    figures = {"runs_per_s_one_instance": runs_per_second([base], runs)}
    b = start_instance(python, env, tmp, "b")
    try:
        figures["runs_per_s_two_instances"] = runs_per_second([base, b.base], runs)
    finally:
        b.stop()
    figures["runs_per_s_one_instance_again"] = runs_per_second([base], runs)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-per-client", type=int, default=10)
    parser.add_argument(
        "--shared-repeats", type=int, default=5, help="of the shared-thread workload"
    )
    parser.add_argument("--durability", choices=["sync", "async"], help="else aegra.json's")
    parser.add_argument(
        "--runs-only", action="store_true", help="runs/s only: one, two, then one instance again"
    )
    arguments = parser.parse_args()
    runs, repeats = arguments.runs_per_client, arguments.shared_repeats
    figures: dict = {"clients": N_CLIENTS, "runs_per_client": runs}
    durability = (
        {"AEGRA_CHECKPOINT_DURABILITY": arguments.durability} if arguments.durability else {}
    )
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="aegra-figures-")))
        workspace = tmp / "workspace"
        workspace.mkdir()
        pg = stack.enter_context(session_server())
        redis_url = stack.enter_context(redis_server(tmp))
        env = instance_env(pg.new_database(), redis_url, workspace, pg.new_database(), **durability)
        python = aegra_python()
        a = start_instance(python, env, tmp, "a")
        stack.callback(a.stop)
        if arguments.runs_only:
            figures |= runs_per_second_one_two_one(python, env, tmp, a.base, runs)
            json.dump(figures, sys.stdout, indent=2)
            print()
            return 0
        # One instance alone first: with Redis, any instance's workers take any instance's runs.
        figures["sdk_calls_one_instance"] = sdk_census(a.base, workspace)
        figures["seconds_per_turn"] = seconds_per_turn(get_sync_client(url=a.base), turns=5)
        figures["runs_per_s_one_instance"] = runs_per_second([a.base], runs)
        figures["shared_thread_one_instance"] = lost_on_one_thread([a.base], runs)
        b = start_instance(python, env, tmp, "b")
        stack.callback(b.stop)
        figures["runs_per_s_two_instances"] = runs_per_second([a.base, b.base], runs)
        figures["shared_thread_two_instances"] = [
            lost_on_one_thread([a.base, b.base], runs) for _ in range(repeats)
        ]
    json.dump(figures, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
