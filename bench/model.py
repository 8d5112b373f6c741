"""The benchmark's model: an infinite, deterministic policy that both graphs drive the same way.

A calculator question gets one tool call; the tool's result gets a short streamed answer; anything
else (a summarise instruction, say) gets a short fixed reply. It costs microseconds, so what the
benchmark measures is the machinery around it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

QUESTION = re.compile(r"what is (\d+) plus (\d+)")
OTHER_REPLY = "Noted: the user asked for sums and got them."


def question(turn: int) -> str:
    """The user input of turn `turn` (1-based); every turn's text differs, like a real thread's."""
    return f"what is {turn} plus {turn}"


class BenchChatModel(BaseChatModel):
    """Calculator question → one `calculator` call; tool result → `a + b = c`, in a few chunks."""

    @property
    def _llm_type(self) -> str:
        return "bench-scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> BenchChatModel:
        return self

    def reply(self, messages: Sequence[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"The answer is {last.content}.")
        match = QUESTION.search(str(last.content)) if last.type == "human" else None
        if match is None:
            return AIMessage(content=OTHER_REPLY)
        expression = f"{match[1]} + {match[2]}"
        call_id = "call_" + hashlib.sha1(str(last.content).encode()).hexdigest()[:16]
        return AIMessage(
            content="",
            tool_calls=[
                {
                    "name": "calculator",
                    "args": {"expression": expression},
                    "id": call_id,
                    "type": "tool_call",
                }
            ],
        )

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.reply(messages))])

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        reply = self.reply(messages)
        if reply.tool_calls:
            call = reply.tool_calls[0]
            chunk = AIMessageChunk(
                content="",
                tool_call_chunks=[
                    {
                        "name": call["name"],
                        "args": _json_args(call["args"]),
                        "id": call["id"],
                        "index": 0,
                        "type": "tool_call_chunk",
                    }
                ],
            )
            yield ChatGenerationChunk(message=chunk)
            return
        for piece in re.findall(r"\S+\s*", str(reply.content)):
            chunk = AIMessageChunk(content=piece)
            if run_manager:
                run_manager.on_llm_new_token(piece, chunk=ChatGenerationChunk(message=chunk))
            yield ChatGenerationChunk(message=chunk)


def _json_args(args: dict) -> str:
    import json

    return json.dumps(args)
