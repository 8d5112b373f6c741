"""Side-effecting tool calls run once: each runs as a LangGraph task whose result is saved to the
checkpointer before the node goes on, so a node an engine re-executes after a crash gets the saved
result back instead of running the call again (docs/notes/once.md)."""

from __future__ import annotations

import json
import os
import re
import time
import uuid
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage
from langgraph._internal._constants import (
    CONFIG_KEY_CALL,
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_DURABILITY,
    NS_SEP,
    RETURN,
)
from langgraph.config import get_config
from langgraph.func import task
from langgraph.pregel._algo import task_path_str
from langgraph.runtime import get_runtime

# Tests (and the Aegra kill test) set it to a directory: each time a recorded call has run and its
# result is saved, the process appends {"pid", "call_id", "tool"} to `<dir>/ran.jsonl`, writes it to
# `<dir>/<call id>.recorded`, and, while `<dir>/release` is a FIFO, waits until a writer opens it (or
# the process is killed). Unset, nothing is written and nothing waits (docs/notes/once.md).
HOLD_AFTER_RECORD = "WAYPOINT_TEST_HOLD_AFTER_RECORD"

RunCall = Callable[[ToolCall], ToolMessage]
# How long a recorded call waits for the checkpoint its record is filed under (durability "async")
CHECKPOINT_WAIT_SECONDS = 30.0


@dataclass
class _Started:
    """A recorded call in flight: how to run it, and whether it ran in this process."""

    run: RunCall
    ran: bool = False


# Keyed by a random id passed as the task's input, so the input stays plain data (engines stream
# and trace task inputs) while the task still reaches the node's tools and stream writer. Weak:
# an entry lives as long as the node can still ask for its call's result.
_started: weakref.WeakValueDictionary[str, _Started] = weakref.WeakValueDictionary()


def recording() -> bool:
    """Whether the caller is a node of a graph run whose checkpointer keeps what a task returns
    (a run with durability "exit" saves nothing before it ends, so there is nothing to go back to)."""
    try:
        configurable = get_config()["configurable"]
    except RuntimeError:  # called outside a graph run (e.g. `doctor`)
        return False
    return (
        configurable.get(CONFIG_KEY_CHECKPOINTER) is not None
        and CONFIG_KEY_CALL in configurable
        and configurable.get(CONFIG_KEY_DURABILITY) != "exit"
    )


def start_recorded(call: ToolCall, run: RunCall) -> Callable[[], tuple[ToolMessage, bool]]:
    """Start `call` as a task; the returned function waits for (its result, whether it ran here)
    — False when the result is the one recorded by an earlier execution of this node.

    LangGraph finds a task's saved result by the order the node calls its tasks in, so the caller
    starts its recorded calls in the model's order, from the node's own thread."""
    key = uuid.uuid4().hex
    started = _started[key] = _Started(run)
    future = recorded_tool_call(call, key)

    def result() -> tuple[ToolMessage, bool]:
        message = future.result()
        if message.tool_call_id != call["id"]:
            # A record of another call: the node's calls changed since it was made (e.g. an
            # approval policy that differs on resume). Run this one; at-least-once here.
            return run(call), True
        return message, started.ran

    return result


# LangGraph names a task after its function: graphs.shared.messages.RECORDED_TASK, which the
# event stream filters on (test_side_effects_once checks it). `task(name=...)` would say so, but
# mypy cannot solve the decorator it returns for a sync function.
@task
def recorded_tool_call(call: ToolCall, key: str) -> ToolMessage:
    """Run the call and save its result before returning it: LangGraph saves a task's result in
    the background, so a crash right after the call could lose it and the call would run again."""
    started = _started[key]
    message = started.run(call)
    _save_return(message)
    started.ran = True
    _hold_if_asked(call)
    return message


def _save_return(message: ToolMessage) -> None:
    """Write the task's result as LangGraph itself will (same task id, channel and index, so its
    own later write of it is a duplicate the savers ignore), but now, synchronously."""
    config = get_config()
    this = get_runtime().execution_info  # this task's id, namespace and checkpoint
    assert this is not None, "a task of a graph run always has its execution info"
    # "<graph's namespace>|<node>:<id>|recorded_tool_call:<id>": the task's parent is the node, and
    # LangGraph files the task's writes under the graph's namespace, at its current checkpoint.
    node_ns = this.checkpoint_ns.rpartition(NS_SEP)[0]
    configurable = config["configurable"]
    thread = {k: v for k, v in configurable.items() if not k.startswith("__pregel_")}
    where = thread | {"checkpoint_ns": node_ns.rpartition(NS_SEP)[0]}
    where["checkpoint_id"] = this.checkpoint_id
    path = task_path_str(config.get("metadata", {}).get("langgraph_path", ""))
    saver = configurable[CONFIG_KEY_CHECKPOINTER]
    saver.put_writes({"configurable": where}, [(RETURN, message)], this.task_id, path)
    if configurable.get(CONFIG_KEY_DURABILITY) != "sync":
        # this graph's checkpoint and, for a subgraph, those of the graphs around it
        running = configurable.get(CONFIG_KEY_CHECKPOINT_MAP, {}).items()
        for ns, checkpoint_id in [(ns, cid) for ns, cid in running if ns != node_ns]:
            place = thread | {"checkpoint_ns": ns, "checkpoint_id": checkpoint_id}
            _wait_until_saved(saver, {"configurable": place})


def _wait_until_saved(saver: Any, checkpoint: dict) -> None:
    """Durability "async" (LangGraph's default, the engines' too) saves the checkpoint a step runs
    from while the step runs: a record filed under it is found only once it is there, so the node
    goes on only then. (Were the process to die first, the step would run from a new checkpoint.)"""
    deadline = time.monotonic() + CHECKPOINT_WAIT_SECONDS
    pause = 0.002
    while saver.get_tuple(checkpoint) is None and time.monotonic() < deadline:
        time.sleep(pause)  # the write is in flight in this process; nothing to wait on but it
        pause = min(pause * 2, 0.1)


def _hold_if_asked(call: ToolCall) -> None:
    folder = os.environ.get(HOLD_AFTER_RECORD)
    if not folder:
        return
    seen = json.dumps({"pid": os.getpid(), "call_id": call["id"], "tool": call["name"]})
    with open(Path(folder) / "ran.jsonl", "a", encoding="utf-8") as log:
        log.write(seen + "\n")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", str(call["id"]))
    marker = Path(folder) / f"{name}.recorded"
    marker.with_suffix(".tmp").write_text(seen)
    marker.with_suffix(".tmp").replace(marker)  # appears whole: the test reads it at once
    release = Path(folder) / "release"
    if release.is_fifo():
        with open(release, "rb"):  # opening a FIFO for reading waits for its writer
            pass


def recorded_results(
    pending_writes: Iterable[tuple[str, str, Any]] | None,
) -> dict[str, ToolMessage]:
    """The results a step that never finished recorded, by tool call id: from the pending writes
    of the checkpoint it ran from (its namespace's; a crash leaves them there)."""
    return {
        value.tool_call_id: value
        for _, channel, value in pending_writes or []
        if channel == RETURN and isinstance(value, ToolMessage)
    }
