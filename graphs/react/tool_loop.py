"""The tool loop (graphs/react/graph.py) run as a subgraph from a node of another strategy.

It sees the conversation up to the current user message (earlier attempts of this turn are left out)
and returns only the messages it added, so the parent's DeltaChannel stores each message once.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from langchain_core.messages import AnyMessage, HumanMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from graphs.react.graph import build_graph
from graphs.shared.live import context_of
from graphs.shared.messages import new_message_id
from graphs.state import AgentContext, AgentState

# Compiled without a checkpointer: as a subgraph it checkpoints into its parent's saver, under its
# own namespace, so an approval asked inside an attempt resumes exactly where it paused.
TOOL_LOOP = build_graph()
# Final: each name a literal, so reading the state by it is checked
CARRIED: Final = ("turn", "turn_started_at", "tokens_used", "strategy", "turn_message_id")
REPORTED = (
    "iteration",
    "retry_count",
    "last_error",
    "call_signatures",
    "status",
    "tokens_used",
    "budget_exhausted",
)


def run_tool_loop(state: AgentState, runtime: Runtime[AgentContext], notes: str = "") -> dict:
    """One run of the tool loop with fresh per-attempt counters; `notes` (e.g. lessons) join the
    turn's notes, which go with the user's message, so the system prompt and tool schemas stay the
    same prefix every time. Returns the parent's update: new messages and the loop's counters."""
    messages = state["messages"]
    visible = messages[: _turn_start(messages) + 1]
    attempt = {key: state[key] for key in CARRIED if key in state} | {
        "messages": visible,
        "iteration": 0,
        "retry_count": 0,
        "last_error": None,
        "call_signatures": [],
        "status": None,
        "budget_exhausted": None,
    }
    context = context_of(runtime)
    if notes:
        joined = "\n\n".join(filter(None, [context.turn_notes, notes]))
        context = dataclasses.replace(context, turn_notes=joined)
    result = TOOL_LOOP.invoke(attempt, context=context)
    update = {key: result.get(key) for key in REPORTED}
    added = added_messages(visible, result["messages"])
    return update | {"messages": _fresh_ids(added, {m.id for m in messages})}


def added_messages(before: list[AnyMessage], after: list[AnyMessage]) -> list:
    """The messages `after` adds to `before`; when the loop summarised (dropped some of `before`),
    the whole list is rewritten instead."""
    after_ids = {m.id for m in after}
    if any(m.id not in after_ids for m in before):
        return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *after]
    before_ids = {m.id for m in before}
    return [m for m in after if m.id not in before_ids]


def _fresh_ids(added: list[AnyMessage], taken: set[str | None]) -> list[AnyMessage]:
    """A deterministic model may repeat an earlier attempt's message ids; reusing one would make
    the reducer replace that attempt's message instead of appending this one."""
    return [
        m.model_copy(update={"id": new_message_id(m.type)}) if m.id in taken else m for m in added
    ]


def _turn_start(messages: list[AnyMessage]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return index
    return len(messages) - 1
