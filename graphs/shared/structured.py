"""Structured outputs the strategies ask the model for (plans, verdicts, lessons, routes), and the one
helper that asks for them through LangChain's tool-calling `with_structured_output`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage
from pydantic import BaseModel, Field


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


class Verdict(BaseModel):
    """Whether the last answer fully and correctly does what the user asked."""

    success: bool
    reason: str = Field(description="what is right or, on failure, what is wrong or missing")


class Lesson(BaseModel):
    """One short lesson for the next attempt at the same request."""

    lesson: str = Field(description="an instruction for next time, one or two sentences")


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


STRUCTURED_SCHEMAS = {schema.__name__: schema for schema in (Plan, Verdict, Lesson, Route)}


@dataclass(frozen=True)
class StructuredReply:
    """The parsed object, or the error to show the model; `raw` is the model's reply."""

    parsed: BaseModel | None
    error: str | None
    raw: AIMessage | None


def ask_structured(
    model: BaseChatModel, schema: type[BaseModel], messages: Sequence[AnyMessage]
) -> StructuredReply:
    """One model call whose reply must be a `schema` tool call. Model failures raise (the caller
    classifies them); a reply that does not validate comes back as `error`, for the model to fix."""
    runnable = model.with_structured_output(schema, method="function_calling", include_raw=True)
    result = runnable.invoke(list(messages))
    raw = result.get("raw") if isinstance(result.get("raw"), AIMessage) else None
    if result.get("parsing_error") is not None:
        return StructuredReply(None, _short(result["parsing_error"]), raw)
    if result.get("parsed") is None:
        return StructuredReply(None, f"the reply contained no {schema.__name__} call", raw)
    return StructuredReply(result["parsed"], None, raw)


def tokens_of(reply: StructuredReply) -> int:
    usage = (reply.raw.usage_metadata if reply.raw is not None else None) or {}
    return int(usage.get("total_tokens") or 0)


def _short(error: object) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= 600 else text[:600] + "…"
