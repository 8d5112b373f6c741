"""Context management: replace older turns with a summary when the conversation outgrows the model.

The summary replaces messages in the *state* only; older checkpoints keep the full history, so history,
rollback and export are unaffected. Whole turns are summarised, so a tool call is never separated from
its result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from graphs.shared.live import context_of
from graphs.shared.messages import for_model, new_message_id
from graphs.shared.model_call import call_model
from graphs.shared.model_errors import prompt_count_from_text, window_from_text
from graphs.shared.requests import asking
from graphs.shared.tokens import message_tokens
from graphs.shared.window import SAFETY_MARGIN, ContextWindow, context_budget, prompt_tokens
from graphs.state import AgentContext, AgentState, LastError

SUMMARY_NAME = "conversation_summary"
SUMMARIZE_INSTRUCTION = (
    "Summarize the conversation transcript below for your own later use. Keep every fact the user "
    "stated about themselves, what they asked for, the results of tool calls and the answers given. "
    "Be brief and factual; write plain sentences."
)
TRANSCRIPT_LABELS = {
    "summary": "earlier summary",
    "user": "user",
    "tool_call": "tool call",
    "assistant": "assistant",
    "tool_result": "tool result",
}
TRANSCRIPT_CHAR_LIMIT = 60_000  # per summariser call when the window is unknown
MAX_SUMMARY_CHUNKS = 8  # summariser calls per summary; older text beyond them is dropped
MAX_CHUNK_HALVINGS = 3  # a chunk the endpoint rejects as too long is halved at most this often
MIN_CHUNK_CHARS = 400
MIN_SUMMARY_TOKENS = 100
MAX_SUMMARY_TOKENS = 1500
INSTRUCTION_TOKENS = 80  # SUMMARIZE_INSTRUCTION and the framing of a chunk


def is_summary(message: BaseMessage) -> bool:
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
    budget = context_budget(context)
    if budget is None:
        return False
    return message_tokens(messages) > budget


def shrinkable_split(
    messages: Sequence[AnyMessage], context: AgentContext, budget: int | None = None
) -> tuple[list[AnyMessage], list[AnyMessage]]:
    """(older, recent): keep `keep_recent_turns` earlier turns whole when there is something older
    to summarise and they leave room in the budget, else keep only the current turn. When only an
    earlier summary is older, that summary is what shrinks (if it is long enough to)."""
    for keep in (context.keep_recent_turns, 0):
        older, recent = split_for_summary(messages, keep)
        if not any(not is_summary(m) for m in older):
            continue
        if budget is None or keep == 0 or _tokens(recent) + summary_cap_tokens(budget) <= budget:
            return older, recent
    older, recent = split_for_summary(messages, 0)
    if len(older) == 1 and is_summary(older[0]) and _tokens(older) > 2 * MIN_SUMMARY_TOKENS:
        return older, recent
    return [], list(messages)


def can_summarize(state: AgentState, context: AgentContext) -> bool:
    return bool(shrinkable_split(state["messages"], context, context_budget(context))[0])


def needs_summary(state: AgentState, context: AgentContext) -> bool:
    """A turn whose input would overflow the context budget first summarises older turns."""
    return over_budget(state["messages"], context) and can_summarize(state, context)


def summary_cap_tokens(budget: int | None) -> int:
    """How long a summary may be: a third of the budget, within useful bounds."""
    return min(MAX_SUMMARY_TOKENS, max(3 * MIN_SUMMARY_TOKENS, (budget or 0) // 3))


def transcript_lines(messages: Sequence[AnyMessage]) -> list[str]:
    """Older messages as plain text lines (Waypoint's notices left out): the summariser needs no
    tool roles, and any endpoint accepts them. Each line starts with its label (TRANSCRIPT_LABELS)
    and ": "; a tool result's label is followed by the tool's name in parentheses."""
    label = TRANSCRIPT_LABELS
    lines = []
    for message in for_model(messages):
        if is_summary(message):
            lines.append(f"{label['summary']}: {message.content}")
        elif message.type == "human":
            lines.append(f"{label['user']}: {message.content}")
        elif message.type == "ai":
            for call in getattr(message, "tool_calls", []):
                lines.append(f"{label['tool_call']}: {call['name']} {call['args']}")
            if str(message.content).strip():
                lines.append(f"{label['assistant']}: {message.content}")
        elif message.type == "tool":
            lines.append(f"{label['tool_result']} ({message.name}): {message.content}")
    return lines


@dataclass(frozen=True)
class Summary:
    text: str
    dropped_lines: int = 0  # transcript lines left out: they did not fit the summariser's calls


def write_summary(
    model: BaseChatModel,
    older: Sequence[AnyMessage],
    window_tokens: int | None = None,
    cap_tokens: int | None = None,
) -> str:
    return summarize_messages(model, older, window_tokens, cap_tokens).text


def summarize_messages(
    model: BaseChatModel,
    older: Sequence[AnyMessage],
    window_tokens: int | None = None,
    cap_tokens: int | None = None,
) -> Summary:
    """The model's summary, written in chunks (oldest first, each folding in the summary so far)
    that fit the model's window. A chunk the endpoint rejects as too long is halved and the fold
    starts again; what still does not fit is dropped, oldest first, with a notice. If the model
    gives no summary at all, the transcript's tail stands in for it."""
    lines = transcript_lines(older)
    cap_chars = 4 * cap_tokens if cap_tokens else None
    chunk_chars = _chunk_chars(window_tokens, cap_tokens)
    for _ in range(MAX_CHUNK_HALVINGS + 1):
        chunks = _pack(lines, chunk_chars)
        kept = chunks[-MAX_SUMMARY_CHUNKS:]
        dropped = sum(chunk.count("\n") + 1 for chunk in chunks[: len(chunks) - len(kept)])
        # A summary is best effort: shrinking must not fail the turn (call_model never raises).
        text, failure = _fold(model, kept, cap_chars, chunk_chars // 4 + INSTRUCTION_TOKENS)
        if failure is not None:
            if failure["kind"] != "context_overflow":
                break
            stated = window_from_text(failure["message"])
            if stated and stated < (window_tokens or stated + 1):
                window_tokens = stated
            chunk_chars = min(chunk_chars // 2, _chunk_chars(window_tokens, cap_tokens))
            continue
        if not text:
            break
        return Summary(_drop_notice(dropped) + text, dropped)
    tail = "\n".join(lines)[-min(4000, cap_chars or 4000) :]
    return Summary(f"(mechanical excerpt; the model gave no summary)\n{tail}")


def _fold(
    model: BaseChatModel, chunks: Sequence[str], cap_chars: int | None, chunk_tokens: int
) -> tuple[str, LastError | None]:
    """(the summary of `chunks`, folded oldest first; or "" and why the model's call failed). A
    failure is judged with the chunk's size, so an empty stream after a long chunk is an overflow."""
    summary = ""
    limit = f"Write at most {cap_chars // 6} words.\n" if cap_chars else ""
    for chunk in chunks:
        prior = f"{TRANSCRIPT_LABELS['summary']}: {summary}\n" if summary else ""
        request = [asking(SUMMARIZE_INSTRUCTION, "summary"), HumanMessage(f"{limit}{prior}{chunk}")]
        reply = call_model(model, request, answer_only=True, prompt_tokens=lambda: chunk_tokens)
        if reply.message is None:
            return "", reply.failure
        summary = _cut(str(reply.message.content).strip(), cap_chars)
        if not summary:
            return "", None
    return summary, None


def _chunk_chars(window_tokens: int | None, cap_tokens: int | None) -> int:
    """Characters of transcript per summariser call: what the window holds besides the
    instruction, the summary so far and the room for the new summary."""
    if not window_tokens:
        return TRANSCRIPT_CHAR_LIMIT
    summary = cap_tokens or window_tokens // 8
    fits = int((window_tokens - 2 * summary) * SAFETY_MARGIN) - INSTRUCTION_TOKENS
    return max(MIN_CHUNK_CHARS, 4 * fits)


def _pack(lines: Sequence[str], chunk_chars: int) -> list[str]:
    """Whole lines into chunks of at most `chunk_chars` (a longer line is cut into pieces)."""
    chunk_chars = max(MIN_CHUNK_CHARS, chunk_chars)
    pieces = [
        line[i : i + chunk_chars] for line in lines for i in range(0, len(line) or 1, chunk_chars)
    ]
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + 1 + len(piece) > chunk_chars:
            chunks.append(current)
            current = ""
        current = f"{current}\n{piece}" if current else piece
    return [*chunks, current] if current else chunks


def _cut(text: str, limit: int | None) -> str:
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def _drop_notice(dropped: int) -> str:
    if not dropped:
        return ""
    return (
        f"(the oldest {dropped} lines of the conversation were dropped without a summary: "
        "they did not fit the model's context window)\n"
    )


def _tokens(messages: Sequence[AnyMessage]) -> int:
    return message_tokens(messages)


def summary_update(summary: str, recent: Sequence[AnyMessage]) -> list[BaseMessage]:
    """The messages write that leaves [summary, *recent] in the state (order matters, so rewrite)."""
    note = SystemMessage(
        content=f"Summary of the earlier conversation:\n{summary}",
        name=SUMMARY_NAME,
        id=new_message_id("summary"),
    )
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), note, *recent]


def summarize(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """Shrink the context: older turns become one summary message sized to the model's window;
    after an overflow it first learns the window (and counts as one recovery attempt)."""
    context = context_of(runtime)
    error = state.get("last_error")
    overflow = error is not None and error["kind"] == "context_overflow"
    window = context.window if context.window is not None else ContextWindow()
    if overflow and error is not None:
        stated, counted = (
            window_from_text(error["message"]),
            prompt_count_from_text(error["message"]),
        )
        window.learn_from_overflow(stated, prompt_tokens(state["messages"], context), counted)
    budget = context_budget(context, window)
    older, recent = shrinkable_split(state["messages"], context, budget)
    cap = summary_cap_tokens(budget) if budget else None
    if len(older) == 1 and is_summary(older[0]):
        cap = min(cap or _tokens(older), _tokens(older) // 2)
    summary = summarize_messages(context.model, older, window.tokens, cap)
    runtime.stream_writer(
        {
            "type": "summarized",
            "messages_replaced": len(older),
            "summary_chars": len(summary.text),
            "reason": "overflow" if overflow else "budget",
            "window": window.tokens,
            "budget": budget,
            "dropped_lines": summary.dropped_lines,
        }
    )
    update: dict = {"messages": summary_update(summary.text, recent)}
    if overflow:
        update["retry_count"] = state.get("retry_count", 0) + 1
    return update
