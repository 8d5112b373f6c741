"""Routers that also route a state edit. LangGraph applies `update_state(values, as_node=X)` by
running X's writers, X's router among them, with no Runtime (langgraph/pregel/main.py,
`bulk_update_state`), so a router that asks for one fails the edit. Each router is registered
through `edit_safe`: in a run it gets the run's runtime; in an edit, the default run context's."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime, get_runtime

from graphs.shared.live import NoResolverError, live_context
from graphs.state import AgentContext

Router = Callable[..., Any]


def edit_safe(router: Router) -> Router:
    """`router` as LangGraph should call it: with the state only (so LangGraph injects nothing and
    an edit needs no runtime), its `Literal` return type kept (it is the edge list)."""
    if len(inspect.signature(router).parameters) == 1:
        return router

    def route(state: Any) -> Any:
        return router(state, get_runtime() or edit_runtime())

    route.__name__ = route.__qualname__ = router.__name__
    route.__module__, route.__doc__ = router.__module__, router.__doc__
    # Resolved here: the router's module, not this one, names the types in its annotations.
    route.__annotations__ = {"return": typing.get_type_hints(router)["return"]}
    # The router stays reachable (inspect.unwrap); LangGraph reads the signature, state only.
    # Function attributes typeshed does not declare; inspect and LangGraph read them.
    route.__signature__ = inspect.signature(route)  # type: ignore[attr-defined]
    route.__wrapped__ = router  # type: ignore[attr-defined]
    return route


def edit_runtime() -> Runtime[AgentContext]:
    """What a router reads during a state edit: the limits a run without a context would have (the
    application's defaults once it registered how to make a context; else AgentContext's). An
    edit names no model, so nothing is asked of one; the next run routes with its own limits."""
    return Runtime(context=_default_context())


def _default_context() -> AgentContext:
    try:
        return live_context(None)
    except NoResolverError:
        return AgentContext(model=None)  # type: ignore[arg-type]  # limits only: no model is called
