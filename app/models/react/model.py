"""`ReActChatModel`: the chat model wrapper that drives an inner model through the ReAct protocol."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManager, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from app.models.react.parse import digest, is_thought_only, parse_react, unparsed_answer
from app.models.react.prompt import to_react_messages
from app.models.react.schema import ReActTool

OBSERVATION_STOP = "\nObservation:"
UNPARSED = "react_unparsed"  # response_metadata key of a reply taken as the answer unparsed


def conversation_key(messages: Sequence[BaseMessage]) -> str:
    """Tells identical replies at different points of a thread apart, deterministically."""
    last = messages[-1] if messages else None
    return digest(len(messages), (last.id or last.text) if last is not None else "")


class ReActChatModel(BaseChatModel):
    """Tool calling over plain text for an inner model that has no tool roles or tool API.

    There is deliberately no `_stream`: LangChain merges streamed chunks by re-parsing their
    tool_call_chunks, which drops an invalid call's error and can turn truncated JSON into a valid
    call. `_generate` reports the reply's text tokens through the callbacks instead, so LangGraph's
    "messages" stream still shows the answer as it is emitted, and the message itself is exact.
    """

    inner: BaseChatModel
    tools: tuple[ReActTool, ...] = ()
    stop_sequences: tuple[str, ...] = (OBSERVATION_STOP,)
    # Replies in a row that reasoned but neither acted nor answered, each corrected, before the
    # next such reply is taken as the answer (a weak model that never learns the format). Below
    # the graph's default retry budget (3), so the turn answers instead of failing.
    parse_retries: int = 2

    @property
    def _llm_type(self) -> str:
        return f"react-{self.inner._llm_type}"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ReActChatModel:
        """A copy that describes `tools` in its prompt; the inner model never sees a tool API."""
        return self.model_copy(update={"tools": tuple(ReActTool.from_tool(t) for t in tools)})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        stops = list(dict.fromkeys([*self.stop_sequences, *(stop or [])])) or None
        # nostream: LangGraph must not stream the raw protocol text; the parsed reply is streamed.
        config: RunnableConfig = {
            "callbacks": _inner_callbacks(run_manager),
            "tags": [TAG_NOSTREAM],
        }
        raw = self.inner.invoke(to_react_messages(messages, self.tools), config, stop=stops)
        salt = conversation_key(messages)
        parsed = parse_react(raw.text, self.tools)
        metadata = dict(raw.response_metadata)
        if is_thought_only(parsed) and unparsed_in_a_row(messages) >= self.parse_retries:
            parsed, metadata[UNPARSED] = unparsed_answer(parsed), True
        reply = parsed.to_message(
            salt=salt,
            id=raw.id or f"ai-react-{digest(salt, raw.text)}",
            usage_metadata=getattr(raw, "usage_metadata", None),
            response_metadata=metadata,
        )
        if run_manager:
            for chunk in _token_chunks(reply):
                run_manager.on_llm_new_token(
                    str(chunk.content), chunk=ChatGenerationChunk(message=chunk)
                )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def unparsed_in_a_row(messages: Sequence[BaseMessage]) -> int:
    """How many of this turn's last replies were unreadable (a format error with no tool named),
    counted back from the end until a reply that parsed or the user's message."""
    count = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        if not isinstance(message, AIMessage):
            continue
        calls = message.invalid_tool_calls
        if message.tool_calls or not calls or any(c.get("name") for c in calls):
            break
        count += 1
    return count


def wrap_react(model: BaseChatModel) -> ReActChatModel:
    """Give `model` tool calling through the ReAct text protocol."""
    return ReActChatModel(inner=model)


def _inner_callbacks(run_manager: CallbackManagerForLLMRun | None) -> CallbackManager | None:
    """Callbacks that make the inner call a child run of this one (tracing shows both)."""
    if run_manager is None:
        return None
    manager = CallbackManager(handlers=[], parent_run_id=run_manager.run_id)
    manager.set_handlers(run_manager.inheritable_handlers)
    manager.add_tags(run_manager.inheritable_tags)
    manager.add_metadata(run_manager.inheritable_metadata)
    return manager


def _token_chunks(reply: AIMessage) -> Iterator[AIMessageChunk]:
    """The reply's text as word-sized tokens, carrying the reply's id (the renderer dedupes on it)."""
    for token in re.findall(r"\s*\S+|\s+", reply.text):
        yield AIMessageChunk(content=token, id=reply.id)
