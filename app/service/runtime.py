"""The one place a run is assembled: the checkpoint database, long-term memory, the MCP servers' tools,
the run context (model, tools, limits, approval policy) and a thread's session on its own strategy's
graph. The one-shot `chat`, the REPL, `replay` and the HTTP server all open their runs here, so a
replayed turn has the same tools as the turn it replays."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver

from app.config import Settings
from graphs.run_settings import ApprovalPolicy

if TYPE_CHECKING:
    from app.db.base import Database
    from app.service.session import ChatSession
    from graphs.state import AgentContext
    from tools.memory import MemoryStore


@dataclass(frozen=True)
class Runtime:
    """What every turn of a process shares: open until the `open_runtime` block ends."""

    settings: Settings
    database: Database
    memory: MemoryStore
    user: str
    context: AgentContext

    @property
    def saver(self) -> BaseCheckpointSaver:
        return self.database.saver

    def session(self, thread_id: str, strategy: str | None = None) -> ChatSession:
        """A thread's session (its own strategy's graph unless `strategy` overrides it)."""
        from app.service.session import ChatSession

        return ChatSession(
            self.settings,
            self.saver,
            thread_id,
            self.context,
            memory=self.memory,
            user=self.user,
            strategy=strategy,
        )


@contextlib.contextmanager
def open_runtime(
    settings: Settings,
    *,
    approval: ApprovalPolicy | None = None,
    model: BaseChatModel | None = None,
) -> Iterator[Runtime]:
    """Open the database, the memory and the MCP servers of `settings`, and build the run context
    with `approval` as its policy (default: the settings'); all closed when the block ends."""
    from app.db import open_database
    from app.service.context import make_context
    from app.service.mcp_tools import open_mcp_tools
    from app.service.memory import memory_user, open_memory
    from tools import default_tools

    # the MCP tools' names must not shadow the built-in ones (only worth building them to know)
    builtin = {t.name for t in default_tools(settings.workspace)} if settings.mcp_config else set()
    with (
        open_database(settings.database, settings.busy_timeout) as database,
        open_memory(settings) as memory,
        open_mcp_tools(settings.mcp_config, reserved_names=builtin) as extra_tools,
    ):
        user = memory_user(settings)
        context = make_context(
            settings, model, approval=approval, memory=True, user=user, extra_tools=extra_tools
        )
        yield Runtime(settings, database, memory, user, context)


# Allocations between two collections of the youngest objects (CPython's default is 700).
YOUNG_COLLECTION_EVERY = 10_000
# glibc's malloc arenas a long-lived process may use (glibc's default: 8 per core).
MALLOC_ARENAS = 2
M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h


def settle_process() -> None:
    """What a long-lived process (the REPL, the server, the benchmark's workers) does once it is set
    up: `settle_heap`, and its graph runs reuse thread pools (app/service/pools.py)."""
    from app.service.pools import reuse_run_pools

    settle_heap()
    reuse_run_pools()


def settle_heap() -> None:
    """For a long-lived process (the REPL, the server, the benchmark's workers) once it is set up:
    what exists now (modules, compiled graphs, the model, the tools) lives as long as the process,
    so it is taken out of the garbage collector's scans (`gc.freeze`), and the youngest objects are
    collected every 10,000 allocations instead of 700. The collector's share of a turn went from
    ~1.0 to ~0.25 ms (timed with gc.callbacks over a bench worker's turns). Call it once: the
    objects alive at the call are kept for good, so a cycle among them is never freed. Also
    `limit_malloc_arenas`."""
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, 10, 10)
    limit_malloc_arenas()


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Have glibc's malloc use at most `arenas` arenas from now on, unless MALLOC_ARENA_MAX or
    GLIBC_TUNABLES says otherwise. Each new thread (serve runs each run on its own) gets an arena of
    its own up to 8 per core, and what a run frees in one stays there as free space: serve's RSS
    after 2,000 runs on one thread rose ~4 MiB less with 2 (5 runs: 1.21-1.23x -> 1.18-1.20x its
    RSS after 100; Python holds the GIL, so its threads seldom wait on one another's malloc).
    True when the limit was set; nothing where there is no glibc."""
    if "MALLOC_ARENA_MAX" in os.environ or "arena_max" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    mallopt = _libc_function("mallopt")
    return mallopt is not None and mallopt(M_ARENA_MAX, arenas) == 1


def tidy_heap() -> None:
    """For a long-lived process that has just finished a piece of work and has nothing running:
    give the memory the C heap holds free back to the system (glibc's `malloc_trim`; nothing where
    there is none). A run's transient objects (its state's JSON, its step's buffers) otherwise stay
    in the process's resident memory as free space (serve: ~10 MB after 400 runs on one thread).
    ~0.3 ms. No garbage collection here: a full one scans everything imported after `settle_heap`
    froze the heap (LangGraph's modules load with the first run), ~50 ms."""
    trim = _libc_function("malloc_trim")
    if trim is not None:
        trim(0)


@functools.cache
def _libc_function(name: str) -> Callable[..., int] | None:
    """One of glibc's malloc functions, or None where there is none."""
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):  # not glibc (macOS, musl): its allocator is left as it is
        return None
