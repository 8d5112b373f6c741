"""Waypoint's graphs for any server that serves `langgraph.json` (`langgraph dev`, LangGraph
Studio, a LangGraph-API server with PostgreSQL): one compiled graph per strategy, and the factory
that turns a run's JSON context (graphs/spec.RunSpec) into its live model and tools.

Such a server brings its own checkpointer and store, so the graphs are compiled without one; the
memory tools keep long-term memory in that store, under ("memories", user). Its client sends plain
data — `{"context": {"model": "offline", "approval": "ask"}}` — and every run with the same
context shares one set of live objects in the process (graphs/shared/live.py). The settings a
RunSpec leaves out come from the environment (APP_*, OPENAI_BASE_URL, …) as in the CLI and serve
(Settings.with_run).
Tests register a scripted model under a name a RunSpec can then choose (`register_model`)."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from app.config import load_settings
from app.service.context import only_tools
from graphs.shared.guarded_writes import guard_copies
from graphs.shared.live import set_resolver
from graphs.shared.skeleton import StrategyGraph
from graphs.spec import RunSpec
from graphs.state import AgentContext
from graphs.strategies import STRATEGIES

_registered_models: dict[str, BaseChatModel] = {}


def register_model(name: str, model: BaseChatModel) -> None:
    """Make `model` the one a RunSpec naming `name` gets (for tests and embedding)."""
    _registered_models[name] = model
    set_resolver(resolve)  # forget live contexts made with an earlier registration


def resolve(spec: RunSpec) -> AgentContext:
    """The live run context of `spec`: the environment's settings with what `spec` chose."""
    from app.service.context import make_context
    from app.service.memory import memory_user

    settings = load_settings().with_run(spec)
    user = memory_user(settings)
    registered = _registered_models.get(settings.model or "")
    approval = settings.approval or "ask"  # a server's default: the run pauses with an interrupt
    context = make_context(settings, registered, approval=approval, memory=True, user=user)
    return only_tools(context, spec.tools)


set_resolver(resolve)

# The graphs langgraph.json and aegra.json name, one per strategy under its own name (`react` is
# served as `waypoint`); the servers read them with getattr, so they need not be written out here.
# A server copies each with its checkpointer for a run; the copy guards that saver's writes from the
# run's first checkpoint on (graphs/shared/guarded_writes.py).
GRAPHS: dict[str, StrategyGraph] = {
    name: guard_copies(s.build(None)) for name, s in STRATEGIES.items()
}
globals().update(GRAPHS)
