"""A thread's session: the service that runs its turns. Every write holds the thread's lock,
taken before anything is read, and leaves a consistent head.

The concerns live next door: the run of one turn and its result (run.py), approvals
(approvals.py), crash and Ctrl-C recovery (recovery.py), replay (replay.py), `/compact`
(compaction.py) and experience memory (experience.py). Values of one turn are passed down in a
`TurnRun`; the session keeps only what every turn of the thread shares."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Collection
from contextlib import AbstractContextManager

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from langgraph.types import Command, StateSnapshot

from app.config import Settings
from app.db import lock_thread
from app.errors import UsageError
from app.service.approvals import Approver, answer_approvals, settle_before_turn
from app.service.compaction import compact
from app.service.events import EventSink, Notice
from app.service.experience import remember_turn, with_experience
from app.service.head import HeadCache
from app.service.recovery import pending_approval, repair_interrupted, turn_metadata
from app.service.replay import ReplayConfirm, nothing_to_rerun, replay_from
from app.service.run import ThreadGraph, TurnInterrupted, TurnResult, TurnRun
from app.service.threads import load_state, strategy_graph, thread_config
from app.store import new_thread_id, validate_thread_id
from graphs.shared.approvals import ApprovalRequest
from graphs.shared.messages import dangling_tool_calls, new_message_id
from graphs.state import AgentContext
from graphs.strategies import get_strategy, stored_strategy
from tools.file_tools import sparing
from tools.memory import MemoryStore, graph_store

__all__ = [
    "Approver",
    "ChatSession",
    "ReplayConfirm",
    "TurnInterrupted",
    "TurnResult",
    "new_thread_id",
]

PREVIEW_CHARS = 80


def without_surrogates(text: str) -> str:
    """Undecodable bytes (surrogate escapes from the terminal) and lone surrogates (a JSON client's
    "\ud800") become U+FFFD: neither can be stored or sent to a model as UTF-8."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def clean_input(text: str, max_chars: int) -> str:
    """Decode-safe, non-empty and within the size cap, or a UsageError that says what to do."""
    text = without_surrogates(text)
    if not text.strip():
        raise UsageError("the message is empty; type something, or /exit to leave")
    if len(text) > max_chars:
        raise UsageError(
            f"the message is {len(text):,} characters; the limit is {max_chars:,} "
            "(raise it with APP_MAX_INPUT_CHARS, or put the text in a workspace file and refer to it)"
        )
    return text


class ChatSession:
    """Runs turns on one thread of one strategy's graph."""

    def __init__(
        self,
        settings: Settings,
        saver: BaseCheckpointSaver,
        thread_id: str,
        context: AgentContext,
        memory: MemoryStore | BaseStore | None = None,
        user: str = "default",
        strategy: str | None = None,
    ) -> None:
        """`strategy` (or a configured one): the graph to run; None continues the thread's own
        (new threads: react). `memory`: the long-term memory the graph runs with as its store."""
        self.settings = settings
        self.thread_id = validate_thread_id(thread_id)
        self.context = context
        self.user = user
        strategy = strategy or settings.chosen_strategy
        stored = stored_strategy(saver, self.thread_id)
        self.strategy = get_strategy(strategy or stored or settings.strategy)
        self.strategy_notice = (
            f"thread {self.thread_id} ran with --strategy {stored}; this turn uses {strategy}"
            if strategy and stored and strategy != stored
            else ""
        )
        store = graph_store(memory) if memory is not None else None
        self.graph = strategy_graph(self.strategy.name, saver, store)
        self.head = HeadCache(self.graph, self.thread_id)
        # Set from another thread (the HTTP server's cancel route) to stop the running turn the
        # way Ctrl-C does, once the step in progress has finished.
        self.stop = threading.Event()
        # A LangGraph API client's run: its ids in every checkpoint's metadata (as LangGraph's
        # server writes them; streamed message metadata carries them too) and its run options.
        self.run_metadata: dict = {}
        self.graph_options: dict = {}

    @property
    def config(self) -> RunnableConfig:
        """The config that names this thread (its head)."""
        return thread_config(self.thread_id)

    @property
    def thread(self) -> ThreadGraph:
        return ThreadGraph(self.graph, self.thread_id, self.head, self.stop)

    def _run(
        self, sink: EventSink, turn: int, metadata: dict, context: AgentContext | None = None
    ) -> TurnRun:
        metadata = {**self.run_metadata, **metadata}
        return TurnRun(
            self.thread, context or self.context, sink, turn, metadata, self.graph_options
        )

    def _locked(self) -> AbstractContextManager[object]:
        return lock_thread(self.settings.database, self.thread_id)

    def turns(self) -> int:
        return self.head.load().values.get("turn", 0)

    def run_turn(
        self,
        text: str,
        sink: EventSink,
        approver: Approver | None = None,
        message_id: str | None = None,
    ) -> TurnResult:
        """One user turn. Risky tool calls go to `approver` when the policy is `ask`.
        `message_id`: the user message's id a client chose (else a new one)."""
        text = clean_input(text, self.settings.max_input_chars)
        with self._locked():
            # With DeltaChannel every full load of the head rebuilds the messages, which is what a
            # long thread makes expensive: the head cache skips the loads this process can.
            head = self._settle(sink, approver, self.head.load())
            head = repair_interrupted(self.graph, self.thread_id, sink, head)
            turn = head.values.get("turn", 0) + 1
            message = HumanMessage(content=text, id=message_id or new_message_id("human"))
            context = with_experience(
                self.context, self.graph.store, self.user, self.thread_id, text
            )
            run = self._run(sink, turn, {"turn": turn, "preview": text[:PREVIEW_CHARS]}, context)
            if self.strategy_notice:
                sink.emit(Notice(self.strategy_notice))
                self.strategy_notice = ""
            run.drive(
                {"messages": [message]}
            )  # its first node begins the turn (graphs/shared/turns.py)
            end = answer_approvals(run, approver, just_ran=True)
            result = run.finish(end)
            remember_turn(self.graph.store, self.user, text, result, end)
            return result

    def _settle(
        self, sink: EventSink, approver: Approver | None, head: StateSnapshot
    ) -> StateSnapshot:
        if not pending_approval(head):
            return head
        run = self._run(sink, head.values.get("turn", 0), turn_metadata(head))
        return settle_before_turn(run, approver, head)

    def pending_approval(self, state: StateSnapshot | None = None) -> list[ApprovalRequest]:
        """The risky calls a paused turn is waiting to have approved (survives restarts)."""
        return pending_approval(state or load_state(self.graph, self.thread_id))

    def answer_pending_approval(self, sink: EventSink, approver: Approver) -> TurnResult | None:
        """Show a pending approval again (e.g. after a restart) and continue the turn it paused."""
        with self._locked():
            state = load_state(self.graph, self.thread_id)
            if not pending_approval(state):
                return None
            run = self._run(sink, state.values.get("turn", 0), turn_metadata(state))
            answer_approvals(run, approver)
            return run.finish()

    def resume_with(self, answer: object, sink: EventSink) -> TurnResult:
        """Continue a turn paused for approval with a client's answer (LangGraph's
        `Command(resume=...)`: {call id: {"action": "approve" | "reject" | "edit", ...}})."""
        with self._locked():
            state = load_state(self.graph, self.thread_id)
            if not pending_approval(state):
                raise UsageError(
                    f"thread {self.thread_id} is not waiting for an answer; send input instead"
                )
            run = self._run(sink, state.values.get("turn", 0), turn_metadata(state))
            run.drive(Command(resume=answer))
            return run.finish(answer_approvals(run, None, just_ran=True))

    def steer(self, command: Command, sink: EventSink) -> TurnResult:
        """Run a client's LangGraph `Command` on the head: `update` the state and/or `goto` a node
        (with `resume`, when the turn is paused), then go on as the graph's edges say."""
        with self._locked():
            state = load_state(self.graph, self.thread_id)
            run = self._run(sink, state.values.get("turn", 0), turn_metadata(state))
            run.drive(command)
            return run.finish(answer_approvals(run, None, just_ran=True))

    def replay(
        self,
        checkpoint_id: str,
        sink: EventSink,
        approve: ReplayConfirm,
        spared: Collection[str] = (),
    ) -> TurnResult:
        """Re-execute the graph from a checkpoint: a new branch whose model and tools run again.
        Before tools with side effects run again, `approve` decides. Files in `spared` (changed
        outside Waypoint) are never written by the replayed calls."""
        context = dataclasses.replace(self.context, tools=sparing(self.context.tools, spared))
        with self._locked():
            start = self.graph.get_state(thread_config(self.thread_id, checkpoint_id))
            if not start.next:
                raise nothing_to_rerun(self.thread_id, checkpoint_id)
            metadata = {**turn_metadata(start), "replay_of": checkpoint_id}
            turn = metadata.get("turn") or start.values.get("turn", 0)
            run = self._run(sink, turn, metadata, context)
            replay_from(run, self.strategy, checkpoint_id, approve)
            return run.finish()

    def pending_step(self) -> str | None:
        """What an interrupted run left unfinished (its next node and open tool calls), if anything."""
        state = load_state(self.graph, self.thread_id)
        dangling = dangling_tool_calls(state.values.get("messages", []))
        if (not state.next and not dangling) or pending_approval(state):
            return None
        names = ", ".join(c["name"] for c in dangling)
        return f"next step: {', '.join(state.next) or 'none'}" + (
            f"; open tool calls: {names}" if names else ""
        )

    def resume(self, sink: EventSink, approver: Approver | None = None) -> TurnResult:
        """Run the unfinished step of an interrupted turn again (at-least-once for its tools); a
        risky call it reaches asks `approver` at once, as in the turn it resumes."""
        with self._locked():
            state = load_state(self.graph, self.thread_id)
            run = self._run(sink, state.values.get("turn", 0), turn_metadata(state))
            run.drive(None)
            return run.finish(answer_approvals(run, approver, just_ran=True))

    def discard(self, sink: EventSink) -> None:
        with self._locked():
            repair_interrupted(self.graph, self.thread_id, sink)

    def compact(self, sink: EventSink) -> int:
        """Replace older turns with a summary now (REPL /compact); returns the messages replaced."""
        with self._locked():
            return compact(self.thread, self.context, sink)
