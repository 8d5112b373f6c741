"""One scenario driven by the official LangGraph Python SDK (`langgraph-sdk`), unchanged, against
any server: Waypoint's `serve` or LangGraph's own (`langgraph dev` on langgraph.json). It returns
what it saw, for tests/test_langgraph_api.py to compare between the two servers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError


def user(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def answer(values: dict) -> str:
    return values["messages"][-1]["content"]


def or_404(call: Callable[[], Any]) -> Any:
    """The call's result, or "404" where the server answers 404 (Aegra 0.11 has no threads.copy,
    and answers a missing store item with 404 where LangGraph's servers answer null)."""
    try:
        return call()
    except NotFoundError:
        return "404"


def run_scenario(url: str, tag: str, client: Any = None) -> dict[str, Any]:
    client = client or get_sync_client(url=url)
    seen: dict[str, Any] = {}
    graphs = {a["graph_id"]: a["assistant_id"] for a in client.assistants.search(limit=20)}
    seen["graphs"] = sorted(graphs)
    assistant = graphs["waypoint"]
    schemas = client.assistants.get_schemas(assistant)
    seen["context_fields"] = sorted(schemas["context_schema"]["properties"])

    thread = client.threads.create(metadata={"suite": tag, "kind": "math"})
    tid = thread["thread_id"]
    seen["created"] = (thread["metadata"], thread["status"])

    parts = list(
        client.runs.stream(
            tid,
            assistant,
            input=user("what is 6 times 7"),
            stream_mode=["values", "updates", "messages-tuple"],
        )
    )
    seen["modes"] = sorted({p.event for p in parts})
    seen["first_answer"] = answer([p.data for p in parts if p.event == "values"][-1])
    seen["nodes"] = [node for p in parts if p.event == "updates" for node in p.data]
    seen["streamed"] = "".join(
        p.data[0]["content"]
        for p in parts
        if p.event == "messages" and p.data[0]["type"] == "AIMessageChunk"
    )

    second = client.runs.wait(tid, assistant, input=user("what is 2 plus 2"))
    seen["second"] = (answer(second), second["turn"], second["iteration"])
    state = client.threads.get_state(tid)
    seen["state"] = (state["values"]["turn"], state["next"], state["interrupts"])

    history = client.threads.get_history(tid, limit=100)
    seen["history_newest_first"] = history[0]["checkpoint"] == state["checkpoint"]
    end_of_first = next(h for h in history if h["values"].get("turn") == 1 and not h["next"])
    client.threads.update_state(
        tid, {}, as_node="finalize", checkpoint_id=end_of_first["checkpoint"]["checkpoint_id"]
    )
    rewound = client.threads.get_state(tid)
    seen["rewound"] = (rewound["values"]["turn"], answer(rewound["values"]))
    third = client.runs.wait(tid, assistant, input=user("what is 10 minus 3"))
    asked = [m["content"] for m in third["messages"] if m["type"] == "human"]
    seen["branch"] = (answer(third), third["turn"], asked)

    copy = or_404(lambda: client.threads.copy(tid))
    if copy == "404":
        seen["copy"] = copy
    else:
        copied = client.threads.get_state(copy["thread_id"])
        seen["copy"] = (copy["thread_id"] != tid, answer(copied["values"]), copy["metadata"])

    paused = client.threads.create(metadata={"suite": tag, "kind": "approval"})
    pid = paused["thread_id"]
    list(
        client.runs.stream(
            pid, assistant, input=user("write 'hi' to notes.txt"), context={"approval": "ask"}
        )
    )
    waiting = client.threads.get(pid)
    [pending] = client.threads.get_state(pid)["interrupts"]
    [question] = pending["value"]["calls"]
    seen["paused"] = (waiting["status"], pending["value"]["type"], question["name"])
    resumed = client.runs.wait(
        pid,
        assistant,
        command={"resume": {question["id"]: {"action": "approve"}}},
        context={"approval": "ask"},
    )
    seen["resumed"] = (resumed["status"], client.threads.get(pid)["status"])

    run = client.runs.create(tid, assistant, input=user("what is 3 times 3"))
    joined = client.runs.join(tid, run["run_id"])
    seen["background"] = (answer(joined), client.runs.get(tid, run["run_id"])["status"])
    seen["runs_listed"] = run["run_id"] in {r["run_id"] for r in client.runs.list(tid, limit=50)}

    found = client.threads.search(metadata={"suite": tag, "kind": "approval"})
    seen["search"] = [t["thread_id"] == pid for t in found]

    client.store.put_item(["sdk", tag], "colour", {"value": "green"})
    item = client.store.get_item(["sdk", tag], "colour")
    listed = client.store.search_items(["sdk", tag])
    client.store.delete_item(["sdk", tag], "colour")
    gone = or_404(lambda: client.store.get_item(["sdk", tag], "colour")) in (None, "404")
    seen["store"] = (item["value"], [i["key"] for i in listed["items"]], gone)
    return seen
