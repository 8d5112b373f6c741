"""The same script with the official LangGraph Python SDK, unchanged, against two servers: Waypoint's
`serve` and LangGraph's own `langgraph dev` serving this repository's langgraph.json (issue 15).
Both are real processes on 127.0.0.1; the outcomes must be the same."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client

from bench.serve_speed import langgraph_dev as started_langgraph_dev
from graphs.strategies import STRATEGIES
from tests.sdk_scenario import answer, run_scenario, user
from tests.server_process import running_server

REPO = Path(__file__).resolve().parent.parent
LANGGRAPH = shutil.which("langgraph")
needs_langgraph_cli = pytest.mark.skipif(
    LANGGRAPH is None and not os.environ.get("WAYPOINT_REQUIRE_LANGGRAPH"),
    reason="langgraph dev is not installed: pip install -e '.[test]' (langgraph-cli[inmem])",
)


def with_notes(workspace: Path) -> Path:
    """The scenario overwrites notes.txt, which is what asks for approval."""
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "notes.txt").write_text("old")
    return workspace


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("serve")
    workspace = with_notes(tmp / "workspace")
    args = ("--db", str(tmp / "agent.sqlite"), "--workspace", str(workspace))
    with running_server(tmp, *args) as base:
        yield base, workspace


@pytest.fixture(scope="module")
def langgraph_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    assert LANGGRAPH, "langgraph-cli[inmem] is required here (WAYPOINT_REQUIRE_LANGGRAPH)"
    tmp = tmp_path_factory.mktemp("langgraph-dev")
    workspace = with_notes(tmp / "workspace")
    with started_langgraph_dev(tmp, workspace, os.environ) as (_, base):
        yield base, workspace


def expected_outcome(tag: str) -> dict:
    return {
        "graphs": sorted(strategy.graph_id for strategy in STRATEGIES.values()),
        "context_fields": [
            "approval",
            "max_iterations",
            "max_retries",
            "max_seconds",
            "max_tokens_per_turn",
            "max_trials",
            "model",
            "tools",
            "user",
        ],
        "created": ({"suite": tag, "kind": "math"}, "idle"),
        "modes": ["messages", "metadata", "updates", "values"],
        "first_answer": "6 * 7 = 42",
        "nodes": ["agent", "tools", "agent"],
        "streamed": "6 * 7 = 42",
        "second": ("2 + 2 = 4", 2, 2),
        "state": (2, [], []),
        "history_newest_first": True,
        "rewound": (1, "6 * 7 = 42"),
        "branch": ("10 - 3 = 7", 2, ["what is 6 times 7", "what is 10 minus 3"]),
        "paused": ("interrupted", "approval", "write_file"),
        "resumed": ("answered", "idle"),
        "background": ("3 * 3 = 9", "success"),
        "runs_listed": True,
        "search": [True],
        "store": ({"value": "green"}, ["colour"], True),
    }


def outcome_without_copy(seen: dict) -> dict:
    copy = seen.pop("copy")
    assert copy[0] and copy[1] == "10 - 3 = 7"
    return seen


def test_the_sdk_script_against_serve(serve: tuple[str, Path]):
    base, workspace = serve
    seen = run_scenario(base, "serve")
    assert outcome_without_copy(seen) == expected_outcome("serve")
    assert (workspace / "notes.txt").read_text() == "hi"


@needs_langgraph_cli
def test_the_same_sdk_script_against_langgraph_dev(langgraph_dev: tuple[str, Path]):
    base, workspace = langgraph_dev
    seen = run_scenario(base, "dev")
    assert outcome_without_copy(seen) == expected_outcome("dev")
    assert (workspace / "notes.txt").read_text() == "hi"


@needs_langgraph_cli
def test_langgraph_dev_shows_every_graphs_input_output_and_context_schemas(
    langgraph_dev: tuple[str, Path],
):
    """On Python 3.11 it can only with typing_extensions' TypedDict in the graphs' state."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=langgraph_dev[0])
    shown = {}
    for assistant in client.assistants.search(limit=20):
        schemas = client.assistants.get_schemas(assistant["assistant_id"])
        shown[assistant["graph_id"]] = [
            "messages" in (schemas["input_schema"] or {}).get("properties", {}),
            "status" in (schemas["output_schema"] or {}).get("properties", {}),
            (schemas["context_schema"] or {}).get("properties", {}).get("max_iterations"),
        ]
    assert sorted(shown) == expected_outcome("dev")["graphs"]
    max_iterations = {
        "anyOf": [{"maximum": 100, "minimum": 1, "type": "integer"}, {"type": "null"}],
        "default": 8,
        "description": "model steps per turn; omitted: the server's APP_MAX_ITERATIONS "
        "(8 unless set)",
        "title": "Max Iterations",
    }
    assert all(seen == [True, True, max_iterations] for seen in shown.values()), shown


def remember_and_recall(base: str, who: str) -> dict:
    """Remember a fact on one thread, find it through the store API, recall it on a new thread,
    edit it through the store API and recall the edit (issue 29)."""
    client = get_sync_client(url=base)
    context = {"model": "offline", "user": who}

    def turn(text: str) -> str:
        thread = client.threads.create()["thread_id"]
        return answer(client.runs.wait(thread, "waypoint", input=user(text), context=context))

    seen: dict = {"told": turn("remember that my favourite colour is green")}
    items = client.store.search_items(["memories", who])["items"]
    seen["stored"] = [item["value"]["text"] for item in items]
    seen["recalled"] = "green" in turn("do you remember my favourite colour?")
    client.store.put_item(
        ["memories", who], items[0]["key"], {"text": "my favourite colour is blue"}
    )
    seen["edited"] = "blue" in turn("do you remember my favourite colour?")
    return seen


@pytest.mark.parametrize(
    "server", ["serve", pytest.param("langgraph_dev", marks=needs_langgraph_cli)]
)
def test_the_agents_memory_is_in_the_servers_store(server: str, request: pytest.FixtureRequest):
    base, _ = request.getfixturevalue(server)
    assert remember_and_recall(base, f"memory-{server.replace('_', '-')}") == {
        "told": "Got it — your favourite colour is green.\nSaved to long-term memory.",
        "stored": ["my favourite colour is green"],
        "recalled": True,
        "edited": True,
    }
