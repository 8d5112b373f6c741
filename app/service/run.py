"""One run of a thread's graph, with the values of its turn passed down (never kept on a session):
the run context, where its events go, its turn number and config. `drive` streams it from a worker
thread (Ctrl-C reaches the user at once) and closes the turn cleanly when it is stopped."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import StateSnapshot

from app.service.events import EventSink, TurnEnd, from_stream
from app.service.head import CHECKPOINTS_MODE, HeadCache
from app.service.outcome import turn_status
from app.service.recovery import close_interrupted
from app.service.threads import load_state, thread_config
from app.service.worker import RunCancelled, sigint_ignored, stream_in_worker
from graphs.react.graph import recursion_limit
from graphs.shared.skeleton import StrategyGraph
from graphs.state import AgentContext


class TurnInterrupted(Exception):
    """Raised after Ctrl-C stopped a turn; what was shown is saved and the thread is consistent."""


@dataclass(frozen=True)
class TurnResult:
    thread_id: str
    turn: int
    status: str
    answer: str


@dataclass(frozen=True)
class ThreadGraph:
    """A thread on its strategy's compiled graph, with the head this process last saw of it and
    the event that stops its running turn (set by Ctrl-C's stand-in, the server's cancel route)."""

    graph: StrategyGraph
    thread_id: str
    head: HeadCache
    stop: threading.Event


@dataclass(frozen=True)
class TurnRun:
    """The run of one turn (or its continuation: approvals, a replay) on a thread."""

    thread: ThreadGraph
    context: AgentContext
    sink: EventSink
    turn: int
    metadata: dict
    # LangGraph's own run options a client chose (interrupt_before / interrupt_after)
    options: dict = dataclasses.field(default_factory=dict)

    @property
    def config(self) -> RunnableConfig:
        return self.from_checkpoint(None)

    def from_checkpoint(self, checkpoint_id: str | None) -> RunnableConfig:
        """The run's config, starting at an earlier checkpoint (a replay's first drive) or, with
        None, at the head."""
        return thread_config(
            self.thread.thread_id,
            checkpoint_id,
            metadata=self.metadata,
            recursion_limit=recursion_limit(self.context),
        )

    def with_context(self, context: AgentContext) -> TurnRun:
        return dataclasses.replace(self, context=context)

    def drive(self, graph_input: Any, config: RunnableConfig | None = None, **options: Any) -> None:
        """Run the graph to its next pause or end, every event to the sink."""
        thread = self.thread
        thread.head.run_started()
        graph_modes = frozenset(getattr(self.sink, "graph_modes", ()))
        stream = stream_in_worker(
            thread.graph,
            graph_input,
            config or self.config,
            self.context,
            f"turn-{thread.thread_id}",
            stop=thread.stop,
            values=getattr(self.sink, "wants_values", False),
            graph_modes=graph_modes,
            tokens=getattr(self.sink, "wants_tokens", True),
            **{**self.options, **options},
        )
        try:
            for mode, payload, namespace in stream:
                thread.head.observe(mode, payload)
                if mode != CHECKPOINTS_MODE or mode in graph_modes:
                    for event in from_stream(mode, payload, namespace):
                        self.sink.emit(event)
        except (KeyboardInterrupt, RunCancelled):
            with sigint_ignored():
                stream.close()  # the run writes nothing more, whatever its worker still does
                close_interrupted(thread.graph, thread.thread_id, self.sink.partial_answer())
            raise TurnInterrupted(
                f"turn {self.turn} of thread {thread.thread_id} was interrupted"
            ) from None

    def finish(self, head: StateSnapshot | None = None) -> TurnResult:
        """The turn's result (from `head`, else the stored head), told to the sink."""
        head = head or load_state(self.thread.graph, self.thread.thread_id)
        values = head.values
        last = values["messages"][-1] if values.get("messages") else None
        answer = str(last.content) if isinstance(last, AIMessage) else ""
        status = "interrupted" if head.interrupts else turn_status(values)
        if values.get("status") == "answered" and status == "failed":
            self._record_outcome(status)
        result = TurnResult(self.thread.thread_id, self.turn, status, answer)
        self.sink.emit(TurnEnd(result.thread_id, result.turn, result.status, result.answer))
        return result

    def _record_outcome(self, status: str) -> None:
        """The graph ends a turn `answered` whenever the model answered; an answer that reports a
        failed action is the turn failing (app/service/outcome.py). That outcome is written into
        the state, so the thread's values, the API's run and thread status, `history` and the
        exit code all say the same."""
        self.thread.graph.update_state(
            thread_config(self.thread.thread_id, metadata={**self.metadata, "settled": status}),
            {"status": status},
            as_node="finalize",
        )
