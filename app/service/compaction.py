"""`/compact`: replace a thread's older turns with a summary now, between turns (the graph's
`summarize` node does the same mid-turn when the context is full). Older checkpoints keep it all."""

from __future__ import annotations

from app.errors import UsageError
from app.service.events import EventSink, Notice
from app.service.recovery import turn_metadata
from app.service.run import ThreadGraph
from app.service.threads import load_state, thread_config
from graphs.shared.summarize import (
    split_for_summary,
    summary_cap_tokens,
    summary_update,
    write_summary,
)
from graphs.shared.window import context_budget
from graphs.state import AgentContext


def compact_cap(context: AgentContext) -> int | None:
    """How long a /compact summary may be: as in the graph, when there is a budget."""
    budget = context_budget(context)
    return summary_cap_tokens(budget) if budget else None


def compact(thread: ThreadGraph, context: AgentContext, sink: EventSink) -> int:
    """Summarise all but the last turn; returns how many messages were replaced."""
    state = load_state(thread.graph, thread.thread_id)
    # Between turns there is no current turn: keep the last one whole, summarise the rest.
    older, recent = split_for_summary(state.values.get("messages", []), 0)
    if not older:
        raise UsageError("nothing to compact yet: the thread has no earlier turns")
    window = context.window.tokens if context.window else None
    summary = write_summary(context.model, older, window, compact_cap(context))
    thread.graph.update_state(
        thread_config(thread.thread_id, metadata={**turn_metadata(state), "compacted": len(older)}),
        {"messages": summary_update(summary, recent)},
        as_node="finalize",
    )
    sink.emit(Notice(f"replaced {len(older)} older messages with a summary"))
    return len(older)
