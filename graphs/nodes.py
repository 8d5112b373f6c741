"""The graph's nodes: each takes (state, runtime) and returns a partial state update."""

from __future__ import annotations

import json
import random
import traceback
from contextlib import AbstractContextManager
from typing import Literal

from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langgraph.errors import NodeError
from langgraph.runtime import Runtime
from langgraph.types import Command

from graphs.approvals import review_calls
from graphs.deadline import model_deadline, turn_seconds_left
from graphs.messages import (
    call_signature,
    cancelled_results,
    current_turn,
    dangling_tool_calls,
    for_model,
    new_message_id,
    notice_message,
)
from graphs.model_errors import classify_call_error
from graphs.routing import is_looping
from graphs.state import AgentContext, AgentState, LastError
from graphs.tool_calls import run_tool_calls
from graphs.window import prompt_tokens

MODEL_ERROR_KINDS = {"model_transient", "model_fatal", "context_overflow"}
FINAL_ANSWER_GRACE_SECONDS = 10.0  # at most, for the last answer after the time budget ran out
FINAL_ANSWER_INSTRUCTION = (
    "You cannot call tools any more in this turn. Answer the user now from the results above, "
    "and say plainly what is still missing."
)


def agent(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """Call the model once; classify a failure instead of raising it."""
    context = runtime.context
    model = context.model.bind_tools(context.tools) if context.tools else context.model
    update: dict = {"iteration": state.get("iteration", 0) + 1}
    try:
        with model_deadline(turn_seconds_left(state, context)):
            reply = model.invoke(model_input(state["messages"], context))
    except Exception as exc:  # the model boundary: every failure is classified and routed
        spent = exhausted_budget(state, context, state.get("tokens_used", 0))
        error = classify_failed_call(exc, state, context)
        return update | {"last_error": error, "budget_exhausted": spent}
    reply = _with_id(reply)
    if is_empty(reply):
        problem = "invalid response from endpoint: an empty reply (no text, no tool calls)"
        return update | {
            "last_error": LastError(kind="model_transient", message=problem, retry_after=None)
        }
    reply = _cut_off_calls_invalid(reply)
    tokens = state.get("tokens_used", 0) + _total_tokens(reply)
    update |= {"messages": [reply], "last_error": None, "tokens_used": tokens}
    update["budget_exhausted"] = exhausted_budget(state, context, tokens)
    if (state.get("last_error") or {}).get("kind") in MODEL_ERROR_KINDS:
        update["retry_count"] = 0
    if not (reply.tool_calls or reply.invalid_tool_calls):
        update["status"] = "answered"
    return update


def classify_failed_call(exc: Exception, state: AgentState, context: AgentContext) -> LastError:
    """The failure, judged with the prompt's size (an empty stream after a long prompt is an
    overflow). Only a window the server reported sets what "long" is; a guessed one is too high."""
    window = context.window.tokens if context.window and context.window.exact else None
    return classify_call_error(exc, prompt_tokens(state["messages"], context), window)


def is_empty(reply: AIMessage) -> bool:
    return not str(reply.content).strip() and not reply.tool_calls and not reply.invalid_tool_calls


def _cut_off_calls_invalid(reply: AIMessage) -> AIMessage:
    """Tool calls in a reply cut off by the token limit may be truncated (LangChain repairs partial
    JSON): never run them; the model is told and sends them again."""
    if reply.response_metadata.get("finish_reason") != "length" or not reply.tool_calls:
        return reply
    invalid = [
        {
            "name": c["name"],
            "args": json.dumps(c["args"], ensure_ascii=False),
            "id": c["id"],
            "error": "the reply was cut off by the output token limit (finish_reason=length), so "
            "this call may be incomplete; it was not run. Send it again, shorter",
            "type": "invalid_tool_call",
        }
        for c in reply.tool_calls
    ]
    return reply.model_copy(
        update={"tool_calls": [], "invalid_tool_calls": [*reply.invalid_tool_calls, *invalid]}
    )


def tools(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """Run every call of the last AI message; any failed call makes this step a tool error."""
    context = runtime.context
    request = state["messages"][-1]
    allowed, refused = review_calls(
        request.tool_calls, context.tools_by_name, context.approval, context.confirm_tools
    )
    results = run_tool_calls(
        request.model_copy(update={"tool_calls": allowed}),
        context.tools_by_name,
        runtime.stream_writer,
        context.max_tool_result_chars,
    )
    order = {call["id"]: index for index, call in enumerate(request.tool_calls)}
    results = sorted([*results, *refused], key=lambda m: order.get(m.tool_call_id, len(order)))
    signatures = [call_signature(c["name"], c["args"]) for c in request.tool_calls]
    update: dict = {
        "messages": results,
        "call_signatures": [*(state.get("call_signatures") or []), *signatures],
    }
    update["budget_exhausted"] = exhausted_budget(state, context, state.get("tokens_used", 0))
    failures = [m for m in results if m.status == "error"]
    if not failures:
        return update | {"last_error": None, "retry_count": 0}
    summary = "; ".join(f"{m.name}: {m.content}" for m in failures)
    return update | {"last_error": LastError(kind="tool", message=summary, retry_after=None)}


def exhausted_budget(state: AgentState, context: AgentContext, tokens_used: int) -> str | None:
    """Which per-turn budget (wall time, model tokens) is used up, if any."""
    started = state.get("turn_started_at")
    limit = context.max_seconds
    if limit is not None and started is not None and context.clock() - started > limit:
        return "time"
    if context.max_tokens_per_turn is not None and tokens_used > context.max_tokens_per_turn:
        return "tokens"
    return None


def _total_tokens(reply: AIMessage) -> int:
    usage = reply.usage_metadata or {}
    return int(usage.get("total_tokens") or 0)


def retry(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """Count one more consecutive failure, wait (model errors only) and hand back to the agent."""
    context = runtime.context
    error = state["last_error"]
    attempt = state.get("retry_count", 0) + 1
    wait = 0.0 if error["kind"] == "tool" else backoff_delay(attempt, error, context)
    left = turn_seconds_left(state, context)
    if left is not None:  # never wait past the turn's time budget
        wait = max(0.0, min(wait, left))
    runtime.stream_writer(
        {
            "type": "retry",
            "attempt": attempt,
            "max_attempts": context.max_retries,
            "wait": round(wait, 3),
            "kind": error["kind"],
            "reason": error["message"],
        }
    )
    if wait > 0:
        context.sleep(wait)
    return {"retry_count": attempt}


def backoff_delay(attempt: int, error: LastError, context: AgentContext) -> float:
    """Full-jitter exponential backoff, never shorter than the endpoint's Retry-After."""
    ceiling = min(context.backoff_cap, context.backoff_base * 2 ** (attempt - 1))
    delay = random.uniform(0, ceiling)
    if error.get("retry_after") is not None:
        delay = max(delay, float(error["retry_after"]))
    return delay


def failure_handler(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """End the turn with an answer that says what failed, how often it was tried, and what to do."""
    error = state.get("last_error") or LastError(
        kind="internal", message="the turn failed for an unknown reason", retry_after=None
    )
    closing = cancelled_results(dangling_tool_calls(state["messages"]), "the turn failed")
    context = runtime.context
    text = failure_text(
        error, state.get("retry_count", 0), context.max_retries, context.max_retry_after
    )
    if error["kind"] == "context_overflow":
        text = overflow_text(error, context)
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
        "model_fatal": "Fix the model configuration (see `python -m app chat --help`), then "
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


def finalize(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """Budget spent or a loop detected: close open calls, then one last answer without tools."""
    context = runtime.context
    status, reason = stop_reason(state, context)
    closing = cancelled_results(dangling_tool_calls(state["messages"]), f"stopped by {reason}")
    messages = [*state["messages"], *closing]
    try:
        if (state.get("last_error") or {}).get("kind") in MODEL_ERROR_KINDS:
            raise RuntimeError("the endpoint just failed; no last answer is asked for")
        with last_answer_deadline(state, context):
            reply = context.model.invoke(
                [*model_input(messages, context), SystemMessage(FINAL_ANSWER_INSTRUCTION)]
            )
        answer = AIMessage(content=reply.content, id=new_message_id("ai"))
    except Exception:  # a last answer is best effort; the fallback below always works
        answer = notice_message(budget_text(messages, reason), "budget")
    if not str(answer.content).strip():
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
) -> Command[Literal["failure_handler"]]:
    """A bug inside a node: record it and let the failure handler end the turn cleanly."""
    detail = "".join(traceback.format_exception(error.error)).strip()
    summary = f"{type(error.error).__name__}: {error.error}"
    runtime.stream_writer(
        {"type": "error", "node": error.node, "error": summary, "traceback": detail}
    )
    message = f"{error.node}: {summary}"
    last = LastError(kind="internal", message=message, retry_after=None)
    return Command(goto="failure_handler", update={"last_error": last})


def model_input(messages: list[AnyMessage], context: AgentContext) -> list[AnyMessage]:
    """What the model reads: the fixed system prompt, then the conversation (`for_model`)."""
    prompt = [SystemMessage(context.system_prompt)] if context.system_prompt else []
    return [*prompt, *for_model(messages, context.turn_notes)]


def _with_id(reply: AIMessage) -> AIMessage:
    if not isinstance(reply, AIMessage):
        reply = AIMessage(content=str(getattr(reply, "content", reply)))
    if not reply.id:
        reply = reply.model_copy(update={"id": new_message_id("ai")})
    return reply
