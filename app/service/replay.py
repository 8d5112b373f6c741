"""Replay: re-execute a thread's graph from an earlier checkpoint, on a new branch whose model and
tools run again. Before a tool with side effects runs again, `ReplayConfirm` decides; files changed
outside Waypoint are spared by the caller's tools (`tools.file_tools.sparing`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection

from langchain_core.messages import ToolCall
from langgraph.types import Command, StateSnapshot

from app.errors import UsageError
from app.service.events import Notice
from app.service.recovery import close, pending_approval
from app.service.run import TurnRun
from graphs.shared.approvals import ApprovalDecision, ApprovalRequest
from graphs.shared.messages import cancelled_results, dangling_tool_calls
from graphs.strategies import Strategy
from tools import side_effect_names

ReplayConfirm = Callable[[list[ToolCall]], bool]


def nothing_to_rerun(thread_id: str, checkpoint_id: str) -> UsageError:
    """The error for a replay from a checkpoint whose turn had ended there."""
    return UsageError(
        f"checkpoint {checkpoint_id} ended its turn, so there is nothing to re-run; "
        f"pick an earlier checkpoint of that turn (history --thread {thread_id} --all)"
    )


def rerun_at_once(
    strategy: Strategy, start: StateSnapshot, side_effects: Collection[str]
) -> list[str]:
    """The tools with side effects a replay from `start` would run at once: the calls waiting at
    the strategy's gate (react: `tools`, plan: `executor`)."""
    if strategy.replay_gate is None or start.next != (strategy.replay_gate,):
        return []
    return [c["name"] for c in strategy.gate_calls(start.values) if c["name"] in side_effects]


def refuse_unconfirmed(
    side_effects: Collection[str],
    confirm: Callable[[list[str]], bool],
    how_to_allow: str,
) -> Callable[[StateSnapshot, list[ToolCall]], None]:
    """A `prepare_replay` check: a replay that would meet tools with side effects again (the
    calls open at its start, and those the turn made after it the first time) needs `confirm`'s
    yes before anything changes; a no raises `UsageError`, files and head untouched."""

    def check(start: StateSnapshot, ahead: list[ToolCall]) -> None:
        risky = list(dict.fromkeys(c["name"] for c in ahead if c["name"] in side_effects))
        if risky and not confirm(risky):
            raise UsageError(
                f"the replay would re-run tools with side effects ({', '.join(risky)}); "
                f"nothing was changed; {how_to_allow}"
            )

    return check


def replay_from(
    run: TurnRun, strategy: Strategy, checkpoint_id: str, approve: ReplayConfirm
) -> None:
    """Drive `run` from `checkpoint_id` to its end, asking `approve` before side effects."""
    if strategy.replay_gate is None:
        _replay_asking(run, checkpoint_id, approve)
    else:
        _replay_gated(run, strategy, checkpoint_id, approve)


def _replay_gated(
    run: TurnRun, strategy: Strategy, checkpoint_id: str, approve: ReplayConfirm
) -> None:
    """Stop before each step of the strategy's gate node (react: `tools`) whose calls have side
    effects; a refusal closes the branch there."""
    gate = strategy.replay_gate
    graph, thread_id = run.thread.graph, run.thread.thread_id
    config = run.from_checkpoint(checkpoint_id)
    while True:
        run.drive(None, config, interrupt_before=[gate])
        head = graph.get_state(run.config)
        if head.next != (gate,):
            return
        calls = strategy.gate_calls(head.values)
        risky = [c for c in calls if c["name"] in side_effect_names(run.context.tools)]
        if risky and not approve(risky):
            dangling = dangling_tool_calls(head.values["messages"])
            close(
                graph, thread_id, cancelled_results(dangling, "replay stopped before re-running it")
            )
            run.sink.emit(
                Notice("replay stopped before re-running " + ", ".join(c["name"] for c in risky))
            )
            return
        config = run.config


def _replay_asking(run: TurnRun, checkpoint_id: str, approve: ReplayConfirm) -> None:
    """Strategies whose tools run inside a subgraph (reflexion, routed): every call of a tool with
    side effects pauses for approval there, and `approve` answers; a refused call is answered
    "not run" and the run goes on with that."""
    asking = run.with_context(
        dataclasses.replace(
            run.context, approval="ask", confirm_tools=side_effect_names(run.context.tools)
        )
    )
    asking.drive(None, asking.from_checkpoint(checkpoint_id))
    while calls := pending_approval(asking.thread.head.load()):
        allowed = approve([_as_tool_call(c) for c in calls])
        decision: ApprovalDecision = (
            {"action": "approve", "note": ""}
            if allowed
            else {"action": "reject", "note": "the replay was refused"}
        )
        asking.drive(Command(resume={c["id"]: decision for c in calls}))


def _as_tool_call(question: ApprovalRequest) -> ToolCall:
    return ToolCall(
        name=question["name"], args=question["args"], id=question["id"], type="tool_call"
    )
