"""The nodes that end a turn early, in every strategy: `failure_handler` (a failure that recovery
could not fix), `finalize` (a budget spent or a loop), and the node error handler that sends a bug to
the failure handler. Both close any dangling tool call first, so the history stays valid."""

from __future__ import annotations

import traceback
from contextlib import AbstractContextManager
from typing import Literal

from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langgraph.errors import NodeError
from langgraph.runtime import Runtime
from langgraph.types import Command

from graphs.shared.deadline import model_deadline, turn_seconds_left
from graphs.shared.limits import is_looping
from graphs.shared.live import context_of
from graphs.shared.messages import (
    cancelled_results,
    current_turn,
    dangling_tool_calls,
    new_message_id,
    notice_message,
)
from graphs.shared.model_call import call_model, model_input
from graphs.shared.model_errors import MODEL_ERROR_KINDS
from graphs.state import END, AgentContext, AgentState, LastError, last_error_kind

# Where the node error handler sends a bug: to the failure handler, or, when the failure handler
# itself failed, straight to the end (sending it back there would fail again, step after step).
ErrorRoute = Literal["failure_handler", "__end__"]
HANDLER_FAILED = (
    "An internal error stopped this turn, and another stopped its failure handler ({error}). "
    "This is a bug in Waypoint; the thread is intact and you can go on. Run with --debug to see "
    "the traceback."
)
INVALID_PLAN = "invalid plan: "  # how the plan strategy's planner words a plan it could not use
FINAL_ANSWER_GRACE_SECONDS = 10.0  # at most, for the last answer after the time budget ran out
FINAL_ANSWER_INSTRUCTION = (
    "You cannot call tools any more in this turn. Answer the user now from the results above, "
    "and say plainly what is still missing."
)


def failure_handler(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """End the turn with an answer that says what failed, how often it was tried, and what to do."""
    error = state.get("last_error") or LastError(
        kind="internal", message="the turn failed for an unknown reason", retry_after=None
    )
    closing = cancelled_results(dangling_tool_calls(state["messages"]), "the turn failed")
    context = context_of(runtime)
    text = failure_text(
        error, state.get("retry_count", 0), context.max_retries, context.max_retry_after
    )
    if error["kind"] == "context_overflow":
        text = overflow_text(error, context)
    elif error["kind"] == "tool" and error["message"].startswith(INVALID_PLAN):
        text = unreadable_plan_text(error, state.get("retry_count", 0), context.max_retries)
    elif error["kind"] == "tool" and replies_unparsed(state["messages"]):
        text = unparsed_text(error, state.get("retry_count", 0), context.max_retries)
    return {"messages": [*closing, notice_message(text, "failure")], "status": "failed"}


def failure_text(
    error: LastError, attempts: int, max_retries: int, max_retry_after: float = 60.0
) -> str:
    retry_after = error.get("retry_after")
    if retry_after is not None and retry_after > max_retry_after:
        return (
            f"The model endpoint is rate limited; retry after {retry_after:.0f} s "
            f"(longer than the {max_retry_after:.0f} s Waypoint waits): {error['message']}\n"
            "Send your message again later."
        )
    tried = f"after {attempts + 1} attempts" if attempts else "on the first attempt"
    advice = {
        "model_transient": "Check that the model endpoint is up, then send your message again.",
        "model_fatal": "Fix the model configuration (see: waypoint chat --help), then "
        "send your message again.",
        "context_overflow": "Start a new thread (/new) or shorten the conversation.",
        "tool": "Rephrase the request, or check the file names and values it uses.",
        "internal": "This is a bug in Waypoint; the thread is intact and you can go on. "
        "Run with --debug to see the traceback.",
    }[error["kind"]]
    what = {
        "model_transient": "The model call kept failing",
        "model_fatal": "The model call failed",
        "context_overflow": "The conversation no longer fits the model's context",
        "tool": "The tool calls kept failing",
        "internal": "An internal error stopped this turn",
    }[error["kind"]]
    return f"{what} {tried} (retry budget {max_retries}): {error['message']}\n{advice}"


def overflow_text(error: LastError, context: AgentContext) -> str:
    """What the user reads when even the summarised conversation does not fit: the window, and that
    their own message (with this turn's tool results) is what is too long."""
    window = context.window.tokens if context.window and context.window.tokens else None
    size = f" ({window:,}-token window)" if window else ""
    return (
        f"The conversation no longer fits the model's context{size}, even with the older turns "
        f"summarised: {error['message']}\nWhat is left is this turn: send a shorter message (or "
        "put a long text in a workspace file and refer to it), or start a new thread (/new)."
    )


def replies_unparsed(messages: list[AnyMessage]) -> bool:
    """The model's last reply was neither an answer nor a tool call that could be read."""
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    return last is not None and bool(last.invalid_tool_calls) and not last.tool_calls


def unparsed_text(error: LastError, attempts: int, max_retries: int) -> str:
    return (
        f"The model's replies stayed malformed (neither a readable tool call nor an answer) after "
        f"{attempts + 1} attempts (retry budget {max_retries}): {error['message']}\n"
        "The model may be too small to follow the tool-call format: try a larger model, or the "
        "other --tool-protocol (native or react)."
    )


def unreadable_plan_text(error: LastError, attempts: int, max_retries: int) -> str:
    """A plan the model kept sending in a form that could not be used: no tool call failed."""
    return (
        f"The model's plan could not be used after {attempts + 1} attempts (retry budget "
        f"{max_retries}): {error['message']}\nThe model may be too "
        "small to write a plan: try --strategy react, or a larger model."
    )


def finalize(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """Budget spent or a loop detected: close open calls, then one last answer without tools
    (not asked for when the endpoint just failed); the fallback is a notice of what was done."""
    context = context_of(runtime)
    status, reason = stop_reason(state, context)
    closing = cancelled_results(dangling_tool_calls(state["messages"]), f"stopped by {reason}")
    messages = [*state["messages"], *closing]
    answer = None
    # A last answer is best effort; the fallback always works.
    if last_error_kind(state) not in MODEL_ERROR_KINDS:
        prompt = [*model_input(messages, context), SystemMessage(FINAL_ANSWER_INSTRUCTION)]
        with last_answer_deadline(state, context):
            reply = call_model(context.model, prompt, answer_only=True)
        if reply.message is not None:
            answer = AIMessage(content=reply.message.content, id=new_message_id("ai"))
    if answer is None:
        answer = notice_message(budget_text(messages, reason), "budget")
    return {"messages": [*closing, answer], "status": status}


def last_answer_deadline(state: AgentState, context: AgentContext) -> AbstractContextManager:
    """The time the last answer may take: a short grace once the time budget is spent (the budget
    already ran out, so the turn's own deadline would not let it start), else what is left."""
    if state.get("budget_exhausted") == "time" and context.max_seconds is not None:
        grace = min(FINAL_ANSWER_GRACE_SECONDS, context.max_seconds)
        return model_deadline(grace, replace=True)
    return model_deadline(turn_seconds_left(state, context))


def stop_reason(state: AgentState, context: AgentContext) -> tuple[str, str]:
    """(status, words for the user) of a turn that finalize ends early."""
    if is_looping(state):
        return "loop_detected", "a repeated identical tool call"
    budget = state.get("budget_exhausted")
    if budget == "time":
        return "budget_exhausted", f"the time budget ({context.max_seconds:g} s per turn)"
    if budget == "tokens":
        return "budget_exhausted", f"the token budget ({context.max_tokens_per_turn} per turn)"
    return "max_iterations", "the step budget"


def budget_text(messages: list[AnyMessage], reason: str) -> str:
    done = [m for m in current_turn(messages) if m.type == "tool" and m.status != "error"]
    steps = "\n".join(f"- {m.name}: {str(m.content)[:200]}" for m in done) or "- (nothing yet)"
    return f"I stopped because of {reason}. What was done so far:\n{steps}"


def on_node_error(
    state: AgentState, error: NodeError, runtime: Runtime[AgentContext]
) -> Command[ErrorRoute]:
    """A bug inside a node: record it and let the failure handler end the turn cleanly."""
    detail = "".join(traceback.format_exception(error.error)).strip()
    summary = f"{type(error.error).__name__}: {error.error}"
    runtime.stream_writer(
        {"type": "error", "node": error.node, "error": summary, "traceback": detail}
    )
    message = f"{error.node}: {summary}"
    last = LastError(kind="internal", message=message, retry_after=None)
    if error.node == "failure_handler":
        closing = cancelled_results(dangling_tool_calls(state["messages"]), "the turn failed")
        notice = notice_message(HANDLER_FAILED.format(error=message), "failure")
        update = {"last_error": last, "status": "failed", "messages": [*closing, notice]}
        return Command(goto=END, update=update)
    return Command(goto="failure_handler", update={"last_error": last})
