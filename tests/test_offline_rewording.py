"""The offline model reads what a graph asks for from marks on the request (graphs/shared/requests.py)
and the schema it is bound to, never from the wording: every prompt reworded, the same turns give
the same plans, verdicts, lessons, routes, summaries and answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

import graphs.plan.nodes
import graphs.plan.steps
import graphs.reflexion.nodes
import graphs.routed.nodes
import graphs.shared.closing
import graphs.shared.summarize
from app.models.offline import OfflineChatModel
from graphs.state import AgentContext
from graphs.strategies import get_strategy, strategy_turn_input
from tools import default_tools

pytestmark = pytest.mark.dated  # reruns on other pinned days: tests/test_pinned_dates.py

# (module, constant, reworded text): placeholders kept, every word changed.
REWORDED: list[tuple[Any, str, str]] = [
    (graphs.shared.summarize, "SUMMARIZE_INSTRUCTION", "[reworded summary] Condense this log."),
    (
        graphs.plan.steps,
        "PLANNER_PROMPT",
        "[reworded planner] Up to {max_steps} calls, from this list only:\n{tools}",
    ),
    (graphs.plan.steps, "TOOL_LINE", "* [reworded tool line] {description} => {name} {signature}"),
    (
        graphs.plan.nodes,
        "REPLAN_INSTRUCTION",
        "[reworded replan] {tool} (number {number}) broke: {error}. {done} done; go on at "
        "{next_number}.",
    ),
    (
        graphs.plan.nodes,
        "CONTINUE_INSTRUCTION",
        "[reworded continue] {done} ran; the rest from {next_number}.",
    ),
    (graphs.plan.nodes, "INVALID_PLAN_INSTRUCTION", "[reworded invalid plan] {error}"),
    (graphs.plan.nodes, "EMPTY_PLAN", "[reworded empty plan] none at all? send it again if so"),
    (graphs.plan.nodes, "SYNTHESIZE_INSTRUCTION", "[reworded synthesize] Reply now."),
    (graphs.shared.closing, "FINAL_ANSWER_INSTRUCTION", "[reworded final answer] Stop; reply."),
    (graphs.reflexion.nodes, "EVALUATE_PROMPT", "[reworded evaluate] Was it right?"),
    (graphs.reflexion.nodes, "REFLECT_PROMPT", "[reworded reflect] {reason}{earlier}"),
    (graphs.reflexion.nodes, "LESSONS_HEADER", "[reworded lessons] Keep in mind:"),
    (graphs.routed.nodes, "CLASSIFY_PROMPT", "[reworded classify] Which path?"),
    (graphs.routed.nodes, "SMALL_TALK_INSTRUCTION", "[reworded small talk] Be nice."),
]
# Not reached by the offline model's turns below. Its plans are always valid; an empty one (a turn
# that needs no tool) is questioned once (EMPTY_PLAN, through INVALID_PLAN_INSTRUCTION).
NOT_REACHED: set[str] = set()

NAME_TURNS = ["my name is Ada", "what is 1 plus 1", "weather in Paris and Tokyo", "what's my name?"]
COMPARISON = "weather in Paris and London tomorrow, which is warmer?"
SCENARIOS: list[tuple[str, list[str], dict[str, Any], set[str] | None]] = [
    ("react", NAME_TURNS, {"context_tokens": 200}, None),
    ("react", [COMPARISON], {"max_iterations": 1}, None),
    ("plan", NAME_TURNS, {"context_tokens": 200}, None),
    ("plan", [COMPARISON, "weather in Paris and Atlantis, which is warmer?"], {}, None),
    ("plan", [f"{COMPARISON} save it to trip.txt"], {}, None),  # the plan continues
    # A plan may only use the tools the request offers: no get_weather here.
    ("plan", ["weather in Paris and 2 plus 3"], {}, {"calculator", "current_time"}),
    ("reflexion", ["read missing.txt", "what is 6 times 7"], {"max_trials": 2}, None),
    ("routed", ["what is 6 times 7", "hi", "weather in Tokyo"], {}, None),
]
STATE_FIELDS = ("status", "plan", "step_results", "replans", "trial", "lessons", "verdict", "route")


class RecordingOfflineModel(OfflineChatModel):
    """The offline model, keeping the text of every system and user message it is shown (the
    turn's notes, such as reflexion's lessons, go in front of the user's message)."""

    shown: list[str] = Field(default_factory=list)

    def plan(self, messages: Any) -> Any:
        self.shown.extend(str(m.content) for m in messages if m.type in {"system", "human"})
        return super().plan(messages)


def run(strategy: str, texts: list[str], limits: dict, tools: list[BaseTool]) -> tuple[dict, list]:
    """(what the turns produced, the system prompts the model was shown)."""
    model = RecordingOfflineModel()
    chosen = get_strategy(strategy)
    graph = chosen.build(InMemorySaver())
    context = AgentContext(model=model, tools=tools, system_prompt="You are Waypoint.", **limits)
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    paths = []
    for turn, text in enumerate(texts, start=1):
        message = HumanMessage(text, id=f"h{turn}")
        updates = graph.stream(
            strategy_turn_input(chosen, message, turn, started_at=0.0),
            config,
            context=context,
            stream_mode="updates",
        )
        paths.append([node for update in updates for node in update])
    values = graph.get_state(config).values
    record = {
        "paths": paths,
        "messages": [_message(m) for m in values["messages"]],
        **{key: values.get(key) for key in STATE_FIELDS},
    }
    return record, model.shown


def _message(message: BaseMessage) -> tuple:
    calls = [(c["name"], c["args"]) for c in getattr(message, "tool_calls", [])]
    return (
        message.type,
        message.name,
        str(message.content),
        calls,
        getattr(message, "status", None),
    )


def run_all(workspace: Path) -> tuple[list[dict], list[str]]:
    records, shown = [], []
    for number, (strategy, texts, limits, names) in enumerate(SCENARIOS):
        tools = default_tools(workspace / str(number))
        tools = [t for t in tools if names is None or t.name in names]
        record, seen = run(strategy, texts, limits, tools)
        records.append(record)
        shown += seen
    return records, shown


def test_rewording_every_prompt_leaves_the_offline_model_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    before, _ = run_all(tmp_path / "before")
    for module, name, text in REWORDED:
        monkeypatch.setattr(module, name, text)
    after, shown = run_all(tmp_path / "after")

    reached = {name for _, name, text in REWORDED if any(text.split("]")[0] in s for s in shown)}
    assert reached == {name for _, name, _ in REWORDED} - NOT_REACHED  # the new words were used
    for scenario, old, new in zip(SCENARIOS, before, after, strict=True):
        assert new == old, scenario[:2]


def test_relabelling_the_summary_transcript_keeps_the_facts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    labels = {
        "summary": "Summary so far",
        "user": "The user wrote",
        "tool_call": "Called",
        "assistant": "We answered",
        "tool_result": "Tool output",
    }
    for key, label in labels.items():
        monkeypatch.setitem(graphs.shared.summarize.TRANSCRIPT_LABELS, key, label)
    record, _ = run("react", NAME_TURNS, {"context_tokens": 200}, default_tools(tmp_path))

    summary = record["messages"][0]
    assert summary[1] == graphs.shared.summarize.SUMMARY_NAME
    assert "The user wrote: my name is Ada" in summary[2]
    assert record["messages"][-1][2] == "Your name is Ada."
