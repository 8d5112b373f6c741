"""Real graph turns on the offline model, in-process: one thread per request, any strategy, and what
a turn's answer says about a calculation (the value it gives, or an honest refusal)."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from app.models.offline import OfflineChatModel
from graphs.state import AgentContext
from graphs.strategies import get_strategy, strategy_turn_input
from tools import default_tools

REFUSALS = ("can't read", "无法把", "failed:", "失败：", "can't answer that", "回答不了")


@dataclass
class TurnResult:
    messages: list[BaseMessage]

    @property
    def answer(self) -> str:
        return str(self.messages[-1].content)

    def results(self, name: str) -> list[ToolMessage]:
        return [m for m in self.messages if isinstance(m, ToolMessage) and m.name == name]

    def calls(self, name: str) -> list[dict]:
        return [
            c["args"]
            for m in self.messages
            if isinstance(m, AIMessage)
            for c in m.tool_calls
            if c["name"] == name
        ]

    def calculated(self) -> list[str]:
        """The values the calculator returned that the answer states as a result."""
        values = [str(m.content) for m in self.results("calculator") if m.status != "error"]
        return [v for v in values if re.search(rf"= {re.escape(v)}(?:$|\s|。)", self.answer)]

    def refused(self) -> bool:
        return not self.calculated() and any(word in self.answer for word in REFUSALS)


class Turns:
    """One graph of one strategy; every request runs in a fresh thread."""

    def __init__(self, workspace: Path, strategy: str = "react") -> None:
        self.strategy = get_strategy(strategy)
        self.graph = self.strategy.build(InMemorySaver())
        self.context = AgentContext(
            model=OfflineChatModel(),
            tools=default_tools(workspace),
            system_prompt="You are Waypoint.",
            backoff_base=0,
            sleep=lambda seconds: None,
        )
        self.threads = itertools.count(1)

    def ask(self, *texts: str) -> TurnResult:
        """The last turn of a new thread in which `texts` are said in order."""
        config = {"configurable": {"thread_id": f"t{next(self.threads)}"}, "recursion_limit": 100}
        start = 0
        for turn, text in enumerate(texts, start=1):
            message = HumanMessage(text, id=f"human-{turn}")
            values = self.graph.invoke(
                strategy_turn_input(self.strategy, message, turn), config, context=self.context
            )
            messages = values["messages"]
            start = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        return TurnResult(list(messages[start + 1 :]))
