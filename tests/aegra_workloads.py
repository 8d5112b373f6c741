"""Workloads for Aegra through the official SDK: several clients' turns on one thread (with what the
linear history kept), turns on threads of their own (runs/s), and a count of the SDK calls that work."""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import ConflictError

from tests.sdk_scenario import user

MAX_ATTEMPTS = 20  # per turn: a busy or refused turn is sent again, up to this many times


@dataclass
class Done:
    """The questions whose runs succeeded, the retries it took, and the failures retried."""

    succeeded: list[str] = field(default_factory=list)
    retries: int = 0
    failures: list[str] = field(default_factory=list)
    kept_though_refused: int = 0  # refused runs whose answer another run had carried on
    lock: threading.Lock = field(default_factory=threading.Lock)


def shared_thread_workload(
    clients: list[SyncLangGraphClient],
    thread_id: str,
    *,
    n_clients: int,
    runs_per_client: int,
    assistant: str = "waypoint",
    look_first: bool = True,
) -> Done:
    """`n_clients` clients, each streaming `runs_per_client` turns to ONE thread, alternating the
    instances. A turn refused (409, or a run that ends in an error event such as the guard's
    ThreadChangedError) is sent again; with `look_first`, not when its answer is already on the
    thread (the client policy of docs/notes/aegrazero.md; without it, clients resend blindly)."""
    done = Done()

    def client_turns(k: int) -> None:
        for r in range(runs_per_client):
            number = 100 * (k + 1) + r
            client = clients[(k + r) % len(clients)]
            sender = Sender(client, thread_id, assistant, look_first)
            if sender.send_until_accepted(number, done):
                with done.lock:
                    done.succeeded.append(question(number))

    with ThreadPoolExecutor(n_clients) as pool:
        list(pool.map(client_turns, range(n_clients)))
    return done


def question(number: int) -> str:
    return f"what is {number} plus 1"


def answer(number: int) -> str:
    """The offline model's answer to `question(number)`."""
    return f"{number} + 1 = {number + 1}"


@dataclass
class Sender:
    """One client's way of sending a turn to the shared thread."""

    client: SyncLangGraphClient
    thread_id: str
    assistant: str
    look_first: bool  # look at the thread before sending a refused turn again

    def send_until_accepted(self, number: int, done: Done) -> bool:
        for attempt in range(MAX_ATTEMPTS):
            failure = self._send(number)
            if failure is None:
                return True
            with done.lock:
                done.retries += 1
                done.failures.append(failure)
            if self.look_first and answered(self.client, self.thread_id, number):
                with done.lock:
                    done.kept_though_refused += 1
                return True
            time.sleep(0.05 * (attempt + 1))  # backoff for a busy thread, not an ordering
        return False

    def _send(self, number: int) -> str | None:
        """Why the turn was refused, or None: its run succeeded."""
        created: dict[str, Any] = {}
        try:
            turn = user(question(number))
            stream = self.client.runs.stream(
                self.thread_id, self.assistant, input=turn, on_run_created=created.update
            )
            parts = list(stream)
        except ConflictError as exc:
            return f"409: {exc}"
        errors = [p.data for p in parts if p.event == "error"]
        if errors:
            return str(errors[0])[:300]
        if not any(p.event == "end" for p in parts):
            return self._outcome_untold(created["run_id"])
        return None

    def _outcome_untold(self, run_id: str) -> str | None:
        """The outcome of a run whose stream closed without its `end` event (Aegra 0.11 at times
        sends no event at all, ~1 run in 400 here): asked of the run itself."""
        self.client.runs.join(self.thread_id, run_id)
        status = self.client.runs.get(self.thread_id, run_id)["status"]
        return None if status == "success" else f"run {run_id} ended {status} (stream untold)"


def answered(client: SyncLangGraphClient, thread_id: str, number: int) -> bool:
    """Whether the thread's head holds the answer to `question(number)`."""
    messages = client.threads.get_state(thread_id)["values"].get("messages", [])
    return any(m["type"] == "ai" and m["content"] == answer(number) for m in messages)


@dataclass
class History:
    """What a thread's linear history (from the head through the parents) holds."""

    questions: set[str]  # the user messages on it
    answers: Counter[str]  # each answer on it, by text: how many messages (distinct ids) say it
    off_history: list[str]  # the thread's checkpoints that are not on it (a fork's)
    said: list[tuple[str, str]]  # (type, text) of each message with text, the head's first


def linear_history(client: SyncLangGraphClient, thread_id: str) -> History:
    """The thread's linear history, walked from its head through the parents."""
    snapshots = client.threads.get_history(thread_id, limit=1000)
    history = {h["checkpoint"]["checkpoint_id"]: h for h in snapshots}
    messages: dict[str, dict] = {}
    on_history: set[str] = set()
    checkpoint: str | None = client.threads.get_state(thread_id)["checkpoint"]["checkpoint_id"]
    for _ in range(len(history)):
        if checkpoint is None:
            break
        on_history.add(checkpoint)
        snapshot = history[checkpoint]
        messages |= {m["id"]: m for m in snapshot["values"].get("messages", [])}
        checkpoint = (snapshot.get("parent_checkpoint") or {}).get("checkpoint_id")
    if checkpoint is not None:
        raise AssertionError(
            f"the history of {thread_id} loops or goes past {len(history)} entries"
        )
    said = [(m["type"], m["content"]) for m in messages.values() if m["content"]]
    return History(
        {text for kind, text in said if kind == "human"},
        Counter(text for kind, text in said if kind == "ai"),
        [c for c in history if c not in on_history],
        said,
    )


def own_thread_runs_per_second(
    clients: list[SyncLangGraphClient], *, n_clients: int, runs_per_client: int
) -> float:
    """Runs/s of `n_clients` clients, each on a thread of its own, alternating the instances.
    Streamed: Aegra 0.11 answers `runs.wait` only at its next 2 s poll of the run's end (Redis)."""

    def client_turns(k: int) -> None:
        tid = clients[k % len(clients)].threads.create()["thread_id"]
        for r in range(runs_per_client):
            client = clients[(k + r) % len(clients)]
            list(client.runs.stream(tid, "waypoint", input=user(f"what is {k} plus {r}")))

    started = time.monotonic()
    with ThreadPoolExecutor(n_clients) as pool:
        list(pool.map(client_turns, range(n_clients)))
    return n_clients * runs_per_client / (time.monotonic() - started)


class CountingClient:
    """An SDK client that records each call it makes as working (no exception) or not."""

    def __init__(self, client: SyncLangGraphClient) -> None:
        self._client = client
        self.calls: list[tuple[str, str]] = []  # (resource.method, "ok" or the error)

    def __getattr__(self, resource: str) -> Any:
        return _CountingResource(self, resource, getattr(self._client, resource))

    def record(self, name: str, call: Callable[[], Any]) -> Any:
        try:
            result = call()
            if isinstance(result, Iterator):
                result = iter(list(result))  # a stream's failures happen while it is read
        except Exception as exc:
            self.calls.append((name, f"{type(exc).__name__}: {exc}"))
            raise
        self.calls.append((name, "ok"))
        return result


class _CountingResource:
    def __init__(self, counter: CountingClient, name: str, resource: Any) -> None:
        self._counter, self._name, self._resource = counter, name, resource

    def __getattr__(self, method: str) -> Callable[..., Any]:
        target = getattr(self._resource, method)

        def counted(*args: Any, **kwargs: Any) -> Any:
            return self._counter.record(f"{self._name}.{method}", lambda: target(*args, **kwargs))

        return counted


def seconds_per_turn(client: SyncLangGraphClient, *, turns: int) -> dict[str, float]:
    """Median seconds of one turn, by `runs.wait` and by `runs.stream` (read to its end)."""
    tid = client.threads.create()["thread_id"]
    times: dict[str, list[float]] = {"wait": [], "stream": []}
    for i in range(turns):
        for how in times:
            started = time.monotonic()
            call = getattr(client.runs, how)(tid, "waypoint", input=user(f"what is {i} plus 1"))
            if how == "stream":
                list(call)
            times[how].append(time.monotonic() - started)
    return {how: round(statistics.median(seconds), 2) for how, seconds in times.items()}
