"""The runtime (database, memory, run context) each run worker thread keeps open for its next run
with the same settings, as the REPL keeps one for all its turns: opening the two SQLite connections
and building the context again for every run was ~0.7 ms of CPU (~4 % of serve's at 8 clients)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from typing import NamedTuple

from app.config import Settings
from app.db.sqlite_delta import Loaded
from app.service.runtime import Runtime, open_runtime
from graphs.run_settings import ApprovalPolicy

_THREADS = threading.local()
# DeltaChannel histories the saver of a kept runtime keeps (app/db/sqlite_delta.Loaded: 64 by
# default, for the REPL's one runtime). Each worker thread keeps a runtime, and 64 each held many
# threads' messages: serve's RSS after 2,000 runs on 200 threads was 1.15x its RSS after 100;
# 1.11x with 32, at the same CPU per run (8 cost ~1 ms more per run at 8 clients)
KEPT_HISTORIES = 32


class KeptRuntime(NamedTuple):
    settings: Settings
    policy: ApprovalPolicy | None
    opened: contextlib.ExitStack
    runtime: Runtime


@contextlib.contextmanager
def kept_runtime(settings: Settings, policy: ApprovalPolicy | None) -> Iterator[Runtime]:
    """`open_runtime(settings, approval=policy)`, kept open on this thread for its next run with the
    same settings and policy. A run that raised closes it (nothing of a failed run is reused); so
    does a run with other settings. With MCP servers the runtime is opened and closed per run as
    before (keeping their processes per thread is not measured)."""
    if settings.mcp_config is not None:
        with open_runtime(settings, approval=policy) as runtime:
            yield runtime
        return
    kept = getattr(_THREADS, "kept", None)
    if kept is not None and (kept.settings != settings or kept.policy != policy):
        close_kept_runtime()
        kept = None
    if kept is None:
        opened = contextlib.ExitStack()
        runtime = opened.enter_context(open_runtime(settings, approval=policy))
        _bound_histories(runtime)
        kept = _THREADS.kept = KeptRuntime(settings, policy, opened, runtime)
    try:
        yield kept.runtime
    except BaseException:
        close_kept_runtime()
        raise
    _release_page_caches(kept.runtime)


def close_kept_runtime() -> None:
    """Close the runtime this thread keeps (its run failed, or the thread ends)."""
    kept, _THREADS.kept = getattr(_THREADS, "kept", None), None
    if kept is not None:
        kept.opened.close()


def _bound_histories(runtime: Runtime) -> None:
    if "loaded_histories" in dir(type(runtime.saver)):  # SQLite's saver (app/db/sqlite.py)
        runtime.saver.loaded_histories = Loaded(entries=KEPT_HISTORIES)  # type: ignore[attr-defined]


def _release_page_caches(runtime: Runtime) -> None:
    """Free the page caches of the kept SQLite connections between runs (`PRAGMA shrink_memory`):
    each grows to 2 MB over many threads' pages (serve's RSS after 2,000 runs on 200 threads was
    1.15x its RSS after 100 with them, 1.09x before the runtime was kept), and another connection's
    write empties it anyway. No CPU cost measured (13.3/13.5 against 12.9/13.5 ms per run)."""
    store = getattr(runtime.memory, "store", None)
    for connection in (getattr(runtime.database, "connection", None), getattr(store, "conn", None)):
        if isinstance(connection, sqlite3.Connection):
            connection.execute("PRAGMA shrink_memory")
