"""Context management: replace older turns with a summary when the conversation outgrows the model.

The summary replaces messages in the *state* only; older checkpoints keep the full history, so history,
rollback and export are unaffected. Whole turns are summarised, so a tool call is never separated from
its result.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AnyMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from graphs.messages import for_model, new_message_id
from graphs.state import AgentContext, AgentState

SUMMARY_NAME = "conversation_summary"
SUMMARIZE_INSTRUCTION = (
    "Summarize the conversation transcript below for your own later use. Keep every fact the user "
    "stated about themselves, what they asked for, the results of tool calls and the answers given. "
    "Be brief and factual; write plain sentences."
)
TRANSCRIPT_CHAR_LIMIT = 60_000


def is_summary(message: AnyMessage) -> bool:
    return isinstance(message, SystemMessage) and message.name == SUMMARY_NAME


def split_for_summary(
    messages: Sequence[AnyMessage], keep_recent_turns: int
) -> tuple[list[AnyMessage], list[AnyMessage]]:
    """(older, recent): `recent` is the last `keep_recent_turns` turns plus the current one, whole."""
    starts = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    if len(starts) <= keep_recent_turns:
        return [], list(messages)
    cut = starts[-(keep_recent_turns + 1)]
    return list(messages[:cut]), list(messages[cut:])


def over_budget(messages: Sequence[AnyMessage], context: AgentContext) -> bool:
    if context.context_tokens is None:
        return False
    return count_tokens_approximately(list(messages)) > context.context_tokens


def shrinkable_split(
    messages: Sequence[AnyMessage], context: AgentContext
) -> tuple[list[AnyMessage], list[AnyMessage]]:
    """Keep `keep_recent_turns` earlier turns whole if that leaves something to summarise, else
    keep only the current turn."""
    for keep in (context.keep_recent_turns, 0):
        older, recent = split_for_summary(messages, keep)
        if any(not is_summary(m) for m in older):
            return older, recent
    return [], list(messages)


def can_summarize(state: AgentState, context: AgentContext) -> bool:
    return bool(shrinkable_split(state["messages"], context)[0])


def transcript(messages: Sequence[AnyMessage]) -> str:
    """Older messages as plain text: the summariser needs no tool roles, and any endpoint accepts it."""
    lines = []
    for message in for_model(messages):
        if is_summary(message):
            lines.append(f"earlier summary: {message.content}")
        elif message.type == "human":
            lines.append(f"user: {message.content}")
        elif message.type == "ai":
            for call in getattr(message, "tool_calls", []):
                lines.append(f"tool call: {call['name']} {call['args']}")
            if str(message.content).strip():
                lines.append(f"assistant: {message.content}")
        elif message.type == "tool":
            lines.append(f"tool result ({message.name}): {message.content}")
    text = "\n".join(lines)
    return text[-TRANSCRIPT_CHAR_LIMIT:]


def write_summary(model: BaseChatModel, older: Sequence[AnyMessage]) -> str:
    """The model's summary; if the model cannot give one, the transcript's tail stands in for it."""
    text = transcript(older)
    try:
        reply = model.invoke([SystemMessage(SUMMARIZE_INSTRUCTION), HumanMessage(text)])
        summary = str(reply.content).strip()
    except Exception:  # a summary is best effort: shrinking must not fail the turn
        summary = ""
    return summary or f"(mechanical excerpt; the model gave no summary)\n{text[-4000:]}"


def summary_update(summary: str, recent: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The messages write that leaves [summary, *recent] in the state (order matters, so rewrite)."""
    note = SystemMessage(
        content=f"Summary of the earlier conversation:\n{summary}",
        name=SUMMARY_NAME,
        id=new_message_id("summary"),
    )
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), note, *recent]


def summarize(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """Shrink the context: older turns become one summary message; counts as one recovery attempt."""
    context = runtime.context
    older, recent = shrinkable_split(state["messages"], context)
    summary = write_summary(context.model, older)
    runtime.stream_writer(
        {"type": "summarized", "messages_replaced": len(older), "summary_chars": len(summary)}
    )
    update: dict = {"messages": summary_update(summary, recent)}
    if (state.get("last_error") or {}).get("kind") == "context_overflow":
        update["retry_count"] = state.get("retry_count", 0) + 1
    return update
