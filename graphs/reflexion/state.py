"""What the reflexion strategy keeps (this turn's trials) and the Verdict and Lesson it asks for."""

from __future__ import annotations

from typing import NotRequired

from pydantic import BaseModel, Field

from graphs.state import AgentState


class Verdict(BaseModel):
    """Whether the last answer fully and correctly does what the user asked."""

    success: bool
    reason: str = Field(description="what is right or, on failure, what is wrong or missing")


class Lesson(BaseModel):
    """One short lesson for the next attempt at the same request."""

    lesson: str = Field(description="an instruction for next time, one or two sentences")


class ReflexionState(AgentState):
    """AgentState plus this turn's trials: their count, the lessons so far, the last verdict."""

    trial: NotRequired[int]
    lessons: NotRequired[list[str]]
    verdict: NotRequired[dict | None]


REFLEXION_TURN_RESET = {"trial": 0, "lessons": [], "verdict": None}
