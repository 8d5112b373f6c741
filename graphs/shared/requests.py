"""What a graph asks the model for, marked on the request itself rather than left to its wording: a
summary, or a plan and the tools it may use. A model can tell the requests apart without reading
prompt text (the offline planner does), so prompts can be reworded freely. The mark rides in the
first system message's `additional_kwargs`, which chat-model clients do not send to an endpoint.
Structured-output requests are marked already, by the schema the model is bound to."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.messages import BaseMessage, SystemMessage

REQUEST_KEY = "waypoint_request"
Ask = Literal["summary", "plan"]


def asking(prompt: str, ask: Ask, **details: Any) -> SystemMessage:
    """The system message of a request: the prompt, and the mark of what it asks for."""
    return SystemMessage(prompt, additional_kwargs={REQUEST_KEY: {"ask": ask, **details}})


def request_of(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """The mark of a request, `{"ask": ..., **details}`, or {} for an ordinary turn."""
    for message in messages:
        if isinstance(message, SystemMessage) and REQUEST_KEY in message.additional_kwargs:
            return dict(message.additional_kwargs[REQUEST_KEY])
    return {}
