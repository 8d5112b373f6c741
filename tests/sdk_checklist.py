"""The official LangGraph Python SDK (`langgraph-sdk`, sync client), call by call, against any
server: each call runs on its own (its own threads, so one failure never causes another) and is
recorded as "ok" or the error it raised. tests/test_sdk_checklist.py compares serve and langgraph dev.

A call "works" when it answers what LangGraph's server answers, checked loosely (the shape and the
one fact the call is for), not merely when it raises nothing."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

CALL_TIMEOUT = 60.0  # seconds; a call that hangs is recorded as its timeout
JOIN_SECONDS = 3.0  # how long a thread's stream is followed


@dataclass
class Bench:
    """What a call needs: the client, the main graph's assistant and helpers that make threads."""

    client: SyncLangGraphClient
    assistant: str
    tag: str

    def thread(self, **metadata: Any) -> str:
        made = self.client.threads.create(metadata={"suite": self.tag, **metadata})
        return made["thread_id"]

    def answered(self, question: str = "what is 6 times 7") -> str:
        """A thread with one answered turn."""
        tid = self.thread()
        self.client.runs.wait(tid, self.assistant, input=user(question))
        return tid

    def paused(self) -> tuple[str, dict]:
        """A thread whose turn waits for approval of a write_file call (and that call)."""
        tid = self.thread()
        self.client.runs.wait(
            tid, self.assistant, input=user("write 'hi' to notes.txt"), context=ASK
        )
        [pending] = self.client.threads.get_state(tid)["interrupts"]
        [question] = pending["value"]["calls"]
        return tid, question

    def stream(self, tid: str | None, modes: list[str], **extra: Any) -> list[Any]:
        return list(
            self.client.runs.stream(
                tid, self.assistant, input=user("what is 6 times 7"), stream_mode=modes, **extra
            )
        )


ASK = {"approval": "ask"}
CALLS: dict[str, Callable[[Bench], None]] = {}


def check(name: str) -> Callable[[Callable[[Bench], None]], Callable[[Bench], None]]:
    def register(call: Callable[[Bench], None]) -> Callable[[Bench], None]:
        assert name not in CALLS, f"two calls named {name}"
        CALLS[name] = call
        return call

    return register


def user(text: str, **extra: Any) -> dict:
    return {"messages": [{"role": "user", "content": text, **extra}]}


def answer(values: dict) -> str:
    return values["messages"][-1]["content"]


def refused(status: int, call: Callable[[], Any]) -> None:
    """The call must fail with this HTTP status (what LangGraph's server answers)."""
    try:
        call()
    except httpx.HTTPStatusError as exc:
        assert exc.response.status_code == status, exc.response.status_code
        return
    raise AssertionError(f"expected HTTP {status}, the call succeeded")


def bounded(stream: Iterator[Any], seconds: float) -> list[Any]:
    """The parts a stream sends until it ends or `seconds` pass (a stream that stays open is
    left to its daemon thread); an error of the stream is raised."""
    parts: list[Any] = []
    failed: list[BaseException] = []

    def consume() -> None:
        try:
            parts.extend(stream)
        except BaseException as exc:  # handed to the caller
            failed.append(exc)

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    reader.join(seconds)
    if failed:
        raise failed[0]
    return list(parts)


def events(parts: list[Any]) -> set[str]:
    return {p.event for p in parts}


def run_checklist(url: str, tag: str) -> dict[str, str]:
    """Every call of the checklist against the server at `url`: "ok" or the error."""
    client = get_sync_client(url=url, timeout=CALL_TIMEOUT)
    graphs = {a["graph_id"]: a["assistant_id"] for a in client.assistants.search(limit=20)}
    bench = Bench(client, graphs["waypoint"], tag)
    outcomes: dict[str, str] = {}
    for name, call in CALLS.items():
        try:
            call(bench)
        except Exception as exc:  # the outcome of the call, whatever it is
            outcomes[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
        else:
            outcomes[name] = "ok"
    return outcomes


# --- assistants ---------------------------------------------------------------------------------


@check("assistants.search")
def _(b: Bench) -> None:
    found = b.client.assistants.search(limit=20)
    assert {"waypoint", "waypoint-plan"} <= {a["graph_id"] for a in found}


@check("assistants.search(graph_id)")
def _(b: Bench) -> None:
    found = b.client.assistants.search(graph_id="waypoint-plan")
    assert found and {a["graph_id"] for a in found} == {"waypoint-plan"}


@check("assistants.search(metadata)")
def _(b: Bench) -> None:
    assert b.client.assistants.search(metadata={"created_by": "system"}, limit=20)


@check("assistants.search(limit, offset)")
def _(b: Bench) -> None:
    assert len(b.client.assistants.search(limit=1, offset=1)) == 1


@check("assistants.count")
def _(b: Bench) -> None:
    assert b.client.assistants.count() >= 4


@check("assistants.count(graph_id)")
def _(b: Bench) -> None:
    assert b.client.assistants.count(graph_id="waypoint") >= 1


@check("assistants.get")
def _(b: Bench) -> None:
    assert b.client.assistants.get(b.assistant)["graph_id"] == "waypoint"


@check("assistants.get(missing)")
def _(b: Bench) -> None:
    refused(404, lambda: b.client.assistants.get(str(uuid.uuid4())))


@check("assistants.get_graph")
def _(b: Bench) -> None:
    drawn = b.client.assistants.get_graph(b.assistant)
    assert {"agent", "tools"} <= {n["id"] for n in drawn["nodes"]}


@check("assistants.get_graph(xray)")
def _(b: Bench) -> None:
    assert b.client.assistants.get_graph(b.assistant, xray=True)["nodes"]


@check("assistants.get_schemas")
def _(b: Bench) -> None:
    schemas = b.client.assistants.get_schemas(b.assistant)
    assert "approval" in schemas["context_schema"]["properties"]


@check("assistants.get_subgraphs")
def _(b: Bench) -> None:
    assert isinstance(b.client.assistants.get_subgraphs(b.assistant), dict)


@check("assistants.get_subgraphs(recurse)")
def _(b: Bench) -> None:
    assert isinstance(b.client.assistants.get_subgraphs(b.assistant, recurse=True), dict)


@check("assistants.create")
def _(b: Bench) -> None:
    made = b.client.assistants.create("waypoint", context={"max_iterations": 4}, name="four")
    assert made["graph_id"] == "waypoint"


@check("assistants.update")
def _(b: Bench) -> None:
    made = b.client.assistants.create("waypoint", name="before")
    assert b.client.assistants.update(made["assistant_id"], name="after")["name"] == "after"


@check("assistants.delete")
def _(b: Bench) -> None:
    made = b.client.assistants.create("waypoint", name="doomed")
    b.client.assistants.delete(made["assistant_id"])


@check("assistants.get_versions")
def _(b: Bench) -> None:
    assert b.client.assistants.get_versions(b.assistant)


@check("assistants.get_versions(own)")
def _(b: Bench) -> None:
    made = b.client.assistants.create("waypoint", name="versioned")
    b.client.assistants.update(made["assistant_id"], context={"max_iterations": 4})
    found = b.client.assistants.get_versions(made["assistant_id"])
    assert [v["version"] for v in found] == [2, 1]


@check("assistants.set_latest")
def _(b: Bench) -> None:
    made = b.client.assistants.create("waypoint", name="first")
    b.client.assistants.update(made["assistant_id"], name="second")
    assert b.client.assistants.set_latest(made["assistant_id"], 1)["name"] == "first"


@check("assistants.search(name)")
def _(b: Bench) -> None:
    name = f"named-{uuid.uuid4()}"
    made = b.client.assistants.create("waypoint", name=name)
    found = b.client.assistants.search(name=name)
    assert [a["assistant_id"] for a in found] == [made["assistant_id"]]


@check("runs.wait(own assistant)")
def _(b: Bench) -> None:
    made = b.client.assistants.create("waypoint", context={"max_iterations": 4}, name="four")
    done = b.client.runs.wait(b.thread(), made["assistant_id"], input=user("what is 2 plus 2"))
    assert answer(done) == "2 + 2 = 4"


# --- threads ------------------------------------------------------------------------------------


@check("threads.create")
def _(b: Bench) -> None:
    assert b.client.threads.create()["status"] == "idle"


@check("threads.create(metadata)")
def _(b: Bench) -> None:
    made = b.client.threads.create(metadata={"kind": "math"})
    assert made["metadata"]["kind"] == "math"


@check("threads.create(thread_id)")
def _(b: Bench) -> None:
    tid = str(uuid.uuid4())
    assert b.client.threads.create(thread_id=tid)["thread_id"] == tid


@check("threads.create(if_exists=do_nothing)")
def _(b: Bench) -> None:
    tid = b.thread(kind="first")
    again = b.client.threads.create(thread_id=tid, if_exists="do_nothing")
    assert again["metadata"]["kind"] == "first"


@check("threads.create(if_exists=raise)")
def _(b: Bench) -> None:
    tid = b.thread()
    refused(409, lambda: b.client.threads.create(thread_id=tid, if_exists="raise"))


@check("threads.get")
def _(b: Bench) -> None:
    tid = b.answered()
    found = b.client.threads.get(tid)
    assert found["status"] == "idle" and answer(found["values"]) == "6 * 7 = 42"


@check("threads.get(missing)")
def _(b: Bench) -> None:
    refused(404, lambda: b.client.threads.get(str(uuid.uuid4())))


@check("threads.get(interrupted)")
def _(b: Bench) -> None:
    tid, _ = b.paused()
    found = b.client.threads.get(tid)
    assert found["status"] == "interrupted" and found["interrupts"]


@check("threads.update")
def _(b: Bench) -> None:
    tid = b.thread()
    updated = b.client.threads.update(tid, metadata={"kind": "renamed"})
    assert updated["metadata"]["kind"] == "renamed"


@check("threads.delete")
def _(b: Bench) -> None:
    tid = b.answered()
    b.client.threads.delete(tid)
    refused(404, lambda: b.client.threads.get(tid))


@check("threads.search")
def _(b: Bench) -> None:
    b.thread()
    assert b.client.threads.search(limit=5)


@check("threads.search(metadata)")
def _(b: Bench) -> None:
    mark = str(uuid.uuid4())
    tid = b.thread(mark=mark)
    assert [t["thread_id"] for t in b.client.threads.search(metadata={"mark": mark})] == [tid]


@check("threads.search(status)")
def _(b: Bench) -> None:
    tid, _ = b.paused()
    found = b.client.threads.search(status="interrupted", limit=100)
    assert tid in {t["thread_id"] for t in found}


@check("threads.search(values)")
def _(b: Bench) -> None:
    tid = b.answered()
    found = b.client.threads.search(values={"status": "answered"}, limit=1000)
    assert tid in {t["thread_id"] for t in found}


@check("threads.search(ids)")
def _(b: Bench) -> None:
    tid = b.thread()
    assert [t["thread_id"] for t in b.client.threads.search(ids=[tid])] == [tid]


@check("threads.search(sort_by, sort_order)")
def _(b: Bench) -> None:
    first, second = b.thread(), b.thread()
    found = [t["thread_id"] for t in b.client.threads.search(sort_by="created_at", limit=1000)]
    assert found.index(second) < found.index(first)


@check("threads.search(limit, offset)")
def _(b: Bench) -> None:
    b.thread()
    b.thread()
    assert len(b.client.threads.search(limit=1, offset=1)) == 1


@check("threads.count")
def _(b: Bench) -> None:
    b.thread()
    assert b.client.threads.count() >= 1


@check("threads.count(metadata)")
def _(b: Bench) -> None:
    mark = str(uuid.uuid4())
    b.thread(mark=mark)
    b.thread(mark=mark)
    assert b.client.threads.count(metadata={"mark": mark}) == 2


@check("threads.copy")
def _(b: Bench) -> None:
    tid = b.answered()
    copy = b.client.threads.copy(tid)
    assert copy["thread_id"] != tid
    assert answer(b.client.threads.get_state(copy["thread_id"])["values"]) == "6 * 7 = 42"


@check("threads.get_state")
def _(b: Bench) -> None:
    state = b.client.threads.get_state(b.answered())
    assert state["values"]["turn"] == 1 and state["next"] == [] and state["checkpoint"]


@check("threads.get_state(empty)")
def _(b: Bench) -> None:
    assert b.client.threads.get_state(b.thread())["values"] in ({}, None, [])


@check("threads.get_state(checkpoint_id)")
def _(b: Bench) -> None:
    tid = b.answered()
    parent = b.client.threads.get_state(tid)["parent_checkpoint"]["checkpoint_id"]
    at = b.client.threads.get_state(tid, checkpoint_id=parent)
    assert at["checkpoint"]["checkpoint_id"] == parent and at["next"]


@check("threads.get_state(checkpoint)")
def _(b: Bench) -> None:
    tid = b.answered()
    parent = b.client.threads.get_state(tid)["parent_checkpoint"]
    at = b.client.threads.get_state(tid, checkpoint=parent)
    assert at["checkpoint"]["checkpoint_id"] == parent["checkpoint_id"]


@check("threads.get_state(subgraphs)")
def _(b: Bench) -> None:
    assert b.client.threads.get_state(b.answered(), subgraphs=True)["values"]["turn"] == 1


@check("threads.get_state(interrupted)")
def _(b: Bench) -> None:
    tid, question = b.paused()
    [pending] = b.client.threads.get_state(tid)["interrupts"]
    assert pending["value"]["type"] == "approval" and question["name"] == "write_file"


@check("threads.update_state(as_node=finalize)")
def _(b: Bench) -> None:
    tid = b.answered()
    written = b.client.threads.update_state(tid, {"status": "answered"}, as_node="finalize")
    assert written["checkpoint"]["checkpoint_id"]


@check("threads.update_state(checkpoint_id)")
def _(b: Bench) -> None:
    tid = b.answered()
    b.client.runs.wait(tid, b.assistant, input=user("what is 2 plus 2"))
    history = b.client.threads.get_history(tid, limit=100)
    end_of_first = next(h for h in history if h["values"].get("turn") == 1 and not h["next"])
    b.client.threads.update_state(
        tid, {}, as_node="finalize", checkpoint_id=end_of_first["checkpoint"]["checkpoint_id"]
    )
    assert b.client.threads.get_state(tid)["values"]["turn"] == 1


@check("threads.update_state(as_node=agent)")
def _(b: Bench) -> None:
    tid = b.answered()
    b.client.threads.update_state(tid, {"status": "answered"}, as_node="agent")


@check("threads.update_state(no as_node)")
def _(b: Bench) -> None:
    tid = b.answered()
    b.client.threads.update_state(tid, {"status": "answered"})


@check("threads.get_history")
def _(b: Bench) -> None:
    tid = b.answered()
    history = b.client.threads.get_history(tid, limit=100)
    assert history[0]["checkpoint"] == b.client.threads.get_state(tid)["checkpoint"]


@check("threads.get_history(limit)")
def _(b: Bench) -> None:
    assert len(b.client.threads.get_history(b.answered(), limit=2)) == 2


@check("threads.get_history(before=config)")
def _(b: Bench) -> None:
    tid = b.answered()
    first, second, *_ = b.client.threads.get_history(tid, limit=100)
    page = b.client.threads.get_history(tid, limit=1, before={"configurable": first["checkpoint"]})
    assert [h["checkpoint"]["checkpoint_id"] for h in page] == [
        second["checkpoint"]["checkpoint_id"]
    ]


@check("threads.get_history(metadata)")
def _(b: Bench) -> None:
    tid = b.answered()
    found = b.client.threads.get_history(tid, limit=100, metadata={"source": "loop"})
    assert found and all(h["metadata"]["source"] == "loop" for h in found)


@check("threads.get_history(checkpoint)")
def _(b: Bench) -> None:
    tid = b.answered()
    parent = b.client.threads.get_state(tid)["parent_checkpoint"]
    found = b.client.threads.get_history(tid, limit=100, checkpoint=parent)
    assert found


@check("threads.join_stream")
def _(b: Bench) -> None:
    tid = b.thread()
    b.client.runs.create(tid, b.assistant, input=user("what is 6 times 7"))
    # LangGraph's thread stream stays open after the run (it follows the thread's next runs too)
    bounded(b.client.threads.join_stream(tid), JOIN_SECONDS)


@check("threads.prune")
def _(b: Bench) -> None:
    tid = b.answered()
    assert b.client.threads.prune([tid])["pruned_count"] == 1
    refused(404, lambda: b.client.threads.get(tid))


@check("threads.prune(keep_latest)")
def _(b: Bench) -> None:
    tid = b.answered()
    b.client.threads.prune([tid], strategy="keep_latest")
    assert answer(b.client.threads.get_state(tid)["values"]) == "6 * 7 = 42"


# --- runs ---------------------------------------------------------------------------------------


@check("runs.stream(values)")
def _(b: Bench) -> None:
    parts = b.stream(b.thread(), ["values"])
    assert answer([p.data for p in parts if p.event == "values"][-1]) == "6 * 7 = 42"


@check("runs.stream(updates)")
def _(b: Bench) -> None:
    parts = b.stream(b.thread(), ["updates"])
    assert [n for p in parts if p.event == "updates" for n in p.data] == ["agent", "tools", "agent"]


@check("runs.stream(messages-tuple)")
def _(b: Bench) -> None:
    parts = b.stream(b.thread(), ["messages-tuple"])
    chunks = [p.data for p in parts if p.event == "messages"]
    text = "".join(m["content"] for m, _ in chunks if m["type"] == "AIMessageChunk")
    assert text == "6 * 7 = 42"
    for _, metadata in chunks:
        assert {"run_id", "graph_id", "assistant_id", "langgraph_node"} <= set(metadata)


@check("runs.stream(messages)")
def _(b: Bench) -> None:
    parts = b.stream(b.thread(), ["messages"])
    assert {"messages/metadata", "messages/partial"} <= events(parts)
    texts = [p.data[0]["content"] for p in parts if p.event == "messages/partial"]
    assert "6 * 7 = 42" in texts


@check("runs.stream(custom)")
def _(b: Bench) -> None:
    parts = b.stream(b.thread(), ["custom"])
    types = [p.data.get("type") for p in parts if p.event == "custom"]
    assert "tool_call" in types and "final" not in types


@check("runs.stream(events)")
def _(b: Bench) -> None:
    parts = b.stream(b.thread(), ["events"])
    kinds = {p.data["event"] for p in parts if p.event == "events"}
    assert "on_chat_model_stream" in kinds


@check("runs.stream(debug)")
def _(b: Bench) -> None:
    parts = b.stream(b.thread(), ["debug"])
    kinds = {p.data["type"] for p in parts if p.event == "debug"}
    assert {"checkpoint", "task", "task_result"} <= kinds


@check("runs.stream(tasks)")
def _(b: Bench) -> None:
    parts = b.stream(b.thread(), ["tasks"])
    names = [p.data["name"] for p in parts if p.event == "tasks" and "input" in p.data]
    assert names[:3] == ["agent", "tools", "agent"] or "agent" in names


@check("runs.stream(checkpoints)")
def _(b: Bench) -> None:
    parts = b.stream(b.thread(), ["checkpoints"])
    last = [p.data for p in parts if p.event == "checkpoints"][-1]
    assert last["next"] == [] and answer(last["values"]) == "6 * 7 = 42"


@check("runs.stream(every mode)")
def _(b: Bench) -> None:
    modes = ["values", "updates", "messages-tuple", "custom", "debug", "tasks", "checkpoints"]
    parts = b.stream(b.thread(), modes)
    assert {"values", "updates", "messages", "custom", "debug", "tasks", "checkpoints"} <= events(
        parts
    )


@check("runs.stream(stream_subgraphs)")
def _(b: Bench) -> None:
    parts = b.stream(b.thread(), ["values", "updates"], stream_subgraphs=True)
    assert answer([p.data for p in parts if p.event == "values"][-1]) == "6 * 7 = 42"


@check("runs.stream(if_not_exists=create)")
def _(b: Bench) -> None:
    parts = b.stream(str(uuid.uuid4()), ["values"], if_not_exists="create")
    assert answer([p.data for p in parts if p.event == "values"][-1]) == "6 * 7 = 42"


@check("runs.stream(missing thread)")
def _(b: Bench) -> None:
    refused(404, lambda: b.stream(str(uuid.uuid4()), ["values"]))


@check("runs.stream(stateless)")
def _(b: Bench) -> None:
    parts = b.stream(None, ["values"])
    assert answer([p.data for p in parts if p.event == "values"][-1]) == "6 * 7 = 42"


@check("runs.stream(interrupt_before)")
def _(b: Bench) -> None:
    tid = b.thread()
    b.stream(tid, ["values"], interrupt_before=["tools"])
    assert b.client.threads.get_state(tid)["next"] == ["tools"]


@check("runs.stream(interrupt_after)")
def _(b: Bench) -> None:
    tid = b.thread()
    b.stream(tid, ["values"], interrupt_after=["agent"])
    assert b.client.threads.get_state(tid)["next"] == ["tools"]


@check("runs.wait(input None) past a breakpoint")
def _(b: Bench) -> None:
    tid = b.thread()
    b.stream(tid, ["values"], interrupt_before=["tools"])
    done = b.client.runs.wait(tid, b.assistant, input=None)
    assert answer(done) == "6 * 7 = 42"


@check("runs.wait")
def _(b: Bench) -> None:
    done = b.client.runs.wait(b.thread(), b.assistant, input=user("what is 2 plus 2"))
    assert answer(done) == "2 + 2 = 4" and done["turn"] == 1


@check("runs.wait(second turn)")
def _(b: Bench) -> None:
    tid = b.answered()
    done = b.client.runs.wait(tid, b.assistant, input=user("what is 2 plus 2"))
    assert answer(done) == "2 + 2 = 4" and done["turn"] == 2


@check("runs.wait(stateless)")
def _(b: Bench) -> None:
    assert answer(b.client.runs.wait(None, b.assistant, input=user("what is 2 plus 2"))) == (
        "2 + 2 = 4"
    )


@check("runs.wait(graph id as assistant)")
def _(b: Bench) -> None:
    done = b.client.runs.wait(b.thread(), "waypoint", input=user("what is 2 plus 2"))
    assert answer(done) == "2 + 2 = 4"


@check("runs.wait(plan strategy)")
def _(b: Bench) -> None:
    done = b.client.runs.wait(b.thread(), "waypoint-plan", input=user("what is 2 plus 2"))
    assert "4" in answer(done)


@check("runs.wait(context)")
def _(b: Bench) -> None:
    done = b.client.runs.wait(
        b.thread(), b.assistant, input=user("what is 2 plus 2"), context={"max_iterations": 3}
    )
    assert answer(done) == "2 + 2 = 4"


@check("runs.wait(config.configurable settings)")
def _(b: Bench) -> None:
    tid = b.thread()
    b.client.runs.wait(
        tid,
        b.assistant,
        input=user("write 'hi' to notes.txt"),
        config={"configurable": {"approval": "never"}},
    )
    assert not b.client.threads.get_state(tid)["interrupts"]  # refused, not asked


@check("runs.wait(message id kept)")
def _(b: Bench) -> None:
    tid = b.thread()
    b.client.runs.wait(tid, b.assistant, input=user("what is 2 plus 2", id="client-id-1"))
    [human] = [
        m for m in b.client.threads.get_state(tid)["values"]["messages"] if m["type"] == "human"
    ]
    assert human["id"] == "client-id-1"


@check("runs.wait(metadata)")
def _(b: Bench) -> None:
    tid = b.thread()
    run = b.client.runs.create(tid, b.assistant, input=user("what is 2 plus 2"), metadata={"k": 1})
    b.client.runs.join(tid, run["run_id"])
    assert b.client.runs.get(tid, run["run_id"])["metadata"]["k"] == 1


@check("runs.wait(checkpoint_id, input): a branch")
def _(b: Bench) -> None:
    tid = b.answered()
    b.client.runs.wait(tid, b.assistant, input=user("what is 2 plus 2"))
    history = b.client.threads.get_history(tid, limit=100)
    end_of_first = next(h for h in history if h["values"].get("turn") == 1 and not h["next"])
    done = b.client.runs.wait(
        tid,
        b.assistant,
        input=user("what is 10 minus 3"),
        checkpoint_id=end_of_first["checkpoint"]["checkpoint_id"],
    )
    asked = [m["content"] for m in done["messages"] if m["type"] == "human"]
    assert asked == ["what is 6 times 7", "what is 10 minus 3"]


@check("runs.wait(checkpoint_id, no input): a replay")
def _(b: Bench) -> None:
    tid = b.answered()
    parent = b.client.threads.get_state(tid)["parent_checkpoint"]["checkpoint_id"]
    done = b.client.runs.wait(tid, b.assistant, input=None, checkpoint_id=parent)
    assert answer(done) == "6 * 7 = 42"


@check("runs.wait(command resume)")
def _(b: Bench) -> None:
    tid, question = b.paused()
    done = b.client.runs.wait(
        tid, b.assistant, command={"resume": {question["id"]: {"action": "approve"}}}, context=ASK
    )
    assert done["status"] == "answered" and b.client.threads.get(tid)["status"] == "idle"


@check("runs.wait(command resume, null fields)")
def _(b: Bench) -> None:
    tid, question = b.paused()
    command: Any = {
        "graph": None,
        "update": None,
        "resume": {question["id"]: {"action": "reject"}},
        "goto": [],
    }
    done = b.client.runs.wait(tid, b.assistant, command=command, context=ASK)
    # the turn ran on: the rejected call's action was not done (serve records that as failed)
    assert done["status"] in ("answered", "failed") and done["messages"][-1]["type"] == "ai"


@check("runs.wait(command goto)")
def _(b: Bench) -> None:
    tid = b.answered()
    done = b.client.runs.wait(tid, b.assistant, command={"goto": "finalize"})
    assert answer(done) == "6 * 7 = 42"


@check("runs.wait(command update)")
def _(b: Bench) -> None:
    tid = b.answered()
    b.client.runs.wait(tid, b.assistant, command={"update": {"status": "answered"}})
    assert b.client.threads.get_state(tid)["values"]["status"] == "answered"


@check("runs.create")
def _(b: Bench) -> None:
    run = b.client.runs.create(b.thread(), b.assistant, input=user("what is 3 times 3"))
    assert run["status"] in ("pending", "running", "success")


@check("runs.create(stateless)")
def _(b: Bench) -> None:
    run = b.client.runs.create(None, b.assistant, input=user("what is 3 times 3"))
    assert run["run_id"]


@check("runs.create_batch")
def _(b: Bench) -> None:
    made = b.client.runs.create_batch(
        [{"assistant_id": b.assistant, "input": user("what is 3 times 3")}] * 2
    )
    assert len(made) == 2


@check("runs.join")
def _(b: Bench) -> None:
    tid = b.thread()
    run = b.client.runs.create(tid, b.assistant, input=user("what is 3 times 3"))
    assert answer(b.client.runs.join(tid, run["run_id"])) == "3 * 3 = 9"


@check("runs.join_stream")
def _(b: Bench) -> None:
    tid = b.thread()
    run = b.client.runs.create(tid, b.assistant, input=user("what is 3 times 3"))
    parts = list(b.client.runs.join_stream(tid, run["run_id"]))
    assert parts is not None
    assert b.client.runs.get(tid, run["run_id"])["status"] == "success"


@check("runs.get")
def _(b: Bench) -> None:
    tid = b.thread()
    run = b.client.runs.create(tid, b.assistant, input=user("what is 3 times 3"))
    b.client.runs.join(tid, run["run_id"])
    assert b.client.runs.get(tid, run["run_id"])["status"] == "success"


@check("runs.get(missing)")
def _(b: Bench) -> None:
    refused(404, lambda: b.client.runs.get(b.thread(), str(uuid.uuid4())))


@check("runs.list")
def _(b: Bench) -> None:
    tid = b.thread()
    run = b.client.runs.create(tid, b.assistant, input=user("what is 3 times 3"))
    b.client.runs.join(tid, run["run_id"])
    assert run["run_id"] in {r["run_id"] for r in b.client.runs.list(tid)}


@check("runs.list(status)")
def _(b: Bench) -> None:
    tid = b.thread()
    run = b.client.runs.create(tid, b.assistant, input=user("what is 3 times 3"))
    b.client.runs.join(tid, run["run_id"])
    assert [r["run_id"] for r in b.client.runs.list(tid, status="success")] == [run["run_id"]]


@check("runs.cancel")
def _(b: Bench) -> None:
    tid = b.thread()
    run = b.client.runs.create(tid, b.assistant, input=user("what is 3 times 3"))
    b.client.runs.cancel(tid, run["run_id"])


@check("runs.cancel(wait)")
def _(b: Bench) -> None:
    tid = b.thread()
    run = b.client.runs.create(tid, b.assistant, input=user("what is 3 times 3"))
    b.client.runs.cancel(tid, run["run_id"], wait=True)
    assert b.client.threads.get(tid)["status"] != "busy"


@check("runs.cancel(action=rollback)")
def _(b: Bench) -> None:
    tid = b.thread()
    run = b.client.runs.create(tid, b.assistant, input=user("what is 3 times 3"))
    b.client.runs.cancel(tid, run["run_id"], action="rollback")


@check("runs.cancel_many")
def _(b: Bench) -> None:
    tid = b.thread()
    run = b.client.runs.create(tid, b.assistant, input=user("what is 3 times 3"))
    b.client.runs.cancel_many(thread_id=tid, run_ids=[run["run_id"]])


@check("runs.delete")
def _(b: Bench) -> None:
    tid = b.thread()
    run = b.client.runs.create(tid, b.assistant, input=user("what is 3 times 3"))
    b.client.runs.join(tid, run["run_id"])
    b.client.runs.delete(tid, run["run_id"])


def second_run(b: Bench, strategy: str) -> dict:
    """A run, then at once a second with `strategy`; the second one's answer."""
    tid = b.thread()
    b.client.runs.create(tid, b.assistant, input=user("what is 3 times 3"))
    second = b.client.runs.create(
        tid, b.assistant, input=user("what is 2 plus 2"), multitask_strategy=strategy
    )
    return b.client.runs.join(tid, second["run_id"])


@check("runs.create(multitask_strategy=enqueue)")
def _(b: Bench) -> None:
    assert answer(second_run(b, "enqueue")) == "2 + 2 = 4"


@check("runs.create(multitask_strategy=interrupt)")
def _(b: Bench) -> None:
    assert answer(second_run(b, "interrupt")) == "2 + 2 = 4"


@check("runs.create(multitask_strategy=rollback)")
def _(b: Bench) -> None:
    assert answer(second_run(b, "rollback")) == "2 + 2 = 4"


@check("runs.create(multitask_strategy=reject), idle thread")
def _(b: Bench) -> None:
    tid = b.thread()
    run = b.client.runs.create(
        tid, b.assistant, input=user("what is 3 times 3"), multitask_strategy="reject"
    )
    assert answer(b.client.runs.join(tid, run["run_id"])) == "3 * 3 = 9"


@check("runs.wait(durability)")
def _(b: Bench) -> None:
    done = b.client.runs.wait(
        b.thread(), b.assistant, input=user("what is 2 plus 2"), durability="sync"
    )
    assert answer(done) == "2 + 2 = 4"


@check("runs.stream(unknown stream mode)")
def _(b: Bench) -> None:
    refused(422, lambda: b.stream(b.thread(), ["sideways"]))


# --- store --------------------------------------------------------------------------------------


def namespace(b: Bench) -> list[str]:
    return ["sdk", b.tag, str(uuid.uuid4())[:8]]


@check("store.put_item")
def _(b: Bench) -> None:
    b.client.store.put_item(namespace(b), "colour", {"value": "green"})


@check("store.get_item")
def _(b: Bench) -> None:
    ns = namespace(b)
    b.client.store.put_item(ns, "colour", {"value": "green"})
    assert b.client.store.get_item(ns, "colour")["value"] == {"value": "green"}


@check("store.get_item(missing)")
def _(b: Bench) -> None:
    assert b.client.store.get_item(namespace(b), "nothing") is None


@check("store.put_item(overwrite)")
def _(b: Bench) -> None:
    ns = namespace(b)
    b.client.store.put_item(ns, "colour", {"value": "green"})
    b.client.store.put_item(ns, "colour", {"value": "blue"})
    assert b.client.store.get_item(ns, "colour")["value"] == {"value": "blue"}


@check("store.search_items")
def _(b: Bench) -> None:
    ns = namespace(b)
    b.client.store.put_item(ns, "a", {"n": 1})
    b.client.store.put_item(ns, "b", {"n": 2})
    assert sorted(i["key"] for i in b.client.store.search_items(ns)["items"]) == ["a", "b"]


@check("store.search_items(filter)")
def _(b: Bench) -> None:
    ns = namespace(b)
    b.client.store.put_item(ns, "a", {"n": 1})
    b.client.store.put_item(ns, "b", {"n": 2})
    found = b.client.store.search_items(ns, filter={"n": 2})["items"]
    assert [i["key"] for i in found] == ["b"]


@check("store.search_items(limit, offset)")
def _(b: Bench) -> None:
    ns = namespace(b)
    for key in "abc":
        b.client.store.put_item(ns, key, {"k": key})
    assert len(b.client.store.search_items(ns, limit=1, offset=1)["items"]) == 1


@check("store.search_items(prefix)")
def _(b: Bench) -> None:
    ns = namespace(b)
    b.client.store.put_item([*ns, "deeper"], "a", {"n": 1})
    assert [i["key"] for i in b.client.store.search_items(ns)["items"]] == ["a"]


@check("store.list_namespaces")
def _(b: Bench) -> None:
    ns = namespace(b)
    b.client.store.put_item(ns, "a", {"n": 1})
    assert ns in b.client.store.list_namespaces(limit=1000)["namespaces"]


@check("store.list_namespaces(prefix)")
def _(b: Bench) -> None:
    ns = namespace(b)
    b.client.store.put_item(ns, "a", {"n": 1})
    assert b.client.store.list_namespaces(prefix=ns)["namespaces"] == [ns]


@check("store.list_namespaces(max_depth)")
def _(b: Bench) -> None:
    ns = namespace(b)
    b.client.store.put_item(ns, "a", {"n": 1})
    found = b.client.store.list_namespaces(prefix=ns[:2], max_depth=2)["namespaces"]
    assert found == [ns[:2]]


@check("store.delete_item")
def _(b: Bench) -> None:
    ns = namespace(b)
    b.client.store.put_item(ns, "a", {"n": 1})
    b.client.store.delete_item(ns, "a")
    assert b.client.store.get_item(ns, "a") is None


# --- crons --------------------------------------------------------------------------------------
# The crons engineer adds crons.create, create_for_thread, search, count, update and delete here,
# each with @check("crons.…"), like the calls above.
