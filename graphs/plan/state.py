"""What the plan strategy keeps (PlanState, reset every turn) and the Plan it asks the model for."""

from __future__ import annotations

from typing import Any, NotRequired

from pydantic import BaseModel, Field

from graphs.state import AgentState

MAX_REPLANS = 1


class PlanStep(BaseModel):
    """One step of a plan: a single tool call."""

    tool: str = Field(description="the name of one of the available tools")
    arguments: dict[str, Any] = Field(
        default_factory=dict,
        description="the tool's arguments; a string may contain {{step N}} or {{step N.field}} "
        "to use the result of an earlier step",
    )
    reason: str = Field(default="", description="why this step is needed, in a few words")


class Plan(BaseModel):
    """The steps that answer the user's request, in order; empty when no tool is needed."""

    steps: list[PlanStep] = Field(default_factory=list)
    continues: bool = Field(
        default=False,
        description="true when what comes next depends on what these steps return (say, which "
        "of two results is larger): once they have run, you are asked for the rest of the plan",
    )


class PlanState(AgentState):
    """AgentState plus the plan of the current turn and each step's result (reset every turn)."""

    plan: NotRequired[list[dict] | None]
    step_results: NotRequired[list[dict]]
    replans: NotRequired[int]
    plan_continues: NotRequired[bool]  # the plan asked for its rest once its steps have run


PLAN_TURN_RESET: dict[str, Any] = {
    "plan": None,
    "step_results": [],
    "replans": 0,
    "plan_continues": False,
}


def needs_replan(state: PlanState) -> bool:
    """The last step failed and the turn still has its re-plan."""
    results = state.get("step_results") or []
    return bool(results) and results[-1]["status"] == "error" and _replans_left(state)


def _replans_left(state: PlanState) -> bool:
    return state.get("replans", 0) < MAX_REPLANS


def continues(state: PlanState) -> bool:
    """Every planned step has run, the last one succeeded, and the plan asked for its rest."""
    results = state.get("step_results") or []
    done = bool(results) and results[-1]["status"] == "success" and not steps_left(state)
    return done and bool(state.get("plan_continues"))


def steps_left(state: PlanState) -> bool:
    return len(state.get("step_results") or []) < len(state.get("plan") or [])
