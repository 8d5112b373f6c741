"""What a strategy is (`Strategy`) and the strategies' names, found without importing them: each
package under graphs/ with a `strategy.py` module is one strategy of that name. Cheap to import, so
the CLI's --help and the settings know the names without LangGraph; graphs/strategies.py loads them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.messages import ToolCall
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from graphs.shared.skeleton import StrategyGraph

DEFAULT_STRATEGY = "react"
STRATEGY_MODULE = "strategy"  # graphs/<name>/strategy.py defines STRATEGY


def _no_calls(values: dict) -> list[ToolCall]:
    return []


@dataclass(frozen=True, kw_only=True)
class Strategy:
    """One strategy: its name (its package's), the graph id deployment files and the server's
    assistants give it, a one-line summary, and how its graph is built."""

    name: str
    graph_id: str
    summary: str
    build: Callable[[BaseCheckpointSaver | None], StrategyGraph]
    # The per-turn fields a new turn's input resets, besides AgentState's own.
    turn_reset: Mapping[str, Any] = field(default_factory=dict)
    # Nodes that run the tool loop as a subgraph (drawn as a second diagram).
    subgraph_nodes: tuple[str, ...] = ()
    # The node before which `replay` asks about re-running side-effect tools (None: the calls are
    # asked one by one through the approval interrupt, for tools that run inside a subgraph),
    # and the calls that node is about to run.
    replay_gate: str | None = None
    gate_calls: Callable[[dict], list[ToolCall]] = _no_calls


def _discovered() -> tuple[str, ...]:
    """The packages with a strategy module: the default first, then by name."""
    found = {
        entry.name
        for entry in files("graphs").iterdir()
        if entry.is_dir() and entry.joinpath(f"{STRATEGY_MODULE}.py").is_file()
    }
    return (DEFAULT_STRATEGY, *sorted(found - {DEFAULT_STRATEGY}))


STRATEGY_NAMES: tuple[str, ...] = _discovered()
