"""Approvals: risky tool calls (running code, overwriting or editing files, untrusted MCP servers) are
approved, edited or rejected before the tools node runs them — by policy, or by asking the user through
LangGraph's `interrupt()`, which persists the question in the checkpoint until it is answered."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NotRequired, TypedDict, cast

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.types import interrupt

from graphs.run_settings import ApprovalPolicy
from graphs.shared.messages import new_message_id
from graphs.shared.tool_calls import USER_MESSAGE

# Marks the result of a call that was not approved: the user's (or the policy's) choice, not an
# error to retry.
REFUSED = "waypoint_refused"


class ApprovalRequest(TypedDict):
    """One risky call a paused run asks about (the `calls` of its `approval` interrupt)."""

    id: str
    name: str
    args: dict[str, Any]
    reason: str


class ApprovalDecision(TypedDict):
    """The answer for one call, keyed by the call's id in the resume value."""

    action: Literal["approve", "reject", "edit"]
    args: NotRequired[dict[str, Any]]  # the arguments to run instead (`edit` only)
    note: NotRequired[str]  # why, shown to the model and the user when the call is not run


def was_refused(message: ToolMessage) -> bool:
    return bool(message.additional_kwargs.get(REFUSED))


def risk_of(tool: BaseTool, args: dict) -> str | None:
    """Why a call needs approval, or None. Tools declare it in `metadata["risk"]` (a function of the
    arguments); tools from MCP servers are risky unless their server is trusted."""
    metadata = tool.metadata or {}
    if "mcp_server" in metadata and not metadata.get("trusted"):
        return f"calls the external MCP server '{metadata['mcp_server']}'"
    check = metadata.get("risk")
    return check(args) if callable(check) else None


REPLAY_REASON = "has side effects and would run again in a replay"


def review_calls(
    calls: Sequence[ToolCall],
    tools_by_name: dict[str, BaseTool],
    policy: ApprovalPolicy,
    confirm: frozenset[str] = frozenset(),
) -> tuple[list[ToolCall], list[ToolMessage]]:
    """(calls to run — possibly with edited arguments —, results for the calls refused). Calls of
    the tools named in `confirm` need approval whatever their arguments (a replay sets it)."""
    risky = {
        _call_id(call): reason
        for call in calls
        if call["name"] in tools_by_name
        and (reason := risk_of(tools_by_name[call["name"]], call["args"]))
    }
    risky |= {
        _call_id(c): REPLAY_REASON
        for c in calls
        if c["name"] in confirm and _call_id(c) not in risky
    }
    if not risky or policy == "auto":
        return list(calls), []
    decisions: dict[str, ApprovalDecision]
    if policy == "never":
        decisions = {
            cid: {"action": "reject", "note": "the approval policy is 'never'"} for cid in risky
        }
    else:
        question = [
            ApprovalRequest(id=cid, name=c["name"], args=c["args"], reason=risky[cid])
            for c in calls
            if (cid := _call_id(c)) in risky
        ]
        decisions = _decisions(interrupt({"type": "approval", "calls": question}))
    return _apply(calls, risky, decisions)


def _call_id(call: ToolCall) -> str:
    # A model's tool calls always carry an id; "" stands for a missing one (never approved).
    return call["id"] or ""


def _decisions(answer: Any) -> dict[str, ApprovalDecision]:
    """The resume value as decisions; it comes from a client, so anything but a dict per call is
    dropped (and the call is then rejected)."""
    if not isinstance(answer, dict):
        return {}
    # Unchecked beyond being a dict: `_apply` reads it with .get and rejects what it cannot use.
    return {str(k): cast(ApprovalDecision, v) for k, v in answer.items() if isinstance(v, dict)}


def _apply(
    calls: Sequence[ToolCall], risky: dict[str, str], decisions: dict[str, ApprovalDecision]
) -> tuple[list[ToolCall], list[ToolMessage]]:
    allowed: list[ToolCall] = []
    refused: list[ToolMessage] = []
    for call in calls:
        if _call_id(call) not in risky:
            allowed.append(call)
            continue
        decision = decisions.get(
            _call_id(call), {"action": "reject", "note": "no answer was given"}
        )
        action = decision.get("action")
        edited_args = decision.get("args")
        if action == "approve":
            allowed.append(call)
        elif action == "edit" and isinstance(edited_args, dict):
            allowed.append(
                ToolCall(name=call["name"], args=edited_args, id=call["id"], type="tool_call")
            )
        else:
            note = decision.get("note") or "the user rejected it"
            refused.append(
                ToolMessage(
                    content=f"not run: this call {risky[_call_id(call)]} and was not approved ({note}). "
                    "Do not retry it unchanged; ask the user or take another way.",
                    tool_call_id=call["id"],
                    name=call["name"],
                    status="error",
                    id=new_message_id("tool"),
                    additional_kwargs={
                        USER_MESSAGE: f"not run: it {risky[_call_id(call)]} and was not approved "
                        f"({note})",
                        REFUSED: True,
                    },
                )
            )
    return allowed, refused


def as_run(request: AIMessage, allowed: Sequence[ToolCall]) -> AIMessage | None:
    """The model's message as it actually ran, when an approval edited the arguments of a call
    (same id, so it replaces the original in the state: history, exports and the model's own
    context show what ran); None when nothing was edited."""
    edited = {call["id"]: call for call in allowed}
    calls = [edited.get(call["id"], call) for call in request.tool_calls]
    if all(new["args"] == old["args"] for new, old in zip(calls, request.tool_calls, strict=True)):
        return None
    return request.model_copy(update={"tool_calls": calls})
