"""A run's settings have one path: each is defined once (graphs/run_settings.py), a setting a run's
context leaves out takes the environment's value (APP_*) and a value it sets wins — the same for a
graph served from langgraph.json (app/portable.py), for serve and for the CLI."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import ValidationError

from app import portable
from app.config import Settings, load_settings
from app.models.window import forget_windows
from app.server.api import create_app
from app.server.errors import ForbiddenError
from app.server.standard.runs import _runtime, approval_policy
from app.service.context import LIMITS, make_context
from graphs.catalog import STRATEGY_NAMES
from graphs.run_settings import DEFAULTS, RunSettings
from graphs.shared.live import set_resolver
from graphs.spec import RunSpec
from graphs.state import AgentContext
from tests.conftest import run_cli
from tests.openai_server import OpenAIServer
from tests.openai_server import openai_server as openai_server  # the fixture
from tests.overflow_replies import advertise_vllm

ENVIRONMENT = {"APP_MAX_ITERATIONS": "1", "APP_MAX_RETRIES": "1", "APP_MAX_TRIALS": "2"}
QUESTION = "what is 6 times 7"  # the offline model answers it in two model steps


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """APP_* settings other than the defaults, and no live context left from another test."""
    for name, value in {**ENVIRONMENT, "APP_USER": "alice"}.items():
        monkeypatch.setenv(name, value)
    set_resolver(portable.resolve)  # forgets the live contexts made in earlier tests
    yield
    set_resolver(portable.resolve)


def limits_and_user(context: AgentContext) -> tuple[int, int, int, str]:
    return context.max_iterations, context.max_retries, context.max_trials, memory_user(context)


def memory_user(context: AgentContext) -> str:
    """Whose memory the context's memory tools use: the namespace a fact is saved under in the
    store of the graph run that calls them."""
    from langgraph.func import entrypoint
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()

    @entrypoint(store=store)
    def save(_: dict) -> None:
        context.tools_by_name["remember"].invoke({"fact": "The user's favourite is green"})

    save.invoke({})
    [(kind, user)] = store.list_namespaces()
    assert kind == "memories"
    return user


# --- one definition -------------------------------------------------------------------------


def test_the_context_the_settings_and_the_live_context_are_made_from_one_definition():
    per_run = {f.name for f in dataclasses.fields(RunSpec)} - {"tools"}
    assert per_run <= set(RunSettings.model_fields) <= set(Settings.model_fields)
    for name in per_run:  # a left-out field is None: the environment's value stands
        assert getattr(RunSpec(), name) is None
        defined = RunSettings.model_fields[name]
        field = RunSpec.__pydantic_fields__[name]
        assert field.annotation == defined.annotation | None, name
        assert (field.metadata, field.description.split(";")[0]) == (
            defined.metadata,
            defined.description.split(";")[0],
        )
    context = {f.name: f.default for f in dataclasses.fields(AgentContext) if f.name in LIMITS}
    # a live context made without settings (the graph tests') has no message budget
    assert context.pop("context_tokens") is None
    assert context == {name: getattr(DEFAULTS, name) for name in context}
    assert set(LIMITS) >= {"max_iterations", "max_retries", "max_trials", "max_seconds"}


@pytest.mark.parametrize(
    ("name", "value"),
    [("max_iterations", 0), ("max_retries", 21), ("max_trials", 11), ("user", "../etc")],
)
def test_a_bound_holds_alike_for_the_context_and_the_environment(name: str, value: object):
    with pytest.raises(ValidationError, match=name):
        RunSpec(**{name: value})
    with pytest.raises(ValidationError, match=name):
        Settings(**{name: value})


def test_the_run_context_schema_shows_the_environments_defaults_and_says_so():
    schema = portable.react.get_context_jsonschema()["properties"]
    assert schema["max_iterations"]["default"] == 8
    assert schema["max_iterations"]["description"] == (
        "model steps per turn; omitted: the server's APP_MAX_ITERATIONS (8 unless set)"
    )
    assert schema["max_seconds"]["default"] is None  # no limit unless APP_MAX_SECONDS says
    assert all(field.get("description") for field in schema.values())


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_every_graph_has_its_input_output_and_context_schemas(strategy: str):
    """pydantic makes them only from typing_extensions' TypedDict on Python 3.11 (langgraph dev's
    assistants.get_schemas asks for them)."""
    graph = getattr(portable, strategy)
    for schema in (graph.get_input_jsonschema(), graph.get_output_jsonschema()):
        assert {"messages", "turn", "status"} <= set(schema["properties"])
    assert "max_iterations" in graph.get_context_jsonschema()["properties"]


# --- langgraph.json (app/portable.py) ---------------------------------------------------------


def test_the_environment_reaches_a_langgraph_json_graph_where_the_context_leaves_a_setting_out(
    environment: None,
):
    assert limits_and_user(portable.resolve(RunSpec())) == (1, 1, 2, "alice")

    graph = portable.react.copy(update={"checkpointer": InMemorySaver()})
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [{"role": "user", "content": QUESTION}]}, config, context={})
    values = graph.get_state(config).values
    assert (values["iteration"], values["status"]) == (1, "max_iterations")


def test_a_langgraph_json_context_value_wins_over_the_environment(environment: None):
    chosen = RunSpec(max_iterations=5, max_retries=4, max_trials=3, user="bob")
    assert limits_and_user(portable.resolve(chosen)) == (5, 4, 3, "bob")

    graph = portable.react.copy(update={"checkpointer": InMemorySaver()})
    config = {"configurable": {"thread_id": "t"}}
    message = {"messages": [{"role": "user", "content": QUESTION}]}
    graph.invoke(message, config, context={"max_iterations": 5})
    assert graph.get_state(config).values["messages"][-1].content == "6 * 7 = 42"


# --- serve -------------------------------------------------------------------------------------


def test_serve_runs_take_the_environment_where_the_context_leaves_a_setting_out(
    environment: None,
):
    settings = load_settings()
    with _runtime(settings, RunSpec(), "ask") as runtime:
        assert limits_and_user(runtime.context) == (1, 1, 2, "alice")
    with _runtime(settings, RunSpec(max_iterations=5, user="bob"), "ask") as runtime:
        assert limits_and_user(runtime.context) == (5, 1, 2, "bob")

    client = TestClient(create_app(settings), base_url="http://localhost")
    outcomes = []
    for thread, context in (("left-out", {}), ("chosen", {"max_iterations": 5})):
        client.post("/threads", json={"thread_id": thread})
        message = {"messages": [{"role": "user", "content": QUESTION}]}
        run = {"assistant_id": "waypoint", "input": message, "context": context}
        values = client.post(f"/threads/{thread}/runs/wait", json=run).json()
        outcomes.append((values["iteration"], values["status"]))
    assert outcomes == [(1, "max_iterations"), (2, "answered")]


def test_serve_auto_approves_only_when_started_so(monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(ForbiddenError, match="--approve auto"):
        approval_policy(load_settings(), RunSpec(approval="auto"))
    assert approval_policy(load_settings(), RunSpec()) == "ask"
    assert approval_policy(load_settings(approve="auto"), RunSpec()) == "auto"
    assert approval_policy(load_settings(approve="auto"), RunSpec(approval="never")) == "never"
    monkeypatch.setenv("APP_APPROVE", "auto")  # the environment's name for it
    assert approval_policy(load_settings(), RunSpec(approval="auto")) == "auto"


# --- the CLI -----------------------------------------------------------------------------------


def chat_status(*flags: str) -> tuple[str, str]:
    result = run_cli("chat", *flags, "--jsonl", "-m", QUESTION)
    final = json.loads(result.stdout.decode().splitlines()[-1])
    # Only an answered turn is a success (app/service/outcome.py).
    assert result.returncode == (0 if final["status"] == "answered" else 1), result.stderr.decode()
    return final["status"], final.get("answer") or ""


def test_the_cli_takes_the_environment_and_its_flags_win(environment: None):
    assert chat_status("-t", "left-out")[0] == "max_iterations"
    status, text = chat_status("-t", "chosen", "--max-iterations", "5")
    assert (status, "42" in text) == ("answered", True)


def remembered(user: str) -> list[str]:
    listed = run_cli("memory", "list", "--user", user, "--json")
    return [item["text"] for item in json.loads(listed.stdout)]


def test_the_cli_takes_the_memory_user_and_the_trials_from_the_environment_unless_flagged(
    environment: None, monkeypatch: pytest.MonkeyPatch
):
    for name in ("APP_MAX_ITERATIONS", "APP_MAX_RETRIES"):  # room for a tool call and its answer
        monkeypatch.delenv(name)
    run_cli("chat", "-t", "a", "-m", "remember that my favourite colour is green")
    run_cli("chat", "-t", "b", "--user", "bob", "-m", "remember that my favourite food is soup")
    assert (remembered("alice"), remembered("bob")) == (
        ["my favourite colour is green"],
        ["my favourite food is soup"],
    )

    reflexion = ("chat", "--strategy", "reflexion", "-m", "read gone.txt")
    from_environment = run_cli(*reflexion, "-t", "rx").stderr.decode()
    assert "attempt 2/2" in from_environment and "attempt 3" not in from_environment
    assert "attempt 3/3" in run_cli(*reflexion, "-t", "rx3", "--max-trials", "3").stderr.decode()


def test_a_flag_outside_its_bounds_is_a_usage_error_naming_it():
    zero = run_cli("chat", "-t", "b", "--max-seconds", "0", "-m", "hi")
    assert zero.returncode == 2
    assert "invalid --max-seconds: Input should be greater than 0" in zero.stderr.decode()
    assert run_cli("chat", "-t", "b", "--max-iterations", "0", "-m", "hi").returncode == 2


# --- the model's reply size in the context-window budget --------------------------------------


@pytest.fixture
def endpoint(openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    advertise_vllm(openai_server, "smollm2", 8192)
    forget_windows()
    yield "openai:smollm2"
    forget_windows()


def test_the_configured_reply_size_reaches_the_context_window_budget(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
):
    assert make_context(load_settings(model=endpoint)).window.reply_tokens is None  # its guess
    forget_windows()
    monkeypatch.setenv("APP_MAX_OUTPUT_TOKENS", "1000")
    window = make_context(load_settings(model=endpoint)).window
    assert (window.tokens, window.reply_tokens) == (8192, 1000)
