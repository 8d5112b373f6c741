"""What the routed strategy keeps (this turn's route) and the Route it asks the model for."""

from __future__ import annotations

from typing import Literal, NotRequired

from pydantic import BaseModel, Field

from graphs.state import AgentState


class Route(BaseModel):
    """Which path handles the user's message."""

    path: Literal["calculator", "small_talk", "tools"] = Field(
        description="calculator: pure arithmetic; small_talk: greetings or thanks needing no "
        "tool; tools: anything else"
    )
    expression: str | None = Field(
        default=None, description="for calculator: the arithmetic expression to evaluate"
    )
    reason: str = ""


class RoutedState(AgentState):
    """AgentState plus the route chosen for this turn's message."""

    route: NotRequired[dict | None]


ROUTED_TURN_RESET = {"route": None}
