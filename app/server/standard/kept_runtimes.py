"""The runtime (database, memory, run context) each run worker thread keeps open for its next run
with the same settings, as the REPL keeps one for all its turns: opening the two SQLite connections
and building the context again for every run was ~0.7 ms of CPU (~4 % of serve's at 8 clients)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import NamedTuple

from app.config import Settings
from app.service.runtime import Runtime, open_runtime
from graphs.run_settings import ApprovalPolicy

_THREADS = threading.local()


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
        kept = _THREADS.kept = KeptRuntime(settings, policy, opened, runtime)
    try:
        yield kept.runtime
    except BaseException:
        close_kept_runtime()
        raise


def close_kept_runtime() -> None:
    """Close the runtime this thread keeps (its run failed, or the thread ends)."""
    kept, _THREADS.kept = getattr(_THREADS, "kept", None), None
    if kept is not None:
        kept.opened.close()
