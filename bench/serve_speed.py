"""serve next to `langgraph dev` serving the same langgraph.json (`--serve-runs N`): 8 clients at
once, each sending `runs/wait` on a thread of its own; throughput and p95 latency of a run."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from bench.measure import p95
from bench.report import Figure
from bench.serve_memory import rss_mib, serve_process
from bench.workloads import REPO, clean_env

CLIENTS = 8
WARM_RUNS = 1  # per client, untimed: the first run of a graph imports and compiles it


def serve_speed(workdir: Path, runs_per_client: int) -> dict[str, dict]:
    """{"serve" | "langgraph dev": {"runs", "clients", "seconds", "runs_per_s", "p95_ms",
    "median_ms", "rss_mib"}}; "langgraph dev" is missing where langgraph-cli is not installed."""
    found = {}
    with serve_process(workdir / "speed-serve") as (process, base):
        found["serve"] = _clients(base, runs_per_client) | {"rss_mib": rss_mib(process.pid)}
    if shutil.which("langgraph"):
        directory = workdir / "speed-dev"
        with langgraph_dev(directory, directory / "workspace", clean_env()) as (process, base):
            found["langgraph dev"] = _clients(base, runs_per_client) | {
                "rss_mib": rss_mib(process.pid)
            }
    return found


def figures(found: dict[str, dict]) -> list[Figure]:
    """serve against langgraph dev (the baseline column); nothing without langgraph dev."""
    if "langgraph dev" not in found:
        return []
    serve, dev = found["serve"], found["langgraph dev"]
    clients = f"{serve['clients']} clients"
    return [
        Figure("serve vs dev", f"runs/wait throughput, {clients}", "runs/s", serve["runs_per_s"],
               dev["runs_per_s"], better="higher"),
        Figure("serve vs dev", f"runs/wait p95, {clients}", "ms", serve["p95_ms"], dev["p95_ms"]),
        Figure("serve vs dev", f"runs/wait median, {clients}", "ms", serve["median_ms"],
               dev["median_ms"]),
        Figure("serve vs dev", "server RSS after the runs", "MiB", serve["rss_mib"],
               dev["rss_mib"]),
    ]  # fmt: skip


def _clients(base: str, runs_per_client: int) -> dict:
    """Every client warms its thread, then all send their runs at once."""
    threads = [str(uuid.uuid4()) for _ in range(CLIENTS)]  # langgraph dev takes only UUIDs
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(lambda thread: _runs(base, thread, WARM_RUNS, 0), threads))
        started = time.perf_counter()
        timed = pool.map(lambda thread: _runs(base, thread, runs_per_client, WARM_RUNS), threads)
        latencies = [seconds for client in timed for seconds in client]
        elapsed = time.perf_counter() - started
    return {
        "runs": len(latencies),
        "clients": CLIENTS,
        "seconds": elapsed,
        "runs_per_s": len(latencies) / elapsed,
        "p95_ms": 1000 * p95(latencies),
        "median_ms": 1000 * sorted(latencies)[len(latencies) // 2],
    }


def _runs(base: str, thread: str, count: int, first: int) -> list[float]:
    """Seconds each of `count` `runs/wait` on `thread` took (one after the other)."""
    latencies = []
    with httpx.Client(base_url=base, timeout=300) as client:
        for n in range(first, first + count):
            body = {
                "assistant_id": "waypoint",
                "input": {"messages": [{"role": "user", "content": f"what is {n} plus 1"}]},
                "if_not_exists": "create",
            }
            started = time.perf_counter()
            answer = client.post(f"/threads/{thread}/runs/wait", json=body)
            latencies.append(time.perf_counter() - started)
            answer.raise_for_status()
    return latencies


@contextlib.contextmanager
def langgraph_dev(
    directory: Path,
    workspace: Path,
    environment: Mapping[str, str],
    config: Path = REPO / "langgraph.json",
) -> Iterator[tuple[subprocess.Popen, str]]:
    """`langgraph dev` (its in-memory runtime) serving `config` (this repository's langgraph.json
    unless another is given), with a database (in `directory`) and `workspace` of its own, in
    `environment` (the offline model unless it names another), on a free port: the process and
    its base URL while it runs. The bench and the tests start it this one way."""
    directory.mkdir(parents=True, exist_ok=True)
    # langgraph.json names ./app/portable.py from the working directory, which keeps the
    # runtime's own files (.langgraph_api/): a fresh directory linked to the repository's app/
    (directory / "app").symlink_to(REPO / "app", target_is_directory=True)
    port = _free_port()
    env = {
        **environment,
        "PYTHONPATH": str(REPO),
        "APP_WORKSPACE": str(workspace),
        "APP_DB": str(directory / "agent.sqlite"),
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    }
    command = [
        str(shutil.which("langgraph")),
        *("dev", "--no-browser", "--no-reload", "--port", str(port)),
        *("--config", str(config)),
    ]
    log = directory / "langgraph-dev.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, cwd=directory, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_until_ok(base, process, log)
        yield process, base
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=15)
        if process.poll() is None:
            process.kill()
            process.wait()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until_ok(base: str, process: subprocess.Popen, log: Path) -> None:
    """Until /ok answers: the server's own start-up, not an ordering of two processes."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/ok", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"langgraph dev did not start:\n{log.read_text()[-4000:]}")
