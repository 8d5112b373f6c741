"""Approving risky tool calls: a run pauses (LangGraph `interrupt`) with the calls to approve, and
is resumed with a decision per call, from the person asked (`Approver`) or by the policy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from langgraph.types import Command, StateSnapshot

from app.service.events import Notice
from app.service.recovery import pending_approval
from app.service.run import TurnRun
from app.text import plural
from graphs.shared.approvals import ApprovalDecision, ApprovalRequest

# Given the risky calls awaiting approval, returns a decision per call id.
Approver = Callable[[list[ApprovalRequest]], dict[str, ApprovalDecision]]


def by_policy(calls: list[ApprovalRequest], policy: str) -> dict[str, ApprovalDecision]:
    """The decisions when nobody is asked: `auto` approves, anything else rejects."""
    action: Literal["approve", "reject"] = "approve" if policy == "auto" else "reject"
    note = f"the approval policy is '{policy}' and nobody was asked"
    return {call["id"]: {"action": action, "note": note} for call in calls}


def answer_approvals(
    run: TurnRun, approver: Approver | None, *, just_ran: bool = False
) -> StateSnapshot:
    """Answer every approval the run pauses for; returns the head once nothing is pending. With
    nobody to ask and the policy `ask` (a LangGraph API client), the pause is left for the client
    to answer with a command, and the paused head is returned.
    `just_ran`: the run was driven right before, so its streamed head can be used."""
    head_cache = run.thread.head
    while True:
        head = head_cache.after_run(run.metadata) if just_ran else head_cache.load()
        calls = pending_approval(head)
        if not calls or (approver is None and run.context.approval == "ask"):
            return head
        decisions = approver(calls) if approver else by_policy(calls, run.context.approval)
        run.drive(Command(resume=decisions))
        just_ran = True


def settle_before_turn(
    run: TurnRun, approver: Approver | None, head: StateSnapshot
) -> StateSnapshot:
    """A new message on a thread paused for approval: answer the pause first (ask, or by policy),
    under the paused turn's own number and metadata."""
    calls = pending_approval(head)
    if not calls:
        return head
    if approver is None:
        policy = run.context.approval
        verdict = "approved" if policy == "auto" else "rejected"
        run.sink.emit(
            Notice(
                f"a pending approval of {plural(len(calls), 'call')} was {verdict} by the "
                f"approval policy '{policy}'"
            )
        )
    return answer_approvals(run, approver)
