"""A scripted chat model for graph tests: a queue of replies or exceptions, and a log of every call."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field


def _default_tool_names() -> list[str]:
    from tools import default_tools

    return [tool.name for tool in default_tools(Path(tempfile.gettempdir()) / "unused-workspace")]


# The tools default_tools(workspace) binds, in order (from the registry itself: a new tool is
# not a list to update in the tests).
TOOL_NAMES = _default_tool_names()


class ScriptExhaustedError(BaseException):
    """The graph called the model more often than the test scripted (a BaseException: not retried)."""


class ScriptedChatModel(BaseChatModel):
    script: list[Any] = Field(default_factory=list)
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[list[str]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        self.bound.append([_tool_name(t) for t in tools])
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.calls.append(list(messages))
        if not self.script:
            raise ScriptExhaustedError(f"model called {len(self.calls)} times; script ran dry")
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, BaseModel) and not isinstance(item, BaseMessage):
            item = structured(item)  # with_structured_output parses it back
        message = AIMessage(content=item) if isinstance(item, str) else item
        return ChatResult(generations=[ChatGeneration(message=message)])

    def assert_done(self) -> None:
        assert not self.script, f"{len(self.script)} scripted replies were never used"


def _tool_name(tool: Any) -> str:
    return getattr(tool, "name", None) or convert_to_openai_tool(tool)["function"]["name"]


def structured(value: BaseModel | dict, name: str | None = None) -> AIMessage:
    """A reply to `with_structured_output(Schema)`: one call of the schema's tool (a dict may be
    invalid on purpose; give the schema's `name`)."""
    args = value.model_dump() if isinstance(value, BaseModel) else value
    name = name or type(value).__name__
    return AIMessage(
        content="",
        tool_calls=[{"name": name, "args": args, "id": f"s-{name}", "type": "tool_call"}],
    )


def call(name: str, args: dict, call_id: str = "c1") -> dict:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def ai_calls(*calls: dict) -> AIMessage:
    return AIMessage(content="", tool_calls=list(calls))
