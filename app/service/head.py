"""A thread's head state without rebuilding it when this process already knows it.

With `DeltaChannel`, loading a head replays the stored message writes, which costs time in
proportion to the thread's state. A chat turn needs the head before it runs (repairs, approvals,
the turn number) and after (the answer, pending approvals). The run itself streams its checkpoints
(stream mode `checkpoints`), so the head after a clean run is already in memory; and the head before
the next turn is still that one unless someone else wrote to the thread, which one cheap read of the
head checkpoint's id tells.
"""

from __future__ import annotations

from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.types import StateSnapshot

from app.service.threads import load_state, saver_of, thread_config
from graphs.shared.skeleton import StrategyGraph

CHECKPOINTS_MODE: Final = "checkpoints"


class HeadCache:
    """The last head this process saw of one thread, trusted only while it is still the head."""

    def __init__(self, graph: StrategyGraph, thread_id: str) -> None:
        self.graph = graph
        self.thread_id = thread_id
        self._snapshot: StateSnapshot | None = None
        self._last_checkpoint: dict | None = None
        self._paused = False

    @property
    def config(self) -> RunnableConfig:
        return thread_config(self.thread_id)

    def load(self) -> StateSnapshot:
        """The head: the remembered one when it is still current, else a full (checked) load."""
        if self._snapshot is not None and self._is_current(self._snapshot):
            return self._snapshot
        return self._remember(load_state(self.graph, self.thread_id))

    def forget(self) -> None:
        self._snapshot = None

    def assume(self, snapshot: StateSnapshot) -> None:
        """A head known from elsewhere (the server's last run on this thread), used while it is
        still the head: `load` checks it first, as it checks a head it saw itself."""
        self._snapshot = snapshot

    def run_started(self) -> None:
        self._snapshot, self._last_checkpoint, self._paused = None, None, False

    def observe(self, mode: str, payload: Any) -> None:
        """Called with every streamed event of a run."""
        if mode == CHECKPOINTS_MODE:
            self._last_checkpoint = payload
        elif mode == "updates" and isinstance(payload, dict) and "__interrupt__" in payload:
            self._paused = True

    def after_run(self, run_metadata: dict) -> StateSnapshot:
        """The head after a run: taken from the run's last checkpoint when the run ended cleanly
        (nothing next, no interrupt), else loaded."""
        last, self._last_checkpoint = self._last_checkpoint, None
        if last is None or last["next"] or self._paused:
            return self.load()
        snapshot = StateSnapshot(
            values=last["values"],
            next=(),
            config=last["config"],
            metadata={**last["metadata"], **run_metadata},
            created_at=None,
            parent_config=last["parent_config"],
            tasks=(),
            interrupts=(),
        )
        return self._remember(snapshot)

    def _remember(self, snapshot: StateSnapshot) -> StateSnapshot:
        self._snapshot = snapshot
        return snapshot

    def _is_current(self, snapshot: StateSnapshot) -> bool:
        head = saver_of(self.graph).get_tuple(self.config)
        if head is None or head.pending_writes:
            return False
        return head.config["configurable"]["checkpoint_id"] == _checkpoint_id(snapshot)


def _checkpoint_id(snapshot: StateSnapshot) -> str | None:
    return snapshot.config["configurable"].get("checkpoint_id")
