"""Crash recovery: a run stopped by Ctrl-C, a cancel, a crash or a kill leaves a consistent thread.

Whatever stopped it, the unfinished step is closed as if `finalize` ran (its only edge is to END, so
no step stays pending): the tool calls left open are answered "cancelled", and what the user already
saw of the answer is kept. The turn's metadata goes with the close, so history files it there."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.types import StateSnapshot

from app.service.events import EventSink, Notice
from app.service.threads import load_state, saver_of, thread_config
from app.text import plural
from graphs.shared.approvals import ApprovalRequest
from graphs.shared.messages import cancelled_results, dangling_tool_calls, new_message_id
from graphs.shared.recorded import recorded_results
from graphs.shared.skeleton import StrategyGraph
from graphs.state import turn_resets

TURN_KEYS = ("turn", "preview")


def turn_metadata(snapshot: StateSnapshot, *extra: str) -> dict:
    """The turn's own metadata of a checkpoint (its number, preview, and `extra` keys)."""
    keys = {*TURN_KEYS, *extra}
    return {k: v for k, v in (snapshot.metadata or {}).items() if k in keys}


def pending_approval(state: StateSnapshot) -> list[ApprovalRequest]:
    """The risky calls a paused turn is waiting to have approved (survives restarts)."""
    for task in state.tasks:
        for pending in task.interrupts:
            value = pending.value
            if isinstance(value, dict) and value.get("type") == "approval":
                return list(value.get("calls", []))
    return []


def repair_interrupted(
    graph: StrategyGraph, thread_id: str, sink: EventSink, head: StateSnapshot | None = None
) -> StateSnapshot:
    """A run stopped by a crash or kill left pending steps: close them before the next turn.
    Returns the (possibly new) head."""
    state = head or load_state(graph, thread_id)
    if pending_approval(state):
        return state  # a paused turn is answered, not repaired
    dangling = dangling_tool_calls(state.values.get("messages", []))
    if not state.next and not dangling:
        return state
    recorded = _recorded(graph, thread_id, dangling)
    close(graph, thread_id, _closing(dangling, recorded, "the previous run was interrupted"))
    cancelled = len(dangling) - len(recorded)
    said = [f"{plural(cancelled, 'unfinished tool call')} closed as cancelled"]
    said = said if cancelled or not recorded else []
    if recorded:
        said.append(f"{plural(len(recorded), 'finished tool call')} kept with its recorded result")
    sink.emit(Notice(f"the previous turn of {thread_id} was interrupted; " + ", ".join(said)))
    return load_state(graph, thread_id)


def _recorded(graph: StrategyGraph, thread_id: str, calls: list) -> dict[str, ToolMessage]:
    """The results calls with side effects among `calls` recorded before the run stopped: they
    ran, so they are answered with what they returned (graphs/shared/recorded.py)."""
    saved = saver_of(graph).get_tuple(thread_config(thread_id)) if calls else None
    recorded = recorded_results(saved.pending_writes if saved is not None else None)
    return {c["id"]: recorded[c["id"]] for c in calls if c["id"] in recorded}


def _closing(calls: list, recorded: dict[str, ToolMessage], reason: str) -> list[ToolMessage]:
    return [recorded.get(c["id"]) or cancelled_results([c], reason)[0] for c in calls]


def close_interrupted(graph: StrategyGraph, thread_id: str, partial: str) -> None:
    """Close a run the user just stopped, keeping the `partial` answer they saw."""
    # get_state shows what the stopped step finished (its pending writes); update_state does
    # not apply them, so those messages are written again with the close.
    messages = graph.get_state(thread_config(thread_id)).values.get("messages", [])
    dangling = dangling_tool_calls(messages)
    recorded = _recorded(graph, thread_id, dangling)
    closing = [
        *_finished_but_uncommitted(graph, thread_id),
        *_closing(dangling, recorded, "interrupted by the user"),
    ]
    if partial.strip():
        closing.append(AIMessage(content=f"{partial} […interrupted]", id=new_message_id("ai")))
    close(graph, thread_id, closing)


def _finished_but_uncommitted(graph: StrategyGraph, thread_id: str) -> list[BaseMessage]:
    """Messages that tasks of the stopped step wrote before it could be checkpointed."""
    saved = saver_of(graph).get_tuple(thread_config(thread_id))
    writes = saved.pending_writes if saved is not None else []
    values = [value for _, channel, value in writes or [] if channel == "messages"]
    flat = [m for value in values for m in (value if isinstance(value, list) else [value])]
    return [m for m in flat if isinstance(m, BaseMessage)]


def close(graph: StrategyGraph, thread_id: str, messages: list) -> None:
    """Written as if `finalize` ran, under the interrupted turn's metadata. A turn stopped before
    its first node finished was never begun in the state (graphs/shared/turns.py): the close
    begins it, so it keeps its own number and the next turn gets the next one."""
    head = graph.get_state(thread_config(thread_id))
    graph.update_state(
        thread_config(thread_id, metadata={**turn_metadata(head), "closed": "interrupted"}),
        {**_unbegun_turn(head.values), "messages": messages, "status": "cancelled"},
        as_node="finalize",
    )


def _unbegun_turn(values: dict) -> dict:
    """The resets of the turn the last user message asked for, if no node began it."""
    messages = values.get("messages") or []
    last = messages[-1] if messages else None
    if not isinstance(last, HumanMessage) or last.id == values.get("turn_message_id"):
        return {}
    return turn_resets(values.get("turn", 0) + 1, last.id)
