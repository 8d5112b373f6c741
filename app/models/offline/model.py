"""The embedded `offline` model: a deterministic intent planner behind LangChain's chat-model interface.

It is not a language model. It reads the request (English or Chinese), calls the bound tools step by step,
and answers from their results; it streams tokens and tool-call chunks like a real endpoint.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from app.models.offline import answers
from app.models.offline.structured import RESPONDERS, avoided_calls, respond
from app.models.offline.walk import Walk, digest
from graphs.shared.messages import is_notes
from graphs.shared.requests import request_of
from graphs.shared.summarize import TRANSCRIPT_LABELS, is_summary


class OfflineChatModel(BaseChatModel):
    """Plans tool calls from the request and answers from the tool results; deterministic."""

    bound_tools: tuple[str, ...] = ()
    structured_schema: str | None = (
        None  # bound by with_structured_output (app/models/offline/structured.py)
    )

    @property
    def _llm_type(self) -> str:
        return "waypoint-offline"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineChatModel:
        names = tuple(_tool_name(t) for t in tools)
        schema = names[0] if len(names) == 1 and names[0] in RESPONDERS else None
        return self.model_copy(update={"bound_tools": names, "structured_schema": schema})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.plan(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = self.plan(messages)
        for chunk in _chunks(reply):
            if run_manager and chunk.content:
                run_manager.on_llm_new_token(
                    str(chunk.content), chunk=ChatGenerationChunk(message=chunk)
                )
            yield ChatGenerationChunk(message=chunk)

    def plan(self, messages: Sequence[BaseMessage]) -> AIMessage:
        """The next message: tool calls for the first step not yet run, else the final answer.
        It reads the user's own words: the notes section before them (past experience) is not a
        request."""
        avoided = avoided_calls(_turn_notes(messages))
        messages = [m for m in messages if not is_notes(m)]
        if self.structured_schema:
            return respond(self.structured_schema, messages)
        if request_of(messages).get("ask") == "summary":
            return _answer(extractive_summary(str(messages[-1].content)), messages)
        turn_start = _last_human_index(messages)
        if turn_start is None:
            return _answer(answers.fallback(chinese=False), messages)
        request = str(messages[turn_start].content)
        earlier = _earlier_user_texts(messages[:turn_start])
        turn = list(messages[turn_start + 1 :])
        steps = Walk(
            request,
            turn,
            earlier_messages=list(messages[:turn_start]),
            tools=set(self.bound_tools),
            earlier_texts=earlier,
            avoided=avoided,
        )
        calls = steps.next_calls()
        if calls:
            return AIMessage(content="", tool_calls=calls, id=_stable_id("ai", messages))
        text = steps.answer(earlier)
        return _answer(text, messages)


def _turn_notes(messages: Sequence[BaseMessage]) -> str:
    """What `for_model` put in its own section before the user's current words (experience,
    lessons)."""
    return "\n\n".join(str(m.content) for m in messages if is_notes(m))


def _earlier_user_texts(messages: Sequence[BaseMessage]) -> list[str]:
    """What the user said before this turn, including what a summary kept of older turns."""
    texts = []
    for message in messages:
        if isinstance(message, HumanMessage):
            texts.append(str(message.content))
        elif is_summary(message):
            said = f"{TRANSCRIPT_LABELS['user']}: "
            texts += [
                line.split(said, 1)[1] for line in str(message.content).splitlines() if said in line
            ]
    return texts


def extractive_summary(transcript: str, limit: int = 160) -> str:
    """What the user said (so stated facts survive, verbatim) and each tool result, shortened."""
    label = TRANSCRIPT_LABELS
    kept_labels = (f"{label['user']}: ", f"{label['summary']}: ", label["tool_result"])
    kept = []
    for line in transcript.splitlines():
        if line.startswith(kept_labels):
            kept.append(line if len(line) <= limit else line[:limit] + "…")
    return "\n".join(kept) or "(nothing to summarise)"


def _last_human_index(messages: Sequence[BaseMessage]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return index
    return None


def _stable_id(prefix: str, messages: Sequence[BaseMessage]) -> str:
    return f"{prefix}-offline-{digest(len(messages), *(m.content for m in messages[-3:]))}"


def _answer(text: str, messages: Sequence[BaseMessage]) -> AIMessage:
    return AIMessage(content=text, id=_stable_id("ai", messages))


def _chunks(reply: AIMessage) -> Iterator[AIMessageChunk]:
    """Text as word-sized tokens; tool calls as tool_call_chunks with the arguments in pieces."""
    for token in re.findall(r"\s*[\u4e00-\u9fff]|\s*[^\s\u4e00-\u9fff]+|\s+", str(reply.content)):
        yield AIMessageChunk(content=token, id=reply.id)
    for index, call in enumerate(reply.tool_calls):
        arguments = json.dumps(call["args"], ensure_ascii=False)
        yield AIMessageChunk(
            content="",
            id=reply.id,
            tool_call_chunks=[{"name": call["name"], "args": "", "id": call["id"], "index": index}],
        )
        for start in range(0, len(arguments), 16):
            piece = arguments[start : start + 16]
            yield AIMessageChunk(
                content="",
                id=reply.id,
                tool_call_chunks=[{"name": None, "args": piece, "id": None, "index": index}],
            )


def _tool_name(tool: Any) -> str:
    """The name a bound tool is called by. A `BaseTool` says it: converting it to the OpenAI
    format builds a pydantic model of its arguments (~25 % of serve's CPU when done per call)."""
    if isinstance(tool, BaseTool):
        return tool.name
    return convert_to_openai_tool(tool)["function"]["name"]
