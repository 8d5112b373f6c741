"""The ReAct text protocol: parsing replies, the prompt and conversation sent to the inner model,
and whole turns through the real graph with a scripted inner model."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field
from rich.console import Console

from app.cli.render import ConsoleRenderer
from app.models.react import (
    FORMAT_HINT,
    OBSERVATION_STOP,
    UNPARSED,
    ParsedAction,
    ReActChatModel,
    ReActTool,
    parse_react,
    react_system_prompt,
    wrap_react,
)
from app.service.events import NodeUpdate
from graphs.react.graph import build_graph, recursion_limit
from graphs.state import AgentContext, turn_input
from tests.fakes import TOOL_NAMES, ScriptedChatModel, call
from tools import default_tools

PROMPT = "You are Waypoint, a careful assistant."
GOOD_ACTION = 'Thought: use calculator\nAction: calculator\nAction Input: {"expression": "6*7"}'
MALFORMED = "Action: calculator\nAction Input: {oops"


@pytest.fixture
def tools(tmp_path: Path) -> list[BaseTool]:
    return default_tools(tmp_path / "ws")


@pytest.fixture
def specs(tools: list[BaseTool]) -> list[ReActTool]:
    return [ReActTool.from_tool(t) for t in tools]


class StopRecordingModel(ScriptedChatModel):
    stops: list[Any] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kwargs: Any) -> Any:
        self.stops.append(stop)
        return super()._generate(messages, stop, **kwargs)


def invalid_call(name: str | None, args: str, call_id: str) -> dict:
    return {"name": name, "args": args, "id": call_id, "error": "bad", "type": "invalid_tool_call"}


def one_invalid(text: str, specs: list[ReActTool]) -> tuple[str | None, str, str]:
    parsed = parse_react(text, specs)
    assert parsed.final_answer is None and parsed.actions == ()
    [bad] = parsed.invalid
    return bad.name, bad.raw, bad.error


# --- parse_react: good replies --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        GOOD_ACTION,
        "\n\n  Thought:   use calculator  \n\n  Action:    calculator  \n"
        '  Action Input:    {"expression": "6*7"}   \n\n',
        'Thought: use calculator\nAction: calculator\nAction Input:\n```json\n{"expression": "6*7"}\n```',
        'thought: use calculator\naction: calculator\naction input: {"expression": "6*7"}',
        '**Thought:** use calculator\n**Action:** `calculator`\n**Action Input:** `{"expression": "6*7"}`',
        'Thought: use calculator\nAction: Calculator\nAction Input: {\n  "expression": "6*7"\n}',
    ],
)
def test_action_replies_parse_to_one_tool_call(text: str, specs: list[ReActTool]) -> None:
    parsed = parse_react(text, specs)

    assert parsed.actions == (ParsedAction("calculator", {"expression": "6*7"}),)
    assert parsed.invalid == ()
    assert parsed.final_answer is None
    assert parsed.thought == "use calculator"


@pytest.mark.parametrize(
    "text, answer",
    [
        ("Final Answer: 42", "42"),
        ("Thought: I know it now\nFinal Answer:   42  \n", "42"),
        ("thought: done\nfinal answer: 6*7 is 42.\nThat is all.", "6*7 is 42.\nThat is all."),
        ("**Final Answer:** 42", "42"),
    ],
)
def test_final_answer_replies_parse_to_the_answer(
    text: str, answer: str, specs: list[ReActTool]
) -> None:
    parsed = parse_react(text, specs)

    assert parsed.final_answer == answer
    assert parsed.to_message().content == answer
    assert parsed.to_message().tool_calls == []


def test_an_invented_observation_and_everything_after_it_is_dropped(
    specs: list[ReActTool],
) -> None:
    text = f"{GOOD_ACTION}\nObservation: 41\nThought: I know it\nFinal Answer: 41"

    parsed = parse_react(text, specs)

    assert parsed.actions == (ParsedAction("calculator", {"expression": "6*7"}),)
    assert parsed.final_answer is None
    assert parsed.invalid == ()


def test_several_action_blocks_become_several_calls(specs: list[ReActTool]) -> None:
    text = (
        "Thought: two things\n"
        'Action: calculator\nAction Input: {"expression": "6*7"}\n'
        'Action: get_weather\nAction Input: {"city": "Paris", "unit": "celsius"}'
    )

    message = parse_react(text, specs).to_message(salt="s")

    assert [(c["name"], c["args"]) for c in message.tool_calls] == [
        ("calculator", {"expression": "6*7"}),
        ("get_weather", {"city": "Paris", "unit": "celsius"}),
    ]
    assert message.content == "two things"
    assert len({c["id"] for c in message.tool_calls}) == 2


def test_a_tool_without_arguments_accepts_an_empty_input(specs: list[ReActTool]) -> None:
    for raw in ("{}", "", "None"):
        parsed = parse_react(f"Action: current_time\nAction Input: {raw}", specs)
        assert parsed.actions == (ParsedAction("current_time", {}),), raw


def test_call_ids_are_deterministic_and_distinct_per_point_in_the_thread(
    specs: list[ReActTool],
) -> None:
    parsed = parse_react(GOOD_ACTION, specs)

    first = parsed.to_message(salt="after-3-messages").tool_calls[0]["id"]
    again = parse_react(GOOD_ACTION, specs).to_message(salt="after-3-messages")
    later = parsed.to_message(salt="after-5-messages").tool_calls[0]["id"]

    assert first.startswith("react_")
    assert again.tool_calls[0]["id"] == first
    assert later != first


# --- parse_react: mistakes become invalid tool calls ---------------------------------------------


def test_unknown_tool_is_invalid_and_lists_the_valid_tools(specs: list[ReActTool]) -> None:
    name, raw, error = one_invalid('Action: calc\nAction Input: {"expression": "6*7"}', specs)

    assert (name, raw) == ("calc", '{"expression": "6*7"}')
    assert error == (
        f"there is no tool named 'calc'. Valid tools: {', '.join(TOOL_NAMES)}. {FORMAT_HINT}"
    )


def test_bad_json_is_invalid_and_shows_the_expected_input(specs: list[ReActTool]) -> None:
    name, raw, error = one_invalid(MALFORMED, specs)

    assert (name, raw) == ("calculator", "{oops")
    assert error == (
        "Action Input is not valid JSON: Expecting property name enclosed in double quotes at "
        'line 1, column 2. Expected: Action: calculator\nAction Input: {"expression": "<expression>"}'
    )


@pytest.mark.parametrize(
    "action, problem",
    [
        (
            'Action: calculator\nAction Input: {"expr": "6*7"}',
            "invalid arguments for calculator: expression: required argument is missing",
        ),
        (
            'Action: calculator\nAction Input: {"expression": 42}',
            "invalid arguments for calculator: expression: expected string, got an integer",
        ),
        (
            'Action: get_weather\nAction Input: {"city": "Paris", "unit": "kelvin"}',
            'invalid arguments for get_weather: unit: must be one of ["celsius", "fahrenheit"]',
        ),
        (
            'Action: calculator\nAction Input: ["6*7"]',
            "Action Input must be one JSON object, not an array",
        ),
        (
            "Action: calculator\nAction Input: 6*7",
            "Action Input must be one JSON object, not '6*7'",
        ),
    ],
)
def test_arguments_that_break_the_schema_are_invalid(
    action: str, problem: str, specs: list[ReActTool]
) -> None:
    name, _, error = one_invalid(action, specs)

    assert name in {"calculator", "get_weather"}
    assert error.startswith(f"{problem}. Expected: Action: {name}\nAction Input: {{")


def test_an_action_without_input_is_invalid(specs: list[ReActTool]) -> None:
    name, _, error = one_invalid("Thought: compute\nAction: calculator", specs)

    assert name == "calculator"
    assert error == f"'Action: calculator' has no 'Action Input:' line after it. {FORMAT_HINT}"


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "the reply is empty"),
        ("Thought: I should use the calculator", "the reply has a Thought but neither"),
        (f"{GOOD_ACTION}\nFinal Answer: 42", "the reply has both an Action and a Final Answer"),
        ("Final Answer:", "the Final Answer is empty"),
        ('calculator({"expression": "6*7"})', "the reply looks like a tool call"),
        ('{"name": "calculator", "arguments": {"expression": "6*7"}}', "the reply looks like"),
        ("I will now use Action: calculator with 6*7", "the reply looks like a tool call"),
        ('<tool_call>{"name": "calculator"}</tool_call>', "the reply looks like a tool call"),
    ],
)
def test_replies_in_the_wrong_format_get_a_correction(
    text: str, problem: str, specs: list[ReActTool]
) -> None:
    name, raw, error = one_invalid(text, specs)

    assert name is None
    assert raw == text.strip()
    assert error.startswith(problem)
    assert error.endswith(FORMAT_HINT)


def test_plain_prose_is_the_final_answer(specs: list[ReActTool]) -> None:
    text = "6 times 7 is 42. The calculator (a tool) was not needed."

    parsed = parse_react(text, specs)

    assert parsed.final_answer == text
    assert parsed.invalid == ()


def test_invalid_calls_keep_the_error_for_the_tools_node(specs: list[ReActTool]) -> None:
    message = parse_react(MALFORMED, specs).to_message(salt="s")

    [bad] = message.invalid_tool_calls
    assert message.tool_calls == []
    assert bad["type"] == "invalid_tool_call"
    assert (bad["name"], bad["args"]) == ("calculator", "{oops")
    assert bad["id"].startswith("react_")
    assert bad["error"].startswith("Action Input is not valid JSON")


# --- the model: prompt, conversation, stop sequence, metadata ------------------------------------


def test_bind_tools_remembers_the_tools_without_binding_the_inner_model(
    tools: list[BaseTool],
) -> None:
    inner = ScriptedChatModel()
    model = wrap_react(inner)

    bound = model.bind_tools(tools)

    assert isinstance(bound, ReActChatModel)
    assert [t.name for t in bound.tools] == TOOL_NAMES
    assert model.tools == ()
    assert bound.inner is inner
    assert inner.bound == []


def test_system_prompt_merges_with_the_existing_one_and_lists_every_tool_schema(
    tools: list[BaseTool],
) -> None:
    inner = ScriptedChatModel(script=["Final Answer: hi"])

    wrap_react(inner).bind_tools(tools).invoke([SystemMessage(PROMPT), HumanMessage("hi")])

    [[system, human]] = inner.calls
    assert isinstance(system, SystemMessage)
    assert (human.type, human.content) == ("human", "hi")
    prompt = str(system.content)
    assert prompt.startswith(f"{PROMPT}\n\nYou can use these tools:\n\n")
    for tool in tools:
        expected = tool.tool_call_schema.model_json_schema()
        head = f"- {tool.name}: {tool.description}\n  arguments (JSON schema): "
        assert head in prompt
        shown = json.loads(prompt.split(head, 1)[1].split("\n", 1)[0])
        assert shown.get("required", []) == expected.get("required", [])
        assert shown["properties"].keys() == expected["properties"].keys()
        for name, spec in expected["properties"].items():
            for key in ("type", "description", "enum", "default"):
                assert shown["properties"][name].get(key) == spec.get(key), (tool.name, name)
    assert "Action Input: <the arguments as one JSON object" in prompt
    assert "Final Answer: <your answer to the user>" in prompt


def test_without_tools_the_prompt_asks_for_a_final_answer_only() -> None:
    inner = ScriptedChatModel(script=[MALFORMED])

    reply = wrap_react(inner).invoke([HumanMessage("hi")])

    assert inner.calls[0][0] == SystemMessage(react_system_prompt([]))
    assert "No tools are available in this step" in str(inner.calls[0][0].content)
    [bad] = reply.invalid_tool_calls
    assert "there is no tool named 'calculator'. No tools are available" in bad["error"]


def test_tool_calls_and_results_are_sent_as_action_and_observation_text(
    tools: list[BaseTool],
) -> None:
    inner = ScriptedChatModel(script=["Final Answer: you are welcome"])
    conversation = [
        SystemMessage(PROMPT),
        HumanMessage("6*7 and the weather in Paris?"),
        AIMessage(
            "use tools",
            tool_calls=[
                call("calculator", {"expression": "6*7"}, "c1"),
                call("get_weather", {"city": "Paris"}, "c2"),
            ],
        ),
        ToolMessage("42", tool_call_id="c1", name="calculator"),
        ToolMessage("unknown city", tool_call_id="c2", name="get_weather", status="error"),
        AIMessage(
            "",
            invalid_tool_calls=[invalid_call("calculator", "{oops", "c3")],
        ),
        ToolMessage("could not be parsed", tool_call_id="c3", name="calculator", status="error"),
        AIMessage(
            "",
            invalid_tool_calls=[invalid_call(None, "calculator(6*7)", "c4")],
        ),
        ToolMessage("wrong format", tool_call_id="c4", name="unknown", status="error"),
        AIMessage("42; no weather for Paris."),
        HumanMessage("thanks"),
    ]

    reply = wrap_react(inner).bind_tools(tools).invoke(conversation)

    assert reply.content == "you are welcome"
    [sent] = inner.calls
    assert [(m.type, m.content) for m in sent[1:]] == [
        ("human", "6*7 and the weather in Paris?"),
        (
            "ai",
            "Thought: use tools\n"
            'Action: calculator\nAction Input: {"expression": "6*7"}\n'
            'Action: get_weather\nAction Input: {"city": "Paris"}',
        ),
        (
            "human",
            "Observation (calculator): 42\nObservation (get_weather, error): unknown city",
        ),
        ("ai", "Action: calculator\nAction Input: {oops"),
        ("human", "Observation (error): could not be parsed"),
        ("ai", "calculator(6*7)"),
        ("human", "Observation (error): wrong format"),
        ("ai", "Final Answer: 42; no weather for Paris."),
        ("human", "thanks"),
    ]
    assert [type(m) for m in sent] == [SystemMessage, *[type(m) for m in sent[1:]]]
    assert not any(isinstance(m, ToolMessage) for m in sent)
    assert all(not getattr(m, "tool_calls", None) for m in sent)


def test_a_new_message_after_tool_results_is_merged_so_roles_alternate(
    tools: list[BaseTool],
) -> None:
    inner = ScriptedChatModel(script=["Final Answer: ok"])
    conversation = [
        HumanMessage("6*7?"),
        AIMessage("", tool_calls=[call("calculator", {"expression": "6*7"}, "c1")]),
        ToolMessage("not run: cancelled", tool_call_id="c1", name="calculator", status="error"),
        HumanMessage("never mind"),
    ]

    wrap_react(inner).bind_tools(tools).invoke(conversation)

    assert [(m.type, m.content) for m in inner.calls[0][1:]] == [
        ("human", "6*7?"),
        ("ai", 'Action: calculator\nAction Input: {"expression": "6*7"}'),
        ("human", "Observation (error): not run: cancelled\n\nnever mind"),
    ]


def test_the_inner_model_gets_the_observation_stop_sequence(tools: list[BaseTool]) -> None:
    inner = StopRecordingModel(script=["Final Answer: 42"])

    wrap_react(inner).bind_tools(tools).invoke([HumanMessage("6*7?")], stop=["\nUser:"])

    assert inner.stops == [[OBSERVATION_STOP, "\nUser:"]]


def test_usage_and_response_metadata_of_the_inner_reply_are_kept(tools: list[BaseTool]) -> None:
    usage = {"input_tokens": 120, "output_tokens": 17, "total_tokens": 137}
    metadata = {"finish_reason": "stop", "model_name": "local-llm"}
    inner = ScriptedChatModel(
        script=[
            AIMessage(GOOD_ACTION, usage_metadata=usage, response_metadata=metadata),
            AIMessage("Final Answer: 42", usage_metadata=usage, response_metadata=metadata),
        ]
    )
    model = wrap_react(inner).bind_tools(tools)

    action = model.invoke([HumanMessage("6*7?")])
    answer = model.invoke([HumanMessage("6*7?")])

    for reply in (action, answer):
        assert reply.usage_metadata == usage
        assert {k: reply.response_metadata.get(k) for k in metadata} == metadata
    assert action.tool_calls[0]["args"] == {"expression": "6*7"}
    assert answer.content == "42"


# --- whole turns through the graph ---------------------------------------------------------------


def run_turn(model: ReActChatModel, tools: list[BaseTool], **limits: Any) -> tuple[dict, list]:
    """Stream one turn as the CLI does; "messages" mode attaches a streaming callback handler."""
    ctx = AgentContext(
        model=model, tools=tools, system_prompt=PROMPT, sleep=lambda s: None, **limits
    )
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}, "recursion_limit": recursion_limit(ctx)}
    events = list(
        graph.stream(
            turn_input(HumanMessage("what is 6*7", id="h1"), 1),
            config,
            context=ctx,
            stream_mode=["updates", "custom", "messages"],
        )
    )
    return graph.get_state(config).values, events


def nodes(events: list) -> list[str]:
    return [  # an empty update changed nothing: not a step of the path
        node for mode, data in events if mode == "updates" for node, u in data.items() if u
    ]


def custom(events: list, kind: str) -> list[dict]:
    return [data for mode, data in events if mode == "custom" and data["type"] == kind]


def test_graph_runs_the_tool_a_react_reply_asks_for_then_answers(
    tools: list[BaseTool],
) -> None:
    inner = ScriptedChatModel(script=[GOOD_ACTION, "Final Answer: 42"])
    ctx = AgentContext(model=wrap_react(inner), tools=tools, sleep=lambda s: None)
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}

    values = graph.invoke(turn_input(HumanMessage("what is 6*7", id="h1"), 1), config, context=ctx)

    _, request, result, answer = values["messages"]
    assert values["status"] == "answered"
    assert request.tool_calls[0]["name"] == "calculator"
    assert request.tool_calls[0]["args"] == {"expression": "6*7"}
    assert request.content == "use calculator"
    assert isinstance(result, ToolMessage)
    assert (result.content, result.status) == ("42", "success")
    assert result.tool_call_id == request.tool_calls[0]["id"]
    assert (type(answer), answer.content) == (AIMessage, "42")
    second = inner.calls[1]
    assert [(m.type, m.content) for m in second[1:]] == [
        ("human", "what is 6*7"),
        ("ai", GOOD_ACTION),
        ("human", "Observation: 42"),
    ]
    inner.assert_done()


def test_graph_corrects_an_unparseable_reply_through_the_retry_path(
    tools: list[BaseTool],
) -> None:
    inner = ScriptedChatModel(script=[MALFORMED, GOOD_ACTION, "Final Answer: 42"])

    values, events = run_turn(wrap_react(inner), tools)

    assert nodes(events) == ["agent", "tools", "retry", "agent", "tools", "agent"]
    [retry] = custom(events, "retry")
    assert (retry["kind"], retry["attempt"], retry["wait"]) == ("tool", 1, 0.0)
    _, bad_request, error, _, result, answer = values["messages"]
    [bad] = bad_request.invalid_tool_calls
    assert (error.status, error.tool_call_id, error.name) == ("error", bad["id"], "calculator")
    assert "Action Input is not valid JSON" in error.content
    assert 'Action Input: {"expression": "<expression>"}' in error.content
    assert (result.content, result.status) == ("42", "success")
    assert (answer.content, values["status"], values["retry_count"]) == ("42", "answered", 0)
    corrected = inner.calls[1]
    assert [(m.type, m.content) for m in corrected[2:]] == [
        ("ai", MALFORMED),
        ("human", f"Observation (error): {error.content}"),
    ]
    inner.assert_done()


def test_graph_gives_up_after_the_retry_budget_when_replies_stay_malformed(
    tools: list[BaseTool],
) -> None:
    inner = ScriptedChatModel(script=[MALFORMED, MALFORMED, MALFORMED])

    values, events = run_turn(wrap_react(inner), tools, max_retries=2)

    step = ["agent", "tools", "retry"]
    assert nodes(events) == [*step, *step, "agent", "tools", "failure_handler"]
    assert [e["attempt"] for e in custom(events, "retry")] == [1, 2]
    assert values["status"] == "failed"
    assert values["last_error"]["kind"] == "tool"
    final = values["messages"][-1]
    assert final.content.startswith("The model's replies stayed malformed (neither a readable")
    assert "after 3 attempts (retry budget 2)" in final.content
    assert "Action Input is not valid JSON" in final.content  # the real cause, named
    assert "try a larger model, or the other --tool-protocol" in final.content
    requests = [m for m in values["messages"] if isinstance(m, AIMessage) and m.invalid_tool_calls]
    ids = [m.invalid_tool_calls[0]["id"] for m in requests]
    answered = [m.tool_call_id for m in values["messages"] if isinstance(m, ToolMessage)]
    assert len(set(ids)) == 3
    assert answered == ids
    inner.assert_done()


def test_graph_streams_the_answer_not_the_inner_protocol_text(tools: list[BaseTool]) -> None:
    inner = GenericFakeChatModel(messages=iter([GOOD_ACTION, "Final Answer: It is 42."]))

    values, events = run_turn(wrap_react(inner), tools)

    streamed = [data for mode, data in events if mode == "messages"]
    chunks = [c for c, meta in streamed if isinstance(c, AIMessageChunk)]
    assert {meta["langgraph_node"] for _, meta in streamed} <= {"agent", "tools"}
    answer = values["messages"][-1]
    assert "".join(str(c.content) for c in chunks) == "use calculatorIt is 42."
    assert {c.id for c in chunks if "42" in str(c.content)} == {answer.id}
    assert answer.content == "It is 42."
    assert values["status"] == "answered"


# --- a weak model that reasons but never acts nor answers ------------------------------------------

THINKING = "Thought: 6 times 7 is 42, I am quite sure of it."


def test_a_reply_that_only_thinks_is_the_answer_after_the_parse_retries(
    tools: list[BaseTool],
) -> None:
    inner = ScriptedChatModel(script=[THINKING, THINKING, THINKING])

    values, events = run_turn(wrap_react(inner), tools)

    step = ["agent", "tools", "retry"]
    assert nodes(events) == [*step, *step, "agent"]
    answer = values["messages"][-1]
    assert (values["status"], answer.content) == (
        "answered",
        "6 times 7 is 42, I am quite sure of it.",
    )
    assert answer.response_metadata[UNPARSED] is True
    assert (answer.tool_calls, answer.invalid_tool_calls) == ([], [])
    corrections = [m for m in values["messages"] if isinstance(m, ToolMessage)]
    assert len(corrections) == 2
    assert all("neither an Action nor a Final Answer" in m.content for m in corrections)
    inner.assert_done()


def test_a_reply_that_only_thinks_is_corrected_first_and_a_later_action_runs(
    tools: list[BaseTool],
) -> None:
    inner = ScriptedChatModel(script=[THINKING, GOOD_ACTION, THINKING, "Final Answer: 42"])

    values, _ = run_turn(wrap_react(inner), tools)

    assert values["messages"][-1].content == "42"
    assert not any(
        m.response_metadata.get(UNPARSED) for m in values["messages"] if isinstance(m, AIMessage)
    )
    inner.assert_done()


def test_an_unparsed_answer_is_shown_with_a_notice() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = ConsoleRenderer(Console(file=out, width=100), Console(file=err, width=100))
    reply = AIMessage("It is 42.", id="a1", response_metadata={UNPARSED: True})

    renderer.emit(NodeUpdate("agent", {"messages": [reply]}))

    assert out.getvalue() == "It is 42.\n"
    assert "shown as the answer, as written" in " ".join(err.getvalue().split())
