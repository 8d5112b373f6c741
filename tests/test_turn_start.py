"""Where a turn begins (graphs/shared/turns.py): in the first node that runs for a new user message,
with no step of its own, and in the node error handler when that first node has a bug."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from graphs.react.graph import build_graph, recursion_limit
from graphs.state import AgentContext
from tests.fakes import ScriptedChatModel, ai_calls, call
from tools.calculator import calculator

CLOCK = 1_800_000_000.0  # the run context's clock, pinned: a turn's start time comes from it


class BrokenBinding(ScriptedChatModel):
    """A model whose tool binding has a bug: the agent node raises before any model call."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        raise RuntimeError("binding broke")


def context(model: ScriptedChatModel, tools: list[BaseTool]) -> AgentContext:
    return AgentContext(model=model, tools=tools, backoff_base=0, clock=lambda: CLOCK)


def send(graph: Any, ctx: AgentContext, text: str, message_id: str) -> list[tuple[str, dict]]:
    """One turn with just the message as input, as the application and a server's client send it;
    the node updates it streamed."""
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": recursion_limit(ctx)}
    chunks = graph.stream(
        {"messages": [HumanMessage(text, id=message_id)]},
        config,
        context=ctx,
        stream_mode="updates",
        durability="sync",
    )
    return [(node, update) for chunk in chunks for node, update in chunk.items()]


def test_the_first_node_begins_the_turn_in_its_own_update_with_no_step_of_its_own():
    model = ScriptedChatModel(
        script=[ai_calls(call("calculator", {"expression": "6*7"}, "c1")), "42", "Hello."]
    )
    ctx = context(model, [calculator])
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}

    updates = send(graph, ctx, "what is 6 times 7", "human-1")

    assert [node for node, _ in updates] == ["agent", "tools", "agent"]
    first = updates[0][1]
    assert (first["turn"], first["turn_message_id"], first["turn_started_at"]) == (
        1,
        "human-1",
        CLOCK,
    )
    assert first["iteration"] == 1  # the agent ran on the reset counters: its step is the first
    assert "turn" not in updates[1][1] and "turn" not in updates[2][1]  # the turn had begun
    history = list(graph.get_state_history(config))
    assert [s.metadata["source"] for s in reversed(history)] == ["input"] + ["loop"] * 4

    updates = send(graph, ctx, "hello", "human-2")

    assert [node for node, _ in updates] == ["agent"]
    values = graph.get_state(config).values
    assert (values["turn"], values["iteration"], values["call_signatures"]) == (2, 1, [])
    assert values["turn_message_id"] == "human-2" and values["status"] == "answered"
    model.assert_done()


def test_a_bug_in_the_first_node_still_begins_the_turn_it_fails():
    model = ScriptedChatModel(script=["Hello."])
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    send(graph, context(model, []), "hello", "human-1")

    broken = context(BrokenBinding(), [calculator])
    updates = send(graph, broken, "what is 6 times 7", "human-2")

    assert [node for node, _ in updates] == ["__default_error_handler__", "failure_handler"]
    values = graph.get_state(config).values
    assert (values["turn"], values["turn_message_id"], values["status"]) == (2, "human-2", "failed")
    assert values["last_error"]["message"] == "agent: RuntimeError: binding broke"
    assert values["iteration"] == 0  # this turn's counters, not the first turn's
    assert "binding broke" in values["messages"][-1].content
