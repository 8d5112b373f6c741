"""The embedded `offline` model on its own (tools, determinism, streaming) and in the real graph."""

from __future__ import annotations

import functools
import json
import operator
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from app.models.offline import OfflineChatModel
from graphs.react.graph import build_graph
from graphs.state import AgentContext, turn_input
from tests.expected import (
    assert_names_the_colder_city,
    assert_names_the_warmer_city,
    chinese_comparison,
)
from tools import default_tools
from tools.weather import forecast as weather_for

pytestmark = pytest.mark.dated  # reruns on other pinned days: tests/test_pinned_dates.py

CJK = re.compile(r"[\u4e00-\u9fff]")
NOTES = "hello from the notes file\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text(NOTES, encoding="utf-8")
    return workspace


@pytest.fixture
def tools(ws: Path) -> list[BaseTool]:
    return default_tools(ws)


def calls_of(message: AIMessage) -> list[tuple[str, dict]]:
    return [(c["name"], c["args"]) for c in message.tool_calls]


# --- the model alone -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("what is 6 times 7", [("calculator", {"expression": "6 * 7"})]),
        ("3 加 5 乘以 2", [("calculator", {"expression": "3 + 5 * 2"})]),
        ("(2+3)*4", [("calculator", {"expression": "(2+3)*4"})]),
        ("10 divided by 4", [("calculator", {"expression": "10 / 4"})]),
        (
            "weather in Paris and London tomorrow in fahrenheit",
            [
                ("get_weather", {"city": "Paris", "unit": "fahrenheit", "date": "tomorrow"}),
                ("get_weather", {"city": "London", "unit": "fahrenheit", "date": "tomorrow"}),
            ],
        ),
        (
            "北京和上海明天的天气",
            [
                ("get_weather", {"city": "Beijing", "unit": "celsius", "date": "tomorrow"}),
                ("get_weather", {"city": "Shanghai", "unit": "celsius", "date": "tomorrow"}),
            ],
        ),
        ("what time is it?", [("current_time", {})]),
        ("现在几点？", [("current_time", {})]),
        ("list files", [("list_files", {"path": "."})]),
        ("read notes.txt", [("read_file", {"path": "notes.txt"})]),
        ("读取 notes.txt", [("read_file", {"path": "notes.txt"})]),
        (
            "save 'hello world' to hello.txt",
            [("write_file", {"path": "hello.txt", "content": "hello world"})],
        ),
        (
            "write hello world to greeting.txt",
            [("write_file", {"path": "greeting.txt", "content": "hello world"})],
        ),
    ],
)
def test_invoke_plans_the_expected_tool_calls(
    tools: list[BaseTool], text: str, expected: list[tuple[str, dict]]
) -> None:
    reply = OfflineChatModel().bind_tools(tools).invoke([HumanMessage(text)])
    assert isinstance(reply, AIMessage)
    assert reply.content == ""
    assert calls_of(reply) == expected
    assert all(c["id"] and c["type"] == "tool_call" for c in reply.tool_calls)


@pytest.mark.parametrize(
    "text",
    ["weather in Paris and London tomorrow in fahrenheit", "3 加 5 乘以 2", "tell me a joke"],
)
def test_the_same_input_gives_the_same_output_including_ids(
    tools: list[BaseTool], text: str
) -> None:
    first = OfflineChatModel().bind_tools(tools).invoke([HumanMessage(text)])
    second = OfflineChatModel().bind_tools(tools).invoke([HumanMessage(text)])
    assert first == second
    assert first.id and first.id == second.id
    assert [c["id"] for c in first.tool_calls] == [c["id"] for c in second.tool_calls]


def test_a_whole_run_is_deterministic(tmp_path: Path) -> None:
    text = "Look up the weather in Paris and London, compute the difference and save it to r.txt"
    # Separate workspaces: the second write would otherwise report "replaced", not "created".
    first_tools, second_tools = default_tools(tmp_path / "a"), default_tools(tmp_path / "b")
    first = drive(OfflineChatModel().bind_tools(first_tools), first_tools, text)
    second = drive(OfflineChatModel().bind_tools(second_tools), second_tools, text)
    ai_first = [m for m in first if isinstance(m, AIMessage)]
    ai_second = [m for m in second if isinstance(m, AIMessage)]
    assert ai_first == ai_second
    assert len({m.id for m in ai_first}) == len(ai_first) == 4


@pytest.mark.parametrize(
    "text",
    [
        "what is 6 times 7",
        "weather in Paris and London tomorrow",
        "list files",
        "what time is it?",
        "北京和上海明天的天气，温差多少？",
    ],
)
def test_an_unbound_model_never_emits_tool_calls(text: str) -> None:
    model = OfflineChatModel()
    reply = model.invoke([HumanMessage(text)])
    assert not reply.tool_calls
    assert str(reply.content).strip()
    merged = functools.reduce(operator.add, model.stream([HumanMessage(text)]))
    assert not merged.tool_calls and not merged.tool_call_chunks


def test_a_model_bound_to_a_subset_never_calls_an_unbound_tool(tools: list[BaseTool]) -> None:
    weather_only = [t for t in tools if t.name == "get_weather"]
    model = OfflineChatModel().bind_tools(weather_only)
    text = "what is 6 times 7, the weather in Paris and London, and save it all to x.txt"
    messages = drive(model, weather_only, text)
    made = [name for m in messages if isinstance(m, AIMessage) for name, _ in calls_of(m)]
    assert made == ["get_weather", "get_weather"]
    assert "Paris" in str(messages[-1].content)
    assert not any(m.tool_calls for m in messages[-1:] if isinstance(m, AIMessage))


def test_a_model_bound_to_a_subset_answers_without_calling_the_missing_tool(
    tools: list[BaseTool],
) -> None:
    clock_only = [t for t in tools if t.name == "current_time"]
    reply = OfflineChatModel().bind_tools(clock_only).invoke([HumanMessage("what is 6 times 7")])
    assert not reply.tool_calls
    assert "not available" in str(reply.content)


@pytest.mark.parametrize(
    "text",
    [
        "weather in Paris and London tomorrow in fahrenheit",
        "北京和上海明天的天气",
        "save 'hello world' to hello.txt",
        "what time is it?",
    ],
)
def test_streamed_tool_call_chunks_merge_into_the_invoked_tool_calls(
    tools: list[BaseTool], text: str
) -> None:
    model = OfflineChatModel().bind_tools(tools)
    reply = model.invoke([HumanMessage(text)])
    chunks = list(model.stream([HumanMessage(text)]))
    assert sum(1 for c in chunks if c.tool_call_chunks) > len(reply.tool_calls)
    merged = functools.reduce(operator.add, chunks)
    assert merged.tool_calls == reply.tool_calls
    assert merged.id == reply.id
    assert merged.content == ""


@pytest.mark.parametrize("text", ["tell me a joke", "给我讲个笑话", "my name is Ada", "我叫小明"])
def test_streamed_tokens_concatenate_to_the_invoked_content(text: str) -> None:
    model = OfflineChatModel()
    reply = model.invoke([HumanMessage(text)])
    chunks = list(model.stream([HumanMessage(text)]))
    assert len(chunks) > 1
    assert all(not c.tool_call_chunks for c in chunks)
    assert "".join(str(c.content) for c in chunks) == reply.content


def test_the_streamed_final_answer_after_tool_results_matches_invoke(tools: list[BaseTool]) -> None:
    model = OfflineChatModel().bind_tools(tools)
    history = drive(model, tools, "北京和上海明天的天气怎么样？温差多少？")[:-1]
    reply = model.invoke(history)
    streamed = "".join(str(c.content) for c in model.stream(history))
    assert not reply.tool_calls
    assert streamed == reply.content
    beijing, shanghai = (weather_for(city, date="tomorrow") for city in ("Beijing", "Shanghai"))
    assert chinese_comparison(beijing, shanghai) in streamed


def drive(model: OfflineChatModel, tools: list[BaseTool], text: str) -> list[BaseMessage]:
    """A minimal agent loop without the graph: run every requested call, feed the results back."""
    by_name = {t.name: t for t in tools}
    messages: list[BaseMessage] = [HumanMessage(text)]
    for _ in range(8):
        reply = model.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return messages
        for call in reply.tool_calls:
            content = by_name[call["name"]].invoke(call["args"])
            messages.append(ToolMessage(content, tool_call_id=call["id"], name=call["name"]))
    raise AssertionError("the model never answered")


# --- end to end through the graph ------------------------------------------------------------


@dataclass
class Turn:
    """The messages of one turn, after the user's message."""

    messages: list[BaseMessage]
    status: str | None

    @property
    def steps(self) -> list[list[tuple[str, dict]]]:
        """Tool calls per AI message, in order: one inner list per model step."""
        return [calls_of(m) for m in self.messages if isinstance(m, AIMessage) and m.tool_calls]

    @property
    def tool_names(self) -> list[list[str]]:
        return [[name for name, _ in step] for step in self.steps]

    @property
    def answers(self) -> list[str]:
        return [
            str(m.content) for m in self.messages if isinstance(m, AIMessage) and not m.tool_calls
        ]

    @property
    def answer(self) -> str:
        return str(self.messages[-1].content)

    def results(self, name: str) -> list[ToolMessage]:
        return [m for m in self.messages if isinstance(m, ToolMessage) and m.name == name]

    def forecasts(self) -> list[dict]:
        return [
            json.loads(str(m.content)) for m in self.results("get_weather") if m.status != "error"
        ]


class Chat:
    """One thread of the real graph with the offline model, turn by turn."""

    def __init__(self, workspace: Path, thread_id: str = "t1") -> None:
        self.graph = build_graph(InMemorySaver())
        self.context = AgentContext(
            model=OfflineChatModel(), tools=default_tools(workspace), sleep=lambda s: None
        )
        self.config = {"configurable": {"thread_id": thread_id}}
        self.turn = 0

    def ask(self, text: str) -> Turn:
        self.turn += 1
        message = HumanMessage(text, id=f"human-{self.turn}")
        state = self.graph.invoke(turn_input(message, self.turn), self.config, context=self.context)
        messages = state["messages"]
        start = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        assert messages[start].content == text
        return Turn(messages[start + 1 :], state.get("status"))


@pytest.fixture
def chat(ws: Path) -> Chat:
    return Chat(ws)


def assert_language(text: str, chinese: bool) -> None:
    assert bool(CJK.search(text)) is chinese, text


@pytest.mark.parametrize(
    ("text", "expression", "result", "chinese"),
    [
        ("what is 6 times 7", "6 * 7", "42", False),
        ("What's 12 plus 30?", "12 + 30", "42", False),
        ("(2+3)*4", "(2+3)*4", "20", False),
        ("10 divided by 4", "10 / 4", "2.5", False),
        ("what is 2 to the power of 10", "2 ** 10", "1024", False),
        ("3 加 5 乘以 2", "3 + 5 * 2", "13", True),
        ("计算 (2+3)*4", "(2+3)*4", "20", True),
        ("15 减去 4 等于多少", "15 - 4", "11", True),
        ("100 除以 8 是多少？", "100 / 8", "12.5", True),
    ],
)
def test_arithmetic_calls_the_calculator(
    chat: Chat, text: str, expression: str, result: str, chinese: bool
) -> None:
    turn = chat.ask(text)
    assert turn.steps == [[("calculator", {"expression": expression})]]
    assert [str(m.content) for m in turn.results("calculator")] == [result]
    assert result in turn.answer
    assert turn.status == "answered"
    assert_language(turn.answer, chinese)


@pytest.mark.parametrize(
    ("text", "cities", "unit", "date", "chinese"),
    [
        (
            "weather in Paris and London tomorrow in fahrenheit",
            ["Paris", "London"],
            "fahrenheit",
            "tomorrow",
            False,
        ),
        (
            "How hot is it in Tokyo and Sydney today?",
            ["Tokyo", "Sydney"],
            "celsius",
            "today",
            False,
        ),
        ("北京和上海明天的天气", ["Beijing", "Shanghai"], "celsius", "tomorrow", True),
        ("东京和首尔今天天气怎么样？用华氏度", ["Tokyo", "Seoul"], "fahrenheit", "today", True),
    ],
)
def test_weather_for_two_cities_is_one_message_with_two_calls(
    chat: Chat, text: str, cities: list[str], unit: str, date: str, chinese: bool
) -> None:
    turn = chat.ask(text)
    assert turn.steps == [
        [("get_weather", {"city": city, "unit": unit, "date": date}) for city in cities]
    ]
    symbol = "°F" if unit == "fahrenheit" else "°C"
    for forecast in turn.forecasts():
        assert (forecast["city_zh"] if chinese else forecast["city"]) in turn.answer
        assert f"{forecast['high']}{symbol}" in turn.answer
    assert len(turn.answers) == 1
    assert_language(turn.answer, chinese)


@pytest.mark.parametrize(
    ("text", "chinese"),
    [
        ("How hot is it in Paris and Berlin today, and which is warmer?", False),
        ("Paris vs London weather, what's the difference?", False),
        ("北京和上海明天的天气怎么样？温差多少？", True),
        ("巴黎和伦敦的天气，哪个更热？", True),
    ],
)
def test_the_difference_in_the_same_turn_uses_the_two_highs(
    chat: Chat, text: str, chinese: bool
) -> None:
    turn = chat.ask(text)
    assert turn.tool_names == [["get_weather", "get_weather"], ["calculator"]]
    first, second = turn.forecasts()
    assert turn.steps[1] == [("calculator", {"expression": f"{first['high']} - {second['high']}"})]
    assert_names_the_warmer_city(turn.answer, first, second, chinese)


@pytest.mark.parametrize(
    ("lookup", "follow_up", "chinese"),
    [
        ("weather in Paris and London", "which is warmer?", False),
        ("weather in Paris and London", "what's the difference?", False),
        ("What's the weather in Tokyo and Singapore tomorrow?", "Which one is colder?", False),
        ("北京和上海明天的天气", "温差多少？", True),
        ("北京和上海明天的天气", "相差多少度？", True),
        ("巴黎和伦敦的天气", "哪个更暖和？", True),
    ],
)
def test_the_difference_in_a_later_turn_uses_the_earlier_highs(
    chat: Chat, lookup: str, follow_up: str, chinese: bool
) -> None:
    first, second = chat.ask(lookup).forecasts()
    turn = chat.ask(follow_up)
    assert turn.steps == [[("calculator", {"expression": f"{first['high']} - {second['high']}"})]]
    if "colder" in follow_up:
        assert_names_the_colder_city(turn.answer, first, second)
    else:
        assert_names_the_warmer_city(turn.answer, first, second, chinese)
    assert_language(turn.answer, chinese)


def test_a_bare_difference_question_without_forecasts_is_not_a_comparison(chat: Chat) -> None:
    turn = chat.ask("what's the difference between a list and a tuple?")
    assert turn.steps == []
    assert "OPENAI_API_KEY" in turn.answer


@pytest.mark.parametrize(
    ("text", "path", "chinese"),
    [
        (
            "Look up the weather in Paris and London, compute the difference and write it to a "
            "file called report.txt",
            "report.txt",
            False,
        ),
        (
            "Get the weather for Tokyo and Sydney, work out which is warmer, and save the results "
            "to tokyo_sydney.md",
            "tokyo_sydney.md",
            False,
        ),
        ("查一下北京和上海的天气，算出温差，然后写入文件 温差.txt", "温差.txt", True),
        ("查询北京和上海明天的天气，计算温差，并把结果保存到 report_zh.txt", "report_zh.txt", True),
    ],
)
def test_a_multi_step_request_runs_in_order_and_answers_once(
    chat: Chat, ws: Path, text: str, path: str, chinese: bool
) -> None:
    turn = chat.ask(text)
    assert turn.tool_names == [["get_weather", "get_weather"], ["calculator"], ["write_file"]]
    assert turn.status == "answered"
    assert len(turn.answers) == 1
    first, second = turn.forecasts()
    difference = str(turn.results("calculator")[0].content)
    assert difference == str(first["high"] - second["high"])

    saved = (ws / path).read_text(encoding="utf-8")
    assert turn.steps[2] == [("write_file", {"path": path, "content": saved})]
    for forecast in (first, second):
        name = forecast["city_zh"] if chinese else forecast["city"]
        for text_ in (saved, turn.answer):
            assert name in text_ and f"{forecast['high']}°C" in text_
    for text_ in (saved, turn.answer):
        assert_names_the_warmer_city(text_, first, second, chinese)
    assert path in turn.answer
    assert_language(turn.answer, chinese)


@pytest.mark.parametrize(
    ("text", "chinese"),
    [
        ("read notes.txt", False),
        ("show me the file notes.txt", False),
        ("what's in notes.txt?", False),
        ("读取 notes.txt", True),
        ("notes.txt 里写了什么", True),
    ],
)
def test_reading_a_file(chat: Chat, text: str, chinese: bool) -> None:
    turn = chat.ask(text)
    assert turn.steps == [[("read_file", {"path": "notes.txt"})]]
    assert NOTES.strip() in turn.answer
    assert ("notes.txt 的内容" in turn.answer) is chinese


@pytest.mark.parametrize(
    ("text", "chinese"),
    [
        ("list files", False),
        ("which files do I have?", False),
        ("列出文件", True),
        ("显示工作区的文件", True),
    ],
)
def test_listing_files(chat: Chat, ws: Path, text: str, chinese: bool) -> None:
    (ws / "data.csv").write_text("a,b\n", encoding="utf-8")
    turn = chat.ask(text)
    assert turn.steps == [[("list_files", {"path": "."})]]
    assert "notes.txt" in turn.answer and "data.csv" in turn.answer
    assert_language(turn.answer.split("\n")[0], chinese)


@pytest.mark.parametrize(
    ("text", "path", "content"),
    [
        ("save 'hello world' to hello.txt", "hello.txt", "hello world"),
        ("write hello world to greeting.txt", "greeting.txt", "hello world"),
        ('write "some text" to a file called t.txt', "t.txt", "some text"),
        ("把“你好世界”写入 hi.txt", "hi.txt", "你好世界"),
        ("把你好世界写入 hi2.txt", "hi2.txt", "你好世界"),
    ],
)
def test_writing_text_then_reading_it_back(
    chat: Chat, ws: Path, text: str, path: str, content: str
) -> None:
    turn = chat.ask(text)
    assert turn.steps == [[("write_file", {"path": path, "content": content})]]
    assert (ws / path).read_text(encoding="utf-8") == content
    assert path in turn.answer
    again = chat.ask(f"read {path}")
    assert again.steps == [[("read_file", {"path": path})]]
    assert content in again.answer


def test_saving_the_previous_answer_in_a_later_turn(chat: Chat, ws: Path) -> None:
    (paris,) = chat.ask("weather in Paris").forecasts()
    turn = chat.ask("save that to paris.txt")
    assert turn.tool_names == [["write_file"]]
    saved = (ws / "paris.txt").read_text(encoding="utf-8")
    assert "Paris" in saved and f"{paris['high']}°C" in saved


def test_a_calculation_saved_to_a_file(chat: Chat, ws: Path) -> None:
    turn = chat.ask("calculate 6 times 7 and save the result to calc.txt")
    assert turn.tool_names == [["calculator"], ["write_file"]]
    assert "42" in (ws / "calc.txt").read_text(encoding="utf-8")
    assert "42" in turn.answer and "calc.txt" in turn.answer


@pytest.mark.parametrize(
    ("text", "chinese"),
    [
        ("what time is it?", False),
        ("what's today's date?", False),
        ("现在几点？", True),
        ("今天几号", True),
    ],
)
def test_the_current_time(chat: Chat, text: str, chinese: bool) -> None:
    turn = chat.ask(text)
    assert turn.steps == [[("current_time", {})]]
    now = json.loads(str(turn.results("current_time")[0].content))
    assert now["date"] in turn.answer and now["time"] in turn.answer
    assert_language(turn.answer, chinese)


@pytest.mark.parametrize(
    ("conversation", "acknowledged", "recalled"),
    [
        (["my name is Ada", "what is 6 times 7", "what's my name?"], "Ada", "Your name is Ada"),
        (["Hi, I'm Ada.", "do you remember my name?"], "Ada", "Your name is Ada"),
        (
            [
                "remember the number 42",
                "weather in Paris",
                "what number did I ask you to remember?",
            ],
            "42",
            "42",
        ),
        (["Please remember the number 42.", "what was the number?"], "42", "42"),
        (["我叫小明", "我叫什么？"], "小明", "你叫小明"),
        (["我的名字是小红", "3 加 5 等于多少", "你知道我叫什么吗？"], "小红", "你叫小红"),
        (["记住这个数字：7", "我让你记住的数字是多少？"], "7", "数字是 7"),
        (["记住这个数字：7", "北京的天气", "我让你记住的是什么数字？"], "7", "数字是 7"),
    ],
)
def test_stated_facts_are_acknowledged_and_recalled_later(
    chat: Chat, conversation: list[str], acknowledged: str, recalled: str
) -> None:
    first = chat.ask(conversation[0])
    assert first.steps == []
    assert acknowledged in first.answer
    for text in conversation[1:-1]:
        chat.ask(text)
    last = chat.ask(conversation[-1])
    assert last.steps == []
    assert recalled in last.answer
    assert_language(last.answer, bool(CJK.search(conversation[-1])))


def test_a_question_about_a_fact_never_told_says_so(chat: Chat) -> None:
    assert "haven't told me" in chat.ask("what's my name?").answer
    assert "没有" in chat.ask("我叫什么？").answer


def test_a_question_is_not_stored_as_a_fact(chat: Chat) -> None:
    chat.ask("我叫什么？")
    chat.ask("我叫小明")
    chat.ask("我叫什么？")
    assert "你叫小明" in chat.ask("我叫什么？").answer


def test_an_unknown_city_fails_alone_and_paris_is_still_reported(chat: Chat) -> None:
    turn = chat.ask("What's the weather in Paris and Atlantis, and which is warmer?")
    assert turn.steps == [
        [
            ("get_weather", {"city": "Paris", "unit": "celsius", "date": "today"}),
            ("get_weather", {"city": "Atlantis", "unit": "celsius", "date": "today"}),
        ]
    ]
    assert [m.status for m in turn.results("get_weather")] == ["success", "error"]
    (paris,) = turn.forecasts()
    assert f"Paris on {paris['date']}" in turn.answer and f"high {paris['high']}°C" in turn.answer
    assert "get_weather(Atlantis) failed" in turn.answer
    assert "not in the offline weather dataset" in turn.answer
    assert "couldn't compare" in turn.answer
    assert turn.status == "answered"


def test_a_missing_file_fails_and_the_next_step_still_runs(chat: Chat) -> None:
    turn = chat.ask("read missing.txt, then what is 6 times 7")
    assert turn.tool_names == [["read_file"], ["calculator"]]
    assert "read_file(missing.txt) failed" in turn.answer
    assert "does not exist" in turn.answer
    assert "6 * 7 = 42" in turn.answer
    assert turn.status == "answered"


def test_a_missing_file_in_chinese(chat: Chat) -> None:
    turn = chat.ask("读取 missing.txt")
    assert turn.steps == [[("read_file", {"path": "missing.txt"})]]
    assert "missing.txt" in turn.answer and "失败" in turn.answer


@pytest.mark.parametrize(
    ("text", "chinese", "capability"),
    [
        ("tell me a joke", False, "arithmetic"),
        ("hello, write me a poem", False, "weather"),  # a greeting (tests/test_offline_requests.py)
        ("给我讲个笑话", True, "算术"),
        ("你好，写一首诗", True, "天气"),
    ],
)
def test_anything_else_gets_an_honest_fallback(
    chat: Chat, text: str, chinese: bool, capability: str
) -> None:
    turn = chat.ask(text)
    assert turn.steps == []
    assert capability in turn.answer
    assert "OPENAI_API_KEY" in turn.answer and "--model" in turn.answer
    assert_language(turn.answer.replace("Waypoint", ""), chinese)


def test_the_graph_streams_the_answer_as_tokens(chat: Chat) -> None:
    tokens = [
        str(chunk.content)
        for chunk, _ in chat.graph.stream(
            turn_input(HumanMessage("给我讲个笑话", id="human-1"), 1),
            chat.config,
            context=chat.context,
            stream_mode="messages",
        )
        if chunk.content
    ]
    final = chat.graph.get_state(chat.config).values["messages"][-1]
    assert len(tokens) > 1
    assert "".join(tokens) == final.content


class _SchemaCountingTool(BaseTool):
    """A tool that counts how often its argument model is built (what a bind must not do)."""

    name: str = "counted"
    description: str = "counts schema builds"
    builds: list[str] = Field(default_factory=list)

    @property
    def tool_call_schema(self):  # type: ignore[override]
        self.builds.append(self.name)
        return super().tool_call_schema

    def _run(self, *args: object, **kwargs: object) -> str:
        return ""


def test_binding_tools_names_them_without_building_their_argument_models() -> None:
    # building a pydantic model per tool per model call was a quarter of serve's CPU
    tool = _SchemaCountingTool()
    bound = OfflineChatModel().bind_tools([tool, {"name": "plain", "parameters": {}}])
    assert bound.bound_tools == ("counted", "plain")
    assert tool.builds == []
