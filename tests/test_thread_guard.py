"""The graph's own one-writer rule (graphs/shared/guard.py, issue 29 item 4): two runs on one thread
at once, without Waypoint's lock, never lose a turn silently. Every run either ends in the thread's
linear history or fails with ThreadChangedError, which the client retries on. On Waypoint's real
savers (SQLite and PostgreSQL); the decision rule itself on plain rows."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pickle
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.base import BaseCheckpointSaver

from app.config import load_settings
from app.service.context import make_context
from app.store import open_checkpointer
from graphs.shared.carried_turns import answered_on_thread
from graphs.shared.guard import Step, fork_reason
from graphs.shared.guard_rows import NEWEST, Row, ThreadChangedError
from graphs.shared.guarded_writes import guard_copies
from graphs.shared.messages import notice_message
from graphs.state import AgentContext
from graphs.strategies import STRATEGIES

# --- the rule, on rows (newest first) ------------------------------------------------------------

C = "0005"  # the running step's checkpoint; ids sort by the time they were made


def step(run_id: str | None = None, start: str | None = None) -> Step:
    return Step("t", C, run_id, start)


def row(id: str, parent: str | None, source: str = "loop", run_id: str | None = None) -> Row:
    return Row(id, parent, source, run_id)


RULE_CASES = [
    (
        "nothing else written",
        step(),
        [row(C, "0004"), row("0004", "0003", "input"), row("0003", "0002")],
        None,
    ),
    ("a new thread", step(), [row(C, "0004"), row("0004", None, "input")], None),
    (
        "another run wrote after this step began",
        step(),
        [row("0006", "0001"), row(C, "0004")],
        "0006",
    ),
    (
        "this run started from a head another run had moved",
        step(),
        [row(C, "0004"), row("0004", "0002", "input"), row("0003", "0002")],
        "0004 follows 0002",
    ),
    (
        "with run ids: this run's last step went in after another run's",
        step(run_id="a"),
        [
            row(C, "0003", run_id="a"),
            row("0004", "0002", run_id="b"),
            row("0003", "0002", run_id="a"),
        ],
        f"{C} follows 0003",
    ),
    (
        "resuming a head another run left forked: not this run's link",
        step(),
        [row(C, "0003"), row("0004", "0002"), row("0003", "0002")],
        None,
    ),
    (
        "two runs began the same new thread",
        step(),
        [row(C, "0004"), row("0004", None, "input"), row("0003", None, "input")],
        "0004 follows None",
    ),
    (
        "a replay from an explicit checkpoint (a deliberate branch)",
        step(start="0001"),
        [row(C, "0004"), row("0004", "0001", "fork"), row("0003", "0002")],
        None,
    ),
    (
        "with run ids: a replay's later drive from the head it made (its copy starts the branch)",
        step(run_id="b"),
        [row(C, "0004", run_id="b"), row("0004", "0001", "fork", "b"), row("0003", "0002")],
        None,
    ),
    (
        "nothing stored yet (an engine saving checkpoints behind the run)",
        step(),
        [],
        None,
    ),
    (
        "resuming a head another run branched (a rollback): not this run's link",
        step(),
        [row(C, "0001", "update"), row("0004", "0003")],
        None,
    ),
    (
        "with run ids: another run's links are not this run's to answer for",
        step(run_id="b"),
        [row(C, "0003", run_id="a"), row("0004", "0002", run_id="x"), row("0003", "0002")],
        None,
    ),
    (
        "with run ids: this run's step still being saved (async durability), its input forked",
        step(run_id="b"),
        [row("0004", "0002", "input", "b"), row("0003", "0002", run_id="a"), row("0002", None)],
        "0004 follows 0002",
    ),
]


@pytest.mark.parametrize(
    ("rows", "current", "found"),
    [pytest.param(rows, current, found, id=case) for case, current, rows, found in RULE_CASES],
)
def test_fork_rule(rows: list[Row], current: Step, found: str | None):
    assert len(rows) <= NEWEST
    reason = fork_reason(rows, current)
    assert (reason is None) if found is None else (found in (reason or ""))


def test_the_error_says_what_happened_and_what_to_do():
    error = ThreadChangedError("t-1", "checkpoint 2 was written after 1")
    assert str(error).startswith(
        "thread t-1 was changed by another run while this turn ran; send the message again"
    )
    assert error.thread_id == "t-1"
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


def said(*kinds: str) -> list:
    """Messages by kind: q (a question), a (an answer), t (a tool call), r (a tool result),
    n (Waypoint's notice); ids q0, a1, … by position."""
    make = {
        "q": lambda i: HumanMessage("?", id=f"q{i}"),
        "a": lambda i: AIMessage("!", id=f"a{i}"),
        "t": lambda i: AIMessage("", id=f"t{i}", tool_calls=[{"name": "x", "args": {}, "id": "c"}]),
        "r": lambda i: ToolMessage("1", id=f"r{i}", tool_call_id="c"),
        "n": lambda i: notice_message("stopped", "budget"),
    }
    return [make[kind](i) for i, kind in enumerate(kinds)]


@pytest.mark.parametrize(
    ("head", "answered"),
    [
        (said("q", "t", "r", "a", "q"), True),  # carried on by the next turn, answered
        (said("q", "t", "r", "q", "t"), False),  # carried on, but the answer never came
        (said("q", "t", "r", "n", "q"), False),  # a notice of a spent budget is no answer
        (said("q", "t", "r"), False),  # not answered yet
        (said("q", "a")[:1], False),
    ],
)
def test_a_refused_turn_counts_as_answered_only_with_its_answer_on_the_thread(
    head: list, answered: bool
):
    turn = said("q", "t", "r")  # the refused step's state: its question q0 and its tool call
    assert answered_on_thread(turn, head) is answered
    assert not answered_on_thread(said("r"), head)  # a step without a question of its own


# --- two runs on one thread, Waypoint's react graph on its real savers ---------------------------


def held_calculator(context: AgentContext, before: Callable[[], None]) -> AgentContext:
    """The context with a calculator that calls `before` first (holds a run inside its step)."""
    original = context.tools_by_name["calculator"]

    def calculate(**args: Any) -> Any:
        before()
        return original.invoke(args)

    held: BaseTool = StructuredTool.from_function(
        func=calculate,
        name=original.name,
        description=original.description,
        args_schema=original.args_schema,
    )
    tools = [held if t.name == "calculator" else t for t in context.tools]
    return dataclasses.replace(context, tools=tools)


def question(a: int, b: int) -> dict:
    text = f"what is {a} plus {b}"
    return {"messages": [HumanMessage(text, id=f"q-{uuid.uuid4().hex[:8]}")], "answer": (a, b)}


def kept(graph: Any, config: dict, asked: dict) -> bool:
    """Whether a turn is in the thread's linear history: its question, then its answer."""
    return kept_in(graph.get_state(config).values["messages"], asked)


def kept_in(messages: list, asked: dict) -> bool:
    ids = [m.id for m in messages]
    question_id = asked["messages"][0].id
    if question_id not in ids:
        return False
    a, b = asked["answer"]
    after = messages[ids.index(question_id) + 1 :]
    return any(m.type == "ai" and m.content == f"{a} + {b} = {a + b}" for m in after)


def ask(graph: Any, asked: dict, config: dict, context: AgentContext) -> dict:
    return graph.invoke({"messages": asked["messages"]}, config, context=context, durability="sync")


def test_a_run_held_in_its_step_while_another_ran_a_turn_fails_and_the_other_is_kept(database: str):
    settings = load_settings()
    context = make_context(settings)
    held, released = threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        assert released.wait(timeout=60)

    with open_checkpointer(database) as saver:
        graph = STRATEGIES["react"].build(saver)
        config = {"configurable": {"thread_id": "shared"}}
        first, second = question(2, 2), question(3, 3)
        outcome: dict[str, BaseException | dict] = {}

        def run_first() -> None:
            try:
                outcome["first"] = ask(graph, first, config, held_calculator(context, hold))
            except BaseException as exc:  # the outcome is what the test checks
                outcome["first"] = exc

        runner = threading.Thread(target=run_first)
        runner.start()
        assert held.wait(timeout=60)  # the first run is inside its tools step
        answer = ask(graph, second, config, context)
        released.set()
        runner.join(timeout=60)

        assert answer["messages"][-1].content == "3 + 3 = 6"
        assert isinstance(outcome["first"], ThreadChangedError), outcome["first"]
        assert kept(graph, config, second)
        assert not kept(graph, config, first)


def one_round(graph: Any, config: dict, context: AgentContext, asked: list[dict]) -> list[Any]:
    """Two runs released together by a barrier; each one's result or exception."""
    barrier = threading.Barrier(len(asked))
    results: list[Any] = [None] * len(asked)

    def run(i: int) -> None:
        barrier.wait(timeout=60)
        try:
            results[i] = ask(graph, asked[i], config(i), context)
        except BaseException as exc:  # the outcome is what the test checks
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(asked))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


@pytest.mark.parametrize("run_ids", [False, True], ids=["no run ids", "run ids"])
def test_two_runs_started_together_never_lose_a_turn_silently(database: str, run_ids: bool):
    """Rounds of two runs released by one barrier: each either succeeds and is in the linear
    history, or fails with ThreadChangedError, whichever interleaving the machine gives. With run
    ids, as LangGraph's servers and Aegra run a graph (the checkpoints' metadata carries them)."""
    context = make_context(load_settings())
    thread = {"configurable": {"thread_id": "shared"}}

    def config(_: int) -> dict:
        return {**thread, "metadata": {"run_id": str(uuid.uuid4())}} if run_ids else thread

    outcomes: list[tuple[dict, Any]] = []
    with open_checkpointer(database) as saver:
        graph = STRATEGIES["react"].build(saver)
        for round_ in range(8):
            asked = [question(round_, i) for i in (1, 2)]
            outcomes += zip(asked, one_round(graph, config, context, asked), strict=True)
        for asked, result in outcomes:
            if isinstance(result, BaseException):
                assert isinstance(result, ThreadChangedError), result
            else:
                assert kept(graph, thread, asked), asked
    refused = sum(isinstance(result, BaseException) for _, result in outcomes)
    print(f"{refused} of {len(outcomes)} runs refused")


def test_four_clients_ten_turns_on_one_thread_lose_none(database: str):
    """Issue 29's workload, in one process without Waypoint's lock: four clients send ten turns
    each to one thread, sending a turn again after a short random pause (the retry policy
    docs/notes/graphguard.md gives clients) while it is refused. All 40 end in the linear history
    (with no guard, 30 of 40 were lost here)."""
    with open_checkpointer(database) as saver:
        assert four_clients_ten_turns([saver, saver]) == []


def test_four_clients_through_two_savers_on_postgres_lose_none(pg_url: str):
    """The same through two savers, each with its own connection, as two server processes on one
    database would be (no lock of one process covers the other's runs)."""
    with open_checkpointer(pg_url) as first, open_checkpointer(pg_url) as second:
        assert four_clients_ten_turns([first, second]) == []


def four_clients_ten_turns(savers: list[BaseCheckpointSaver]) -> list[dict]:
    """Runs the workload, client n through savers[n % 2]; returns the answered turns the thread
    lost (not in its linear history)."""
    context = make_context(load_settings())
    config = {"configurable": {"thread_id": "shared"}}
    graphs = [STRATEGIES["react"].build(saver) for saver in savers]
    answered: list[dict] = []
    start = threading.Barrier(4)

    def client(number: int) -> None:
        pause = random.Random(number)  # seeded: the same pauses every run
        start.wait(timeout=60)
        for turn in range(10):
            graph = graphs[number % 2]
            answered.append(send_until_answered(graph, config, context, 100 * number + turn, pause))

    clients = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(timeout=300)
    assert len(answered) == 40
    return [asked for asked in answered if not kept(graphs[0], config, asked)]


def send_until_answered(
    graph: Any, config: dict, context: AgentContext, number: int, pause: random.Random
) -> dict:
    """Send a turn, and again (as a new message) while it is refused, as a client would."""
    for attempt in range(500):
        asked = question(number, attempt)
        try:
            ask(graph, asked, config, context)
        except ThreadChangedError:
            time.sleep(pause.uniform(0, 0.02))  # a retry policy, not an ordering of the runs
            continue
        return asked
    raise AssertionError(f"turn {number} refused 500 times")


@pytest.mark.parametrize("pooled", [False, True], ids=["one connection", "a pool"])
def test_async_runs_on_langgraphs_async_postgres_saver_lose_none(pg_url: str, pooled: bool):
    """As Aegra runs the graphs: `ainvoke` (sync nodes in worker threads, checkpoints stored by
    `aput` on the event loop) with LangGraph's AsyncPostgresSaver, on one connection or a pool;
    two savers stand for two server instances. 4 clients x 5 turns on one thread: none lost."""
    assert asyncio.run(async_clients(pg_url, pooled)) == []


async def async_clients(url: str, pooled: bool) -> list[dict]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    context = make_context(load_settings())
    config = {"configurable": {"thread_id": "shared"}}
    settings = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with contextlib.AsyncExitStack() as stack:
        savers = []
        for _ in range(2):
            if pooled:
                pool = AsyncConnectionPool(url, kwargs=settings, max_size=4, open=False)
                await pool.open()
                stack.push_async_callback(pool.close)
                savers.append(AsyncPostgresSaver(pool))
            else:
                conn = await AsyncConnection.connect(url, **settings)
                stack.push_async_callback(conn.close)
                savers.append(AsyncPostgresSaver(conn))
        await savers[0].setup()
        graphs = [STRATEGIES["react"].build(saver) for saver in savers]
        answered: list[dict] = []

        async def client(number: int) -> None:
            pause = random.Random(number)
            for turn in range(5):
                for attempt in range(500):
                    asked = question(100 * number + turn, attempt)
                    try:
                        await graphs[number % 2].ainvoke(
                            {"messages": asked["messages"]}, config, context=context
                        )
                    except ThreadChangedError:
                        await asyncio.sleep(pause.uniform(0, 0.02))  # a client's retry policy
                        continue
                    answered.append(asked)
                    break

        await asyncio.gather(*(client(n) for n in range(4)))
        assert len(answered) == 20
        state = await graphs[0].aget_state(config)
        return [asked for asked in answered if not kept_in(state.values["messages"], asked)]


def test_branches_from_an_explicit_checkpoint_are_not_refused(database: str):
    """A deliberate branch: a turn sent from an earlier checkpoint (a client's `checkpoint_id`),
    a replay from one (no input), and a rollback's copy followed by a new turn."""
    context = make_context(load_settings())
    thread = {"configurable": {"thread_id": "branches"}}
    with open_checkpointer(database) as saver:
        graph = STRATEGIES["react"].build(saver)
        for n in (1, 2):
            ask(graph, question(n, n), thread, context)
        history = list(graph.get_state_history(thread))
        end_of_first = next(s for s in history if s.values.get("turn") == 1 and not s.next)
        earlier = {
            "configurable": {**thread["configurable"], **end_of_first.config["configurable"]}
        }

        branch = question(5, 5)
        assert ask(graph, branch, earlier, context)["messages"][-1].content == "5 + 5 = 10"
        assert kept(graph, thread, branch)

        before_tools = next(s for s in history if s.next == ("tools",))
        replay = {"configurable": {**thread["configurable"], **before_tools.config["configurable"]}}
        replayed = graph.invoke(None, replay, context=context, durability="sync")
        assert replayed["messages"][-1].content == "2 + 2 = 4"

        graph.update_state(earlier, None, as_node="__copy__")  # what `rollback` writes
        after = question(6, 6)
        ask(graph, after, thread, context)
        assert kept(graph, thread, after)


def test_the_applications_own_writes_are_not_checked(database: str):
    """Importing a thread that has a branch, through a saver the guard is installed on (a run
    went first): an import is the application's write, not a run's, and keeps every checkpoint."""
    from app.db import open_database
    from app.service.archive import export_thread, import_thread

    context = make_context(load_settings())
    thread = {"configurable": {"thread_id": "original"}}
    with open_database(database) as db:
        graph = STRATEGIES["react"].build(db.saver)
        ask(graph, question(1, 1), thread, context)
        ask(graph, question(2, 2), thread, context)
        first = list(graph.get_state_history(thread))[-1].config["configurable"]
        ask(graph, question(3, 3), {"configurable": {**thread["configurable"], **first}}, context)
        exported = export_thread(db, "original")
        report = import_thread(db, exported, "copy")
        copy = {"configurable": {"thread_id": "copy"}}
        assert report.checkpoints == len(list(graph.get_state_history(thread)))
        assert graph.get_state(copy).values == graph.get_state(thread).values


def test_the_step_is_known_without_execution_info(monkeypatch: pytest.MonkeyPatch, tmp_path):
    """With a LangGraph whose Runtime has no `execution_info`, the step comes from the task's
    config, and it is the same step."""
    from types import SimpleNamespace

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.config import get_config
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    import graphs.shared.guard as guard

    class Counter(TypedDict):
        n: int

    seen = []

    def node(state: Counter) -> dict:
        seen.append(guard.running_step(get_config()))
        with monkeypatch.context() as patch:
            patch.setattr(guard, "get_runtime", lambda: SimpleNamespace())
            seen.append(guard.running_step(get_config()))
        return {"n": 1}

    builder = StateGraph(Counter)
    builder.add_node("a", node)
    builder.add_edge(START, "a")
    with sqlite3.connect(tmp_path / "db.sqlite", check_same_thread=False) as conn:
        builder.compile(checkpointer=SqliteSaver(conn)).invoke(
            {"n": 0}, {"configurable": {"thread_id": "t"}}
        )
    assert seen[0] is not None and seen[0] == seen[1]


@pytest.mark.parametrize("durability", ["async", "sync"])
def test_a_run_overtaken_before_its_first_write_fails_whatever_the_durability(
    pg_url: str, durability: str
):
    """Another instance's whole turn lands right after this run read the thread's head, so this
    run's ids are the newest and its node checks see nothing wrong: its first checkpoint is refused
    as it is stored. With durability "async" (Aegra's and LangGraph's default) that refusal happens
    behind the run, in a task whose GraphBubbleUp LangGraph drops once it is over; it must still
    reach the caller (here at the run's end), and nothing of the run be stored."""
    assert asyncio.run(overtaken_turn(pg_url, durability)) == "refused, the other turn kept"


async def overtaken_turn(url: str, durability: str) -> str:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    class OvertakenSaver(AsyncPostgresSaver):
        """Runs `overtake` once, right after a run loaded the thread's head."""

        overtake: Callable[[], Any] | None = None

        async def aget_tuple(self, config: Any) -> Any:
            head = await super().aget_tuple(config)
            if self.overtake is not None and not config["configurable"].get("checkpoint_id"):
                overtake, self.overtake = self.overtake, None
                await overtake()
            return head

    context = make_context(load_settings())
    config = {"configurable": {"thread_id": "overtaken"}}
    settings = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with (
        await AsyncConnection.connect(url, **settings) as mine,
        await AsyncConnection.connect(url, **settings) as theirs,
    ):
        saver, other_saver = OvertakenSaver(mine), AsyncPostgresSaver(theirs)  # two instances
        await saver.setup()
        graph, other = (STRATEGIES["react"].build(s) for s in (saver, other_saver))
        first, overtaking, overtaken = question(1, 1), question(2, 2), question(3, 3)
        await graph.ainvoke({"messages": first["messages"]}, config, context=context)

        async def other_turn() -> None:
            turn = {"messages": overtaking["messages"]}
            await other.ainvoke(turn, config, context=context, durability="sync")

        saver.overtake = other_turn
        try:
            turn = {"messages": overtaken["messages"]}
            async for _ in graph.astream(turn, config, context=context, durability=durability):
                await asyncio.sleep(0.01)  # a server sends each chunk on before it reads the next
        except ThreadChangedError:
            outcome = "refused"
        else:
            outcome = "reported success"
        messages = (await graph.aget_state(config)).values["messages"]
        kept_turns = [kept_in(messages, asked) for asked in (first, overtaking, overtaken)]
        return f"{outcome}, " + (
            "the other turn kept" if kept_turns == [True, True, False] else f"kept: {kept_turns}"
        )


@contextlib.contextmanager
def two_instances(
    database: str, strategy: str, first: dict, config: dict
) -> Iterator[tuple[Any, Any, BaseCheckpointSaver]]:
    """Two server instances on `database`, each with a saver of its own: the other's react graph,
    which answered `first` on the thread, and this one's `strategy` graph as a server copies it
    (app/portable.py), with its saver."""
    context = make_context(load_settings())
    with open_checkpointer(database) as theirs, open_checkpointer(database) as mine:
        other = STRATEGIES["react"].build(theirs)
        ask(other, first, config, context)
        graph = guard_copies(STRATEGIES[strategy].build(None)).copy(update={"checkpointer": mine})
        yield other, graph, mine


def test_a_saver_s_first_run_cannot_fork_the_thread_when_a_server_hands_it_over(database: str):
    """A server (Aegra, LangGraph's) copies the graph with its saver for each run. A saver's first
    run stores two checkpoints before any node runs: unless the copy installed the write check,
    another run's turn landing meanwhile is forked away (the head moves to this run's branch) and
    lost (with a plain build in place of guard_copies, this test finds the other turn gone)."""
    context = make_context(load_settings())
    config = {"configurable": {"thread_id": "first-run"}}
    first, overtaking, overtaken = question(1, 1), question(2, 2), question(3, 3)
    with two_instances(database, "react", first, config) as (other, graph, mine):
        load_head = mine.get_tuple

        def overtaken_after_loading(read: Any) -> Any:
            head = load_head(read)
            if not read["configurable"].get("checkpoint_id"):  # the run loading the thread's head
                mine.get_tuple = load_head
                ask(other, overtaking, config, context)
            return head

        mine.get_tuple = overtaken_after_loading
        with pytest.raises(ThreadChangedError):
            ask(graph, overtaken, config, context)
        messages = other.get_state(config).values["messages"]
        assert [kept_in(messages, asked) for asked in (first, overtaking)] == [True, True]


def overtaken_once(
    mine: BaseCheckpointSaver, when: Callable[[tuple], bool], other: Any, turn: dict, config: dict
) -> None:
    """After `mine` stores the first checkpoint for which `when(put's arguments)` holds, the other
    instance runs `turn` on the thread (once; `mine` stores as before from then on)."""
    store = mine.put

    def overtaken(*put: Any) -> Any:
        stored = store(*put)
        if when(put):
            mine.put = store  # type: ignore[method-assign]
            ask(other, turn, config, make_context(load_settings()))
        return stored

    mine.put = overtaken  # type: ignore[method-assign]


def test_a_run_refused_after_another_carried_its_answer_on_ends_answered(database: str):
    """Reflexion's turn stores its answer, then evaluates it. Another instance's turn starts from
    that answer before the evaluation's step, so this run is refused there; its turn is answered on
    the thread (the other turn carried it on). The run must end as answered: ThreadChangedError
    would tell its client to send the message again, and the thread would answer it twice."""
    context = make_context(load_settings())
    config = {"configurable": {"thread_id": "carried"}}
    first, carried, carrying = question(1, 1), question(3, 3), question(2, 2)
    with two_instances(database, "reflexion", first, config) as (other, graph, mine):
        # Once the answer is the thread's head:
        overtaken_once(mine, lambda _: kept(graph, config, carried), other, carrying, config)
        result = ask(graph, carried, config, context)
        messages = other.get_state(config).values["messages"]
        assert kept_in(result["messages"], carried)
        assert [kept_in(messages, asked) for asked in (first, carried, carrying)] == [True] * 3
        assert [m.content for m in messages].count("3 + 3 = 6") == 1


def test_a_run_refused_before_its_question_was_stored_fails_though_the_last_turn_is_answered(
    database: str,
):
    """A run stores its input checkpoint (the question still in its pending writes), then another
    instance's turn starts from that checkpoint, which drops the pending question. Refused at its
    next step, the run must fail so its client sends the question again: the head answers the
    thread's previous question, not this one (on Aegra, 1 turn in ~4 x 40 was reported answered
    and lost)."""
    context = make_context(load_settings())
    config = {"configurable": {"thread_id": "refused-at-input"}}
    first, dropped, overtaking = question(1, 1), question(3, 3), question(2, 2)
    with two_instances(database, "react", first, config) as (other, graph, mine):
        # Once its input checkpoint is stored:
        overtaken_once(mine, lambda put: put[2]["source"] == "input", other, overtaking, config)
        with pytest.raises(ThreadChangedError):
            ask(graph, dropped, config, context)
        messages = other.get_state(config).values["messages"]
        kept_turns = [kept_in(messages, asked) for asked in (first, overtaking, dropped)]
        assert kept_turns == [True, True, False]


def test_a_replay_refused_after_its_answer_fails_though_the_head_answers_that_question(
    database: str,
):
    """A replay branches from a checkpoint: the head answers the same question (the original
    turn), which says nothing of the branch. Refused, the replay fails as any refused run."""
    config = {"configurable": {"thread_id": "replayed"}}
    first, other_turn = question(1, 1), question(2, 2)
    with two_instances(database, "reflexion", first, config) as (other, graph, mine):
        [asked] = [h for h in other.get_state_history(config) if h.metadata["source"] == "input"]
        store = mine.put

        def overtaken_once_answered_again(*put: Any) -> Any:
            stored = store(*put)
            said = graph.get_state(stored).values["messages"]
            if said and said[-1].content == "1 + 1 = 2":
                mine.put = store
                ask(other, other_turn, config, make_context(load_settings()))
            return stored

        mine.put = overtaken_once_answered_again
        with pytest.raises(ThreadChangedError):
            graph.invoke(None, asked.config, context=make_context(load_settings()))


def test_an_async_run_refused_after_its_answer_was_carried_on_ends_answered(pg_url: str):
    """The same as Aegra runs a graph: `astream` on LangGraph's async PostgreSQL saver, one per
    instance."""
    assert asyncio.run(carried_async_turn(pg_url)) == ["3 + 3 = 6", [True, True, True], 1]


async def carried_async_turn(url: str) -> list:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    context = make_context(load_settings())
    config = {"configurable": {"thread_id": "carried-async"}}
    first, carried, carrying = question(1, 1), question(3, 3), question(2, 2)
    settings = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with (
        await AsyncConnection.connect(url, **settings) as theirs,
        await AsyncConnection.connect(url, **settings) as mine,
    ):
        other_saver, saver = AsyncPostgresSaver(theirs), AsyncPostgresSaver(mine)
        await saver.setup()
        other = STRATEGIES["react"].build(other_saver)
        await other.ainvoke({"messages": first["messages"]}, config, context=context)
        graph = guard_copies(STRATEGIES["reflexion"].build(None)).copy(
            update={"checkpointer": saver}
        )
        store = saver.aput

        async def overtaken_once_answered(*put: Any) -> Any:
            stored = await store(*put)
            if kept_in((await graph.aget_state(config)).values["messages"], carried):
                saver.aput = store
                await other.ainvoke({"messages": carrying["messages"]}, config, context=context)
            return stored

        saver.aput = overtaken_once_answered
        last = None
        async for values in graph.astream(
            {"messages": carried["messages"]}, config, context=context, stream_mode="values"
        ):
            last = values["messages"][-1].content
        messages = (await other.aget_state(config)).values["messages"]
        kept_turns = [kept_in(messages, asked) for asked in (first, carried, carrying)]
        return [last, kept_turns, [m.content for m in messages].count("3 + 3 = 6")]
