"""The three ways a turn is run: Waypoint's CLI path, Waypoint's compiled graph, and the baseline.

Each runner owns one SQLite file and one thread on it, and runs a turn with `turn(text)`:
- `SessionRunner`: `ChatSession.run_turn` (lock, repair check, worker-thread streaming, and
  long-term memory where the `chat` command opens it), rendered by the real `ConsoleRenderer` as on
  a terminal into a sink that drops the output;
- `GraphRunner`: Waypoint's compiled graph streamed directly (same input, config and stream modes),
  events discarded;
- `BaselineRunner`: `create_react_agent` (or `langchain.agents.create_agent`) with a default
  `SqliteSaver` and the default `add_messages` channel, streamed the plain way, events discarded.
"""

from __future__ import annotations

import contextlib
import io
import sqlite3
import warnings
from pathlib import Path
from typing import Any, Protocol

from bench.model import BenchChatModel

THREAD = "bench"
BASELINE_STREAM_MODES = ["updates", "messages"]


class Runner(Protocol):
    db_path: Path

    def turn(self, text: str) -> None: ...
    def close(self) -> None: ...


class _Discard(io.StringIO):
    def write(self, text: str) -> int:
        return len(text)


def discarding_console() -> Any:
    """A rich Console that renders as on a terminal (live tokens, tool cards), then drops it."""
    from rich.console import Console

    return Console(file=_Discard(), force_terminal=True, width=100)


class Waypoint:
    """What Waypoint's `chat` command opens for a thread: settings, the checkpointer, and, where
    this version has long-term memory, the memory store; the run context uses the bench model."""

    def __init__(
        self, db_path: Path, stack: contextlib.ExitStack, model_spec: str | None = None
    ) -> None:
        from app.config import load_settings
        from app.service.context import make_context
        from app.store import open_checkpointer

        self.settings = load_settings(
            db=db_path, workspace=db_path.parent / "workspace", model=model_spec
        )
        # the bench model, unless a real endpoint's model is named (bench/overhead.py)
        model = None if model_spec else BenchChatModel()
        self.saver = stack.enter_context(
            open_checkpointer(self.settings.db, self.settings.busy_timeout)
        )
        self.session_options: dict = {}
        try:
            from app.service.memory import memory_user, open_memory
        except ImportError:  # a version without long-term memory
            self.context = make_context(self.settings, model)
            return
        memory = stack.enter_context(open_memory(self.settings))
        self.session_options = {"memory": memory, "user": memory_user(self.settings)}
        self.context = make_context(self.settings, model, **self.session_options)


class SessionRunner:
    """Waypoint's real per-turn path: `ChatSession.run_turn` with the terminal renderer."""

    def __init__(
        self, db_path: Path, thread_id: str = THREAD, model_spec: str | None = None
    ) -> None:
        from app.service.session import ChatSession

        self.db_path = db_path
        db_path.parent.mkdir(parents=True, exist_ok=True)
        self._stack = contextlib.ExitStack()
        waypoint = Waypoint(db_path, self._stack, model_spec)
        self.session = ChatSession(
            waypoint.settings,
            waypoint.saver,
            thread_id,
            waypoint.context,
            **waypoint.session_options,
        )
        self._out, self._err = discarding_console(), discarding_console()

    def turn(self, text: str) -> None:
        from app.cli.render import ConsoleRenderer

        self.session.run_turn(text, ConsoleRenderer(self._out, self._err))

    def close(self) -> None:
        self._stack.close()


class GraphRunner:
    """Waypoint's compiled graph, streamed directly: no lock, no repair check, no rendering."""

    def __init__(self, db_path: Path, thread_id: str = THREAD) -> None:
        from graphs.react.graph import build_graph, recursion_limit

        self.db_path = db_path
        self.thread_id = thread_id
        self._stack = contextlib.ExitStack()
        waypoint = Waypoint(db_path, self._stack)
        self.graph = build_graph(waypoint.saver)
        self.context = waypoint.context
        self.recursion_limit = recursion_limit(self.context)
        self.turns = 0

    def turn(self, text: str, thread_id: str | None = None) -> None:
        from langchain_core.messages import HumanMessage
        from langchain_core.runnables import RunnableConfig

        from app.service.session import PREVIEW_CHARS
        from app.service.worker import STREAM_MODES
        from graphs.shared.messages import new_message_id

        self.turns += 1
        message = HumanMessage(content=text, id=new_message_id("human"))
        config: RunnableConfig = {
            "configurable": {"thread_id": thread_id or self.thread_id},
            "metadata": {"turn": 1 if thread_id else self.turns, "preview": text[:PREVIEW_CHARS]},
            "recursion_limit": self.recursion_limit,
        }
        # Just the message, as the application sends it: the graph's first node begins the turn.
        for _ in self.graph.stream(
            {"messages": [message]},
            config,
            context=self.context,
            stream_mode=STREAM_MODES,
            durability="sync",
        ):
            pass

    def close(self) -> None:
        self._stack.close()


def create_baseline_agent(checkpointer: Any, model: Any = None) -> Any:
    """The plain LangGraph agent: the prebuilt ReAct loop, the same model and calculator tool."""
    from tools.calculator import calculator

    model = model or BenchChatModel()
    try:
        from langchain.agents import create_agent
    except ImportError:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from langgraph.prebuilt import create_react_agent

            return create_react_agent(model, [calculator], checkpointer=checkpointer)
    return create_agent(model, [calculator], checkpointer=checkpointer)


def baseline_saver(db_path: Path) -> Any:
    """`SqliteSaver` as `from_conn_string` opens it (its `setup` turns WAL on); no other tuning."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    saver = SqliteSaver(sqlite3.connect(str(db_path), check_same_thread=False))
    saver.setup()
    return saver


class BaselineRunner:
    """`create_react_agent` on a default `SqliteSaver`, streamed with updates and messages."""

    def __init__(self, db_path: Path, thread_id: str = THREAD) -> None:
        self.db_path = db_path
        self.thread_id = thread_id
        self.saver = baseline_saver(db_path)
        self.graph = create_baseline_agent(self.saver)

    def turn(self, text: str, thread_id: str | None = None) -> None:
        from langchain_core.messages import HumanMessage

        config = {"configurable": {"thread_id": thread_id or self.thread_id}}
        for _ in self.graph.stream(
            {"messages": [HumanMessage(content=text)]}, config, stream_mode=BASELINE_STREAM_MODES
        ):
            pass

    def close(self) -> None:
        self.saver.conn.close()


def head_messages(runner: SessionRunner | GraphRunner | BaselineRunner) -> list:
    """The messages of the thread's head state, read through the runner's own graph."""
    if isinstance(runner, SessionRunner):
        graph, thread_id = runner.session.graph, runner.session.thread_id
    else:
        graph, thread_id = runner.graph, runner.thread_id
    state = graph.get_state({"configurable": {"thread_id": thread_id}})
    return list(state.values.get("messages", []))


def settle_process() -> None:
    """What a long-lived Waypoint process does once it is set up (app/service/runtime.py), for the
    benchmark's processes that run Waypoint's turns; nothing where this version has no such step.
    The baseline's processes do not: a plain LangGraph app keeps CPython's defaults."""
    try:
        from app.service.runtime import settle_process as settle
    except ImportError:
        try:
            from app.service.runtime import settle_heap as settle
        except ImportError:
            return
    settle()
