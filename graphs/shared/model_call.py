"""The model boundary every strategy's nodes cross: one call, a failure classified instead of raised,
an empty reply treated as the endpoint glitch it is, and the tokens the reply cost."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel, ValidationError

from graphs.shared.messages import for_model, new_message_id
from graphs.shared.model_errors import classify_call_error, classify_model_error
from graphs.state import AgentContext, LastError

ModelT = TypeVar("ModelT", bound=BaseModel)  # the schema a structured reply is parsed into

EMPTY_REPLY = "invalid response from endpoint: an empty reply (no text, no tool calls)"
EMPTY_ANSWER = "invalid response from endpoint: an empty answer"


@dataclass(frozen=True)
class ModelReply:
    """The reply, or `failure`, classified for the router; `tokens` is what the reply cost."""

    message: AIMessage | None
    failure: LastError | None
    tokens: int = 0


@dataclass(frozen=True)
class StructuredReply(Generic[ModelT]):
    """The parsed object; or `error`, why the reply did not validate (for the model to fix); or
    `failure`, the call itself failed (classified, for the router)."""

    parsed: ModelT | None
    error: str | None
    failure: LastError | None = None
    tokens: int = 0
    raw: AIMessage | None = None  # the model's reply as it came, when there was one


def model_input(messages: Sequence[AnyMessage], context: AgentContext) -> list[AnyMessage]:
    """What the model reads: the fixed system prompt, then the conversation as the model may read
    it (`for_model`: without Waypoint's notices, the turn's notes in a section before the user's message)."""
    prompt = [SystemMessage(context.system_prompt)] if context.system_prompt else []
    return [*prompt, *for_model(messages, context.turn_notes)]


def call_model(
    model: Runnable[LanguageModelInput, AIMessage],
    messages: Sequence[BaseMessage],
    *,
    answer_only: bool = False,
    prompt_tokens: Callable[[], int] | None = None,
    window_tokens: int | None = None,
) -> ModelReply:
    """One model call. `answer_only`: the model was given no tools, so a reply without text is
    empty whatever else it carries. `prompt_tokens` (and a window the server reported,
    `window_tokens`): how to count the request's size, so a failure is judged with it
    (`classify_call_error`: an empty stream after a long prompt is a context overflow); counted
    only when the call fails, since counting a long conversation costs a pass over it."""
    try:
        reply = model.invoke(list(messages))
    except Exception as exc:  # the model boundary: every failure is classified and routed
        if prompt_tokens is None:
            return ModelReply(None, classify_model_error(exc))
        return ModelReply(None, classify_call_error(exc, prompt_tokens(), window_tokens))
    reply = with_id(reply)
    if answer_only and not str(reply.content).strip():
        return ModelReply(None, transient(EMPTY_ANSWER))
    if is_empty(reply):
        return ModelReply(None, transient(EMPTY_REPLY))
    return ModelReply(reply, None, total_tokens(reply))


def ask_structured(
    model: BaseChatModel, schema: type[ModelT], messages: Sequence[AnyMessage]
) -> StructuredReply[ModelT]:
    """One model call whose reply must be a `schema` tool call (LangChain's tool-calling
    `with_structured_output`). A reply that does not validate comes back as `error`, for the model
    to fix; a failed call as `failure`, classified."""
    try:
        runnable = model.with_structured_output(schema, method="function_calling", include_raw=True)
        result = runnable.invoke(list(messages))
    except Exception as exc:  # the model boundary: every failure is classified and routed
        return StructuredReply(None, None, classify_model_error(exc))
    assert isinstance(result, dict)  # include_raw=True: {"raw", "parsed", "parsing_error"}
    raw = result.get("raw") if isinstance(result.get("raw"), AIMessage) else None
    tokens = total_tokens(raw) if raw is not None else 0
    if result.get("parsing_error") is not None:
        problem = unfit_reply(result["parsing_error"], schema)
        return StructuredReply(None, problem, tokens=tokens, raw=raw)
    if result.get("parsed") is None:
        problem = f"the reply contained no {schema.__name__} call"
        return StructuredReply(None, problem, tokens=tokens, raw=raw)
    return StructuredReply(result["parsed"], None, tokens=tokens, raw=raw)


def unfit_reply(error: BaseException, schema: type[BaseModel]) -> str:
    """Why a reply did not fit `schema`, in words the user and the model both read: each wrong
    field, what it should be and what came, without pydantic's error codes and links."""
    cause: BaseException | None = error
    while cause is not None and not isinstance(cause, ValidationError):
        cause = cause.__cause__
    if cause is None:
        return _short(error)
    fields = [
        f"{'.'.join(str(part) for part in found['loc']) or 'the call'}: {found['msg']} "
        f"(got {_short(repr(found['input']), 80)})"
        for found in cause.errors(include_url=False)[:3]
    ]
    more = f"; and {cause.error_count() - 3} more" if cause.error_count() > 3 else ""
    return _short(f"the {schema.__name__} call did not fit its form: {'; '.join(fields)}{more}")


def is_empty(reply: AIMessage) -> bool:
    return not str(reply.content).strip() and not reply.tool_calls and not reply.invalid_tool_calls


def transient(message: str) -> LastError:
    return LastError(kind="model_transient", message=message, retry_after=None)


def total_tokens(reply: AIMessage) -> int:
    usage = reply.usage_metadata
    return int(usage.get("total_tokens") or 0) if usage else 0


def with_id(reply: AIMessage) -> AIMessage:
    if not isinstance(reply, AIMessage):
        reply = AIMessage(content=str(getattr(reply, "content", reply)))
    if not reply.id:
        reply = reply.model_copy(update={"id": new_message_id("ai")})
    return reply


def _short(error: object, limit: int = 600) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit] + "…"
