"""One chat turn on a thread (lock, repair, stream, Ctrl-C) and the interactive REPL around it."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateSnapshot

from app.config import Settings
from app.db import lock_thread
from app.errors import UsageError
from app.head import CHECKPOINTS_MODE, HeadCache
from app.lessons import record_lessons
from app.memory import (
    experience_prompt,
    record_experience,
    relevant_experiences,
    tools_used_in_turn,
)
from app.render import Renderer
from app.store import validate_thread_id
from app.threads import load_state
from app.worker import RunCancelled, sigint_ignored, stream_in_worker
from graphs.react.graph import recursion_limit
from graphs.shared.messages import cancelled_results, dangling_tool_calls, new_message_id
from graphs.shared.summarize import (
    split_for_summary,
    summary_cap_tokens,
    summary_update,
    write_summary,
)
from graphs.shared.window import context_budget
from graphs.state import AgentContext
from graphs.strategies import get_strategy, stored_strategy, strategy_turn_input
from tools import side_effect_names
from tools.file_tools import sparing
from tools.memory import MemoryStore

PREVIEW_CHARS = 80


@dataclass(frozen=True)
class TurnResult:
    thread_id: str
    turn: int
    status: str
    answer: str


ReplayConfirm = Callable[[list[ToolCall]], bool]
# Given the risky calls awaiting approval ({id, name, args, reason}), return {call id: decision}
# with decision {"action": "approve" | "reject" | "edit", "args": {...} (edit), "note": "..."}.
Approver = Callable[[list[dict]], dict[str, dict]]


class TurnInterrupted(Exception):
    """Raised after Ctrl-C stopped a turn; what was shown is saved and the thread is consistent."""


def _by_policy(calls: list[dict], policy: str) -> dict[str, dict]:
    action = "approve" if policy == "auto" else "reject"
    note = f"the approval policy is '{policy}' and nobody was asked"
    return {call["id"]: {"action": action, "note": note} for call in calls}


def compact_cap(context: AgentContext) -> int | None:
    """How long a /compact summary may be: as in the graph, when there is a budget."""
    budget = context_budget(context)
    return summary_cap_tokens(budget) if budget else None


def new_thread_id() -> str:
    return f"{datetime.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:4]}"


def clean_input(text: str, max_chars: int) -> str:
    """Decode-safe, non-empty and within the size cap, or a UsageError that says what to do."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if not text.strip():
        raise UsageError("the message is empty; type something, or /exit to leave")
    if len(text) > max_chars:
        raise UsageError(
            f"the message is {len(text):,} characters; the limit is {max_chars:,} "
            "(raise it with APP_MAX_INPUT_CHARS, or put the text in a workspace file and refer to it)"
        )
    return text


class ChatSession:
    """Runs turns on one thread: every write holds the thread's lock and leaves a consistent head."""

    def __init__(
        self,
        settings: Settings,
        saver: BaseCheckpointSaver,
        thread_id: str,
        context: AgentContext,
        memory: MemoryStore | None = None,
        user: str = "default",
        strategy: str | None = None,
    ) -> None:
        """`strategy` (or a configured one): the graph to run; None continues the thread's own
        (new threads: react)."""
        self.settings = settings
        self.thread_id = validate_thread_id(thread_id)
        self.base_context = self.context = context
        self.memory, self.user = memory, user
        strategy = strategy or settings.chosen_strategy
        stored = stored_strategy(saver, self.thread_id)
        self.strategy = get_strategy(strategy or stored or settings.strategy)
        self.strategy_notice = (
            f"thread {self.thread_id} ran with --strategy {stored}; this turn uses {strategy}"
            if strategy and stored and strategy != stored
            else ""
        )
        self.graph: CompiledStateGraph = self.strategy.build(saver)
        self.head = HeadCache(self.graph, self.thread_id)
        # Set from another thread (the HTTP server's cancel route) to stop the running turn the
        # way Ctrl-C does, once the step in progress has finished.
        self.stop = threading.Event()

    @property
    def config(self) -> dict:
        return {"configurable": {"thread_id": self.thread_id}}

    def turns(self) -> int:
        return self.head.load().values.get("turn", 0)

    def run_turn(
        self, text: str, renderer: Renderer, approver: Approver | None = None
    ) -> TurnResult:
        """One user turn. Risky tool calls go to `approver` when the policy is `ask`."""
        text = clean_input(text, self.settings.max_input_chars)
        with lock_thread(self.settings.database, self.thread_id):
            # With DeltaChannel every full load of the head rebuilds the messages, which is what a
            # long thread makes expensive: the head cache skips the loads this process can.
            head = self._settle_pending_approval(renderer, approver, self.head.load())
            head = self._repair_interrupted(renderer, head)
            turn = head.values.get("turn", 0) + 1
            message = HumanMessage(content=text, id=new_message_id("human"))
            metadata = {"turn": turn, "preview": text[:PREVIEW_CHARS]}
            self.context = self._with_experience(text)
            config = self._run_config(metadata)
            if self.strategy_notice:
                renderer.notice(self.strategy_notice)
                self.strategy_notice = ""
            self._drive(strategy_turn_input(self.strategy, message, turn), config, renderer, turn)
            end = self._answer_approvals(config, renderer, turn, approver, just_ran=True)
            result = self._finish(turn, renderer, end)
            self._record_experience(turn, text, result, end)
            return result

    def _with_experience(self, request: str) -> AgentContext:
        """The run context for this turn: the few most relevant past experiences go with the
        user's message (turn notes), so the system prompt stays the same for every turn."""
        if self.memory is None:
            return self.base_context
        block = experience_prompt(
            relevant_experiences(self.memory, self.user, request, exclude_thread=self.thread_id)
        )
        if not block:
            return self.base_context
        return dataclasses.replace(self.base_context, turn_notes=block)

    def _record_experience(
        self, turn: int, request: str, result: TurnResult, end: StateSnapshot
    ) -> None:
        if self.memory is None:
            return
        messages = end.values.get("messages", [])
        record_lessons(
            self.memory, self.user, self.thread_id, turn, request, end.values.get("lessons") or []
        )
        record_experience(
            self.memory,
            self.user,
            self.thread_id,
            turn,
            request,
            tools_used_in_turn(messages),
            result.status,
            result.answer,
            judged_wrong=(end.values.get("verdict") or {}).get("success") is False,
        )

    def pending_approval(self, state: StateSnapshot | None = None) -> list[dict]:
        """The risky calls a paused turn is waiting to have approved (survives restarts)."""
        state = state or load_state(self.graph, self.thread_id)
        for task in state.tasks:
            for pending in task.interrupts:
                value = pending.value
                if isinstance(value, dict) and value.get("type") == "approval":
                    return list(value.get("calls", []))
        return []

    def answer_pending_approval(self, renderer: Renderer, approver: Approver) -> TurnResult | None:
        """Show a pending approval again (e.g. after a restart) and continue the turn it paused."""
        with lock_thread(self.settings.database, self.thread_id):
            if not self.pending_approval():
                return None
            state = load_state(self.graph, self.thread_id)
            turn = state.values.get("turn", 0)
            metadata = {k: v for k, v in (state.metadata or {}).items() if k in {"turn", "preview"}}
            self._answer_approvals(self._run_config(metadata), renderer, turn, approver)
            return self._finish(turn, renderer)

    def _answer_approvals(
        self,
        config: dict,
        renderer: Renderer,
        turn: int,
        approver: Approver | None,
        just_ran: bool = False,
    ) -> StateSnapshot:
        """Answer every approval the run pauses for; returns the head once nothing is pending.
        `just_ran`: a run was driven right before, so its streamed head can be used."""
        while True:
            head = self.head.after_run(config["metadata"]) if just_ran else self.head.load()
            calls = self.pending_approval(head)
            if not calls:
                return head
            decisions = approver(calls) if approver else _by_policy(calls, self.context.approval)
            self._drive(Command(resume=decisions), config, renderer, turn)
            just_ran = True

    def _settle_pending_approval(
        self, renderer: Renderer, approver: Approver | None, head: StateSnapshot
    ) -> StateSnapshot:
        """A new message on a thread paused for approval: answer it first (ask, or by policy)."""
        calls = self.pending_approval(head)
        if not calls:
            return head
        if approver is None:
            verdict = "approved" if self.context.approval == "auto" else "rejected"
            renderer.notice(
                f"a pending approval of {len(calls)} call(s) was {verdict} by the "
                f"approval policy '{self.context.approval}'"
            )
        turn = head.values.get("turn", 0)
        metadata = {k: v for k, v in (head.metadata or {}).items() if k in {"turn", "preview"}}
        return self._answer_approvals(self._run_config(metadata), renderer, turn, approver)

    def replay(
        self,
        checkpoint_id: str,
        renderer: Renderer,
        approve: ReplayConfirm,
        spared: Collection[str] = (),
    ) -> TurnResult:
        """Re-execute the graph from a checkpoint: a new branch whose model and tools run again.
        Before tools with side effects run again, `approve` decides (see the two ways below).
        Files in `spared` (changed outside Waypoint) are never written by the replayed calls."""
        tools = sparing(self.base_context.tools, spared)
        self.context = dataclasses.replace(self.base_context, tools=tools)
        with lock_thread(self.settings.database, self.thread_id):
            start = self.graph.get_state(
                {"configurable": {"thread_id": self.thread_id, "checkpoint_id": checkpoint_id}}
            )
            if not start.next:
                raise UsageError(
                    f"checkpoint {checkpoint_id} ended its turn, so there is nothing to re-run; "
                    f"pick an earlier checkpoint of that turn (history --thread {self.thread_id} --all)"
                )
            turn = (start.metadata or {}).get("turn") or start.values.get("turn", 0)
            metadata = {**(start.metadata or {}), "replay_of": checkpoint_id}
            metadata = {k: metadata[k] for k in ("turn", "preview", "replay_of") if k in metadata}
            config = self._run_config(metadata)
            first = {
                **config,
                "configurable": {**config["configurable"], "checkpoint_id": checkpoint_id},
            }
            if self.strategy.replay_gate is None:
                self._replay_asking(first, config, renderer, turn, approve)
            else:
                self._replay_gated(first, config, renderer, turn, approve)
            return self._finish(turn, renderer)

    def _replay_gated(
        self, first: dict, config: dict, renderer: Renderer, turn: int, approve: ReplayConfirm
    ) -> None:
        """Stop before each step of the strategy's gate node (react: `tools`) whose calls have
        side effects; a refusal closes the branch there."""
        gate = self.strategy.replay_gate
        graph_config = first
        while True:
            self._drive(None, graph_config, renderer, turn, interrupt_before=[gate])
            head = self.graph.get_state(self.config)
            if head.next != (gate,):
                return
            calls = self.strategy.gate_calls(head.values)
            risky = [c for c in calls if c["name"] in side_effect_names(self.context.tools)]
            if risky and not approve(risky):
                self._close(
                    cancelled_results(
                        dangling_tool_calls(head.values["messages"]),
                        "replay stopped before re-running it",
                    )
                )
                renderer.notice(
                    "replay stopped before re-running " + ", ".join(c["name"] for c in risky)
                )
                return
            graph_config = config

    def _replay_asking(
        self, first: dict, config: dict, renderer: Renderer, turn: int, approve: ReplayConfirm
    ) -> None:
        """Strategies whose tools run inside a subgraph (reflexion, routed): every call of a tool
        with side effects pauses for approval there, and `approve` answers; a refused call is
        answered "not run" and the run goes on with that."""
        base = self.context
        self.context = dataclasses.replace(
            base, approval="ask", confirm_tools=side_effect_names(base.tools)
        )
        try:
            self._drive(None, first, renderer, turn)
            while calls := self.pending_approval():
                allowed = approve([_as_tool_call(c) for c in calls])
                action, note = ("approve", "") if allowed else ("reject", "the replay was refused")
                decisions = {c["id"]: {"action": action, "note": note} for c in calls}
                self._drive(Command(resume=decisions), config, renderer, turn)
        finally:
            self.context = base

    def pending_step(self) -> str | None:
        """What an interrupted run left unfinished (its next node and open tool calls), if anything."""
        state = load_state(self.graph, self.thread_id)
        dangling = dangling_tool_calls(state.values.get("messages", []))
        if (not state.next and not dangling) or self.pending_approval():
            return None
        names = ", ".join(c["name"] for c in dangling)
        return f"next step: {', '.join(state.next) or 'none'}" + (
            f"; open tool calls: {names}" if names else ""
        )

    def resume(self, renderer: Renderer) -> TurnResult:
        """Run the unfinished step of an interrupted turn again (at-least-once for its tools)."""
        with lock_thread(self.settings.database, self.thread_id):
            state = load_state(self.graph, self.thread_id)
            turn = state.values.get("turn", 0)
            metadata = {k: v for k, v in (state.metadata or {}).items() if k in {"turn", "preview"}}
            self._drive(None, self._run_config(metadata), renderer, turn)
            return self._finish(turn, renderer)

    def discard(self, renderer: Renderer) -> None:
        with lock_thread(self.settings.database, self.thread_id):
            self._repair_interrupted(renderer)

    def compact(self, renderer: Renderer) -> int:
        """Replace older turns with a summary now (REPL /compact); returns the messages replaced."""
        with lock_thread(self.settings.database, self.thread_id):
            state = load_state(self.graph, self.thread_id)
            # Between turns there is no current turn: keep the last one whole, summarise the rest.
            older, recent = split_for_summary(state.values.get("messages", []), 0)
            if not older:
                raise UsageError("nothing to compact yet: the thread has no earlier turns")
            window = self.context.window.tokens if self.context.window else None
            summary = write_summary(self.context.model, older, window, compact_cap(self.context))
            metadata = {k: v for k, v in (state.metadata or {}).items() if k in {"turn", "preview"}}
            self.graph.update_state(
                {**self.config, "metadata": {**metadata, "compacted": len(older)}},
                {"messages": summary_update(summary, recent)},
                as_node="finalize",
            )
            renderer.notice(f"replaced {len(older)} older messages with a summary")
            return len(older)

    def _run_config(self, metadata: dict) -> dict:
        return {
            **self.config,
            "metadata": metadata,
            "recursion_limit": recursion_limit(self.context),
        }

    def _drive(
        self, graph_input: dict | None, config: dict, renderer: Renderer, turn: int, **options: Any
    ) -> None:
        self.head.run_started()
        try:
            for mode, payload in self._stream(graph_input, config, **options):
                self.head.observe(mode, payload)
                if mode != CHECKPOINTS_MODE:
                    renderer.event(mode, payload)
        except (KeyboardInterrupt, RunCancelled):
            with sigint_ignored():
                self._close_interrupted(renderer.partial_answer())
            raise TurnInterrupted(
                f"turn {turn} of thread {self.thread_id} was interrupted"
            ) from None

    def _finish(
        self, turn: int, renderer: Renderer, head: StateSnapshot | None = None
    ) -> TurnResult:
        result = self._result(turn, head)
        renderer.turn_end(
            {
                "thread_id": self.thread_id,
                "turn": turn,
                "status": result.status,
                "answer": result.answer,
            }
        )
        return result

    def _stream(
        self, graph_input: dict | None, config: dict, **options: Any
    ) -> Iterator[tuple[str, Any]]:
        """The run's events from a worker thread (Ctrl-C reaches the user at once; see app/worker)."""
        return stream_in_worker(
            self.graph,
            graph_input,
            config,
            self.context,
            f"turn-{self.thread_id}",
            stop=self.stop,
            **options,
        )

    def _result(self, turn: int, head: StateSnapshot | None = None) -> TurnResult:
        values = (head or load_state(self.graph, self.thread_id)).values
        last = values["messages"][-1] if values.get("messages") else None
        answer = str(last.content) if isinstance(last, AIMessage) else ""
        return TurnResult(self.thread_id, turn, values.get("status") or "answered", answer)

    def _repair_interrupted(
        self, renderer: Renderer, head: StateSnapshot | None = None
    ) -> StateSnapshot:
        """A run stopped by a crash or kill left pending steps: close them before the next turn.
        Returns the (possibly new) head."""
        state = head or load_state(self.graph, self.thread_id)
        if self.pending_approval(state):
            return state  # a paused turn is answered, not repaired
        dangling = dangling_tool_calls(state.values.get("messages", []))
        if not state.next and not dangling:
            return state
        self._close(cancelled_results(dangling, "the previous run was interrupted"))
        renderer.notice(
            f"the previous turn of {self.thread_id} was interrupted; "
            f"{len(dangling)} unfinished tool call(s) were marked cancelled"
        )
        return load_state(self.graph, self.thread_id)

    def _close_interrupted(self, partial: str) -> None:
        # get_state shows what the stopped step finished (its pending writes); update_state does
        # not apply them, so those messages are written again with the close.
        messages = self.graph.get_state(self.config).values.get("messages", [])
        closing = [
            *self._finished_but_uncommitted(),
            *cancelled_results(dangling_tool_calls(messages), "interrupted by the user"),
        ]
        if partial.strip():
            closing.append(AIMessage(content=f"{partial} […interrupted]", id=new_message_id("ai")))
        self._close(closing)

    def _finished_but_uncommitted(self) -> list[BaseMessage]:
        """Messages that tasks of the stopped step wrote before it could be checkpointed."""
        saved = self.graph.checkpointer.get_tuple(self.config)
        writes = saved.pending_writes if saved is not None else []
        values = [value for _, channel, value in writes or [] if channel == "messages"]
        flat = [m for value in values for m in (value if isinstance(value, list) else [value])]
        return [m for m in flat if isinstance(m, BaseMessage)]

    def _close(self, messages: list) -> None:
        """Written as if `finalize` ran (its only edge is to END, so no step stays pending), under
        the interrupted turn's metadata so history files it with that turn."""
        head = self.graph.get_state(self.config)
        turn_metadata = {k: v for k, v in (head.metadata or {}).items() if k in {"turn", "preview"}}
        self.graph.update_state(
            {**self.config, "metadata": {**turn_metadata, "closed": "interrupted"}},
            {"messages": messages, "status": "cancelled"},
            as_node="finalize",
        )


def _as_tool_call(question: dict) -> ToolCall:
    return ToolCall(
        name=question["name"], args=question["args"], id=question["id"], type="tool_call"
    )
