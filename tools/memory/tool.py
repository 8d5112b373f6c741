"""The remember and recall tools: their argument models, the recall list the model reads, and a
busy database turned into a ToolError. They keep memory in the store the graph runs with
(`langgraph.config.get_store()`: the one Waypoint compiles its graphs with, or a server's)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from langchain_core.tools import BaseTool, StructuredTool
from langgraph.store.base import BaseStore
from pydantic import BaseModel, Field

from tools.errors import ToolError, ToolInputError
from tools.memory.graph_store import memory_of
from tools.memory.item import MemoryItem, user_label
from tools.memory.scoped import ScopedStore
from tools.memory.store import MAX_FACT_CHARS, MemoryStore
from tools.memory.text import clean_text

MAX_RECALL = 20
MemoryScope = Literal["none", "user"]


@contextlib.contextmanager
def memory_errors_as_tool_errors() -> Iterator[None]:
    """A database held by another writer past the busy timeout is for the model to work around."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc) and "busy" not in str(exc):
            raise
        raise ToolError(
            "long-term memory is busy (another Waypoint process is writing to it); "
            "try again in a moment, or carry on without it"
        ) from exc


class RememberArgs(BaseModel):
    fact: str = Field(
        description="One self-contained fact in plain words, e.g. 'The user's favourite colour "
        f"is teal' (at most {MAX_FACT_CHARS} characters)."
    )


class RecallArgs(BaseModel):
    query: str = Field(description="Words to look for, e.g. 'favourite colour'.")
    limit: int = Field(default=5, ge=1, le=MAX_RECALL, description="At most this many facts.")


def format_recall(query: str, items: Sequence[MemoryItem]) -> str:
    """A numbered list, best first, e.g. '1. The user's favourite colour is teal (saved 2025-01-31)'."""
    if not items:
        shown = clean_text(query)
        shown = shown if len(shown) <= 80 else shown[:79] + "…"
        return f"nothing remembered about '{shown}'"
    return "\n".join(
        f"{n}. {item.text} (saved {item.created_at:%Y-%m-%d})" for n, item in enumerate(items, 1)
    )


def run_store(scope: MemoryScope = "none") -> BaseStore:
    """The store of the graph run this tool call belongs to; with the scope `user`, seen under
    the engine's scope of the run's authenticated user, ("users", identity)."""
    from langgraph.config import get_config, get_store

    try:
        store = get_store()
    except (RuntimeError, KeyError):  # called outside a graph run
        store = None
    if store is None:
        raise ToolError(
            "long-term memory is not available in this run (its graph has no store); "
            "carry on without it"
        )
    if scope == "none":
        return store
    return scoped(store, ("users", authenticated_identity(get_config())))


def authenticated_identity(config: Mapping[str, Any]) -> str:
    """The identity of the user the engine authenticated for this run (LangGraph's
    `langgraph_auth_user`, or Aegra's `user_id`)."""
    configurable = config.get("configurable") or {}
    user = configurable.get("langgraph_auth_user")
    identity = user.get("identity") if isinstance(user, dict) else getattr(user, "identity", None)
    identity = identity or configurable.get("user_id")
    if not isinstance(identity, str) or not identity:
        raise ToolError(
            "long-term memory is scoped to the authenticated user (APP_MEMORY_SCOPE=user), but "
            "this run has none; carry on without it"
        )
    return identity


def scoped(store: BaseStore, prefix: tuple[str, ...]) -> BaseStore:
    """One view per store and prefix, so what memory_of keeps per store carries over."""
    with _scoping:
        try:
            views = _views.setdefault(store, {})
        except TypeError:  # a store that cannot be weakly referenced
            return ScopedStore(store, prefix)
        return views.setdefault(prefix, ScopedStore(store, prefix))


_views: weakref.WeakKeyDictionary[BaseStore, dict[tuple[str, ...], ScopedStore]] = (
    weakref.WeakKeyDictionary()
)
_scoping = threading.Lock()


def make_memory_tools(
    user: str, store: MemoryStore | BaseStore | None = None, scope: MemoryScope = "none"
) -> list[BaseTool]:
    """Build the remember and recall tools, bound to ``user``'s long-term memory in the store of
    the graph run that calls them (``store``: this one instead, for calls outside a graph), under
    the engine's scope of the authenticated user with ``scope`` `user`."""
    user_label(user)

    def memory() -> MemoryStore:
        return memory_of(store if store is not None else run_store(scope))

    def remember(fact: str) -> str:
        """Save a fact to long-term memory so it is available in later conversations and threads."""
        with memory_errors_as_tool_errors():
            item = memory().remember(user, fact)
        return f"{'already remembered' if item.existing else 'remembered'}: {item.text}"

    def recall(query: str, limit: int = 5) -> str:
        """Search long-term memory for facts saved in earlier conversations."""
        if not clean_text(query):
            raise ToolInputError(
                "the query is empty; give words to look for, e.g. 'favourite colour'"
            )
        with memory_errors_as_tool_errors():
            items = memory().recall(user, query, limit)
        return format_recall(query, items)

    return [
        StructuredTool.from_function(
            remember, args_schema=RememberArgs, metadata={"side_effects": True}
        ),
        StructuredTool.from_function(recall, args_schema=RecallArgs),
    ]
