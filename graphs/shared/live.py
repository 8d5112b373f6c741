"""From a run's context to the live objects the nodes use.

A run's context is either the application's `AgentContext` (live objects already made) or a
`RunSpec` (plain JSON data, from a LangGraph server's client). A RunSpec is resolved by the factory
the application registers (`set_resolver`; app/portable.py does for langgraph.json), once per
distinct spec in a process. graphs/ imports nothing from app/, hence the registration."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from graphs.spec import RunSpec
from graphs.state import AgentContext

# What a run passes as `context=`: the live objects, or their description as JSON data
RunContext = AgentContext | RunSpec
Resolver = Callable[[RunSpec], AgentContext]
_resolver: list[Resolver] = []


class NoResolverError(RuntimeError):
    """A run came with JSON context but no application registered how to make its live objects."""


def set_resolver(resolver: Resolver) -> None:
    """Register how a RunSpec becomes an AgentContext (replacing any earlier one)."""
    _resolver[:] = [resolver]
    _resolved.cache_clear()


def live_context(context: AgentContext | RunSpec | dict | None) -> AgentContext:
    """The live run context for `context` (None or {}: the default RunSpec)."""
    if isinstance(context, AgentContext):
        return context
    if context is None or isinstance(context, dict):
        context = RunSpec(**(context or {}))
    return _resolved(context)


def context_of(runtime: Runtime[Any]) -> AgentContext:
    """The live run context of a node's or router's runtime."""
    return live_context(runtime.context)


@functools.lru_cache(maxsize=32)
def _resolved(spec: RunSpec) -> AgentContext:
    if not _resolver:
        raise NoResolverError(
            "this run's context is JSON data (a RunSpec) and no application registered how to "
            "make its model and tools: import app.portable (langgraph.json's graphs do)"
        )
    return _resolver[0](spec)
