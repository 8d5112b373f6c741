"""Long-term memory in the store a graph runs with (issue 29): a LangGraph InMemoryStore, a
PostgresStore, or Waypoint's own (IndexedStore over the checkpoint database), the same way for each:
the tools read `runtime.store`, the CLI passes its store to the graphs, searches rank by BM25."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

import app.portable as portable
import tools.memory.store as memory_module
from app.config import load_settings
from app.server.api import create_app
from app.service.runtime import open_runtime
from graphs.catalog import DEFAULT_STRATEGY, STRATEGY_NAMES
from tests.conftest import run_cli
from tools.errors import ToolError, ToolLimitError
from tools.memory import IndexedStore, MemoryStore, graph_store, make_memory_tools, memory_of

FACTS = [
    "The user's favourite colour is teal",
    "The user's favourite food is sushi",
    "The user works as a data engineer at Acme",
    "The user's sister lives in Oslo and likes sushi too",
]


@pytest.fixture(params=["in-memory", "postgres-store", "waypoint", "waypoint-postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseStore]:
    """A store as an engine hands it to a graph: LangGraph's InMemoryStore (`langgraph dev`), its
    PostgresStore (LangGraph's server, Aegra), or Waypoint's own on SQLite or PostgreSQL, as the
    CLI and serve compile with."""
    if request.param == "in-memory":
        yield InMemoryStore()
    elif request.param == "postgres-store":
        from langgraph.store.postgres import PostgresStore

        url = request.getfixturevalue("pg_url")
        with PostgresStore.from_conn_string(url) as postgres:
            postgres.setup()
            yield postgres
    else:
        where = request.getfixturevalue("pg_url") if request.param == "waypoint-postgres" else None
        with MemoryStore.open(where or tmp_path / "agent.sqlite") as memory:
            yield graph_store(memory)


def chat(store: BaseStore, thread: str, text: str, user: str = "alice") -> list:
    """One turn of the langgraph.json graph (RunSpec context, offline model) on `store`."""
    graph = portable.react.copy({"store": store, "checkpointer": InMemorySaver()})
    values = graph.invoke(
        {"messages": [{"role": "user", "content": text}]},
        {"configurable": {"thread_id": thread}},
        context={"model": "offline", "user": user},
    )
    return values["messages"]


def tool_results(messages: list) -> list[tuple[str, str]]:
    return [(m.name, m.content) for m in messages if isinstance(m, ToolMessage)]


def test_a_fact_remembered_in_one_thread_is_in_the_store_and_recalled_in_another(
    store: BaseStore,
):
    said = chat(store, "one", "remember that my favourite colour is green")
    assert tool_results(said) == [("remember", "remembered: my favourite colour is green")]
    [item] = store.search(("memories", "alice"))
    assert item.value["text"] == "my favourite colour is green"

    recalled = chat(store, "two", "do you remember my favourite colour?")
    [(name, content)] = tool_results(recalled)
    assert name == "recall" and content.startswith("1. my favourite colour is green (saved ")
    assert "green" in recalled[-1].content
    other = chat(store, "three", "do you remember my favourite colour?", user="bob")
    assert tool_results(other) == [("recall", "nothing remembered about 'my favourite colour'")]


def test_every_strategy_keeps_memory_in_the_store_it_runs_with():
    store = InMemoryStore()
    # react has its own test above; the tool loop runs as a subgraph in two of the others
    for name in (n for n in STRATEGY_NAMES if n != DEFAULT_STRATEGY):
        graph = getattr(portable, name).copy({"store": store, "checkpointer": InMemorySaver()})
        graph.invoke(
            {"messages": [{"role": "user", "content": f"remember that I like {name}"}]},
            {"configurable": {"thread_id": name}},
            context={"model": "offline", "user": "alice"},
        )
    stored = {item.value["text"] for item in store.search(("memories", "alice"))}
    assert stored == {"I like plan", "I like reflexion", "I like routed"}


def test_recall_ranks_the_best_match_first_in_every_store(store: BaseStore):
    memory = memory_of(store)
    for fact in FACTS:
        memory.remember("alice", fact)
    found = memory.recall("alice", "favourite food", limit=3)
    assert [item.text for item in found][:2] == [FACTS[1], FACTS[0]]
    assert found[0].score > found[1].score
    assert [item.text for item in memory.matching("alice", "sushi Oslo")] == [FACTS[3]]
    assert memory.count("memories", "alice") == 4
    assert memory.forget("alice", "sushi") == 2
    assert [item.text for item in memory.list("alice")] == [FACTS[2], FACTS[0]]


def test_a_store_without_an_embedding_index_ignores_the_query():
    """Why Waypoint ranks the listed items itself: LangGraph's stores (and `langgraph dev`'s) have no
    embedding index unless one is configured, and then `query` changes nothing."""
    store = InMemoryStore()
    for number, fact in enumerate(FACTS):
        store.put(("memories", "alice"), f"k{number}", {"text": fact})
    plain = [item.key for item in store.search(("memories", "alice"), query="favourite food")]
    assert plain == ["k0", "k1", "k2", "k3"]  # every item, in the store's own order
    ranked = memory_of(store).recall("alice", "favourite food", limit=2)
    assert [item.key for item in ranked] == ["k1", "k0"]


def test_the_listed_ranking_orders_as_waypoints_own_index(tmp_path: Path):
    foreign = memory_of(InMemoryStore())
    with MemoryStore.open(tmp_path / "agent.sqlite") as own:
        for fact in FACTS:
            own.remember("alice", fact)
            foreign.remember("alice", fact)
        for query in ("favourite food", "sushi", "data engineer Oslo", "colour teal", "acme"):
            expected = [item.key for item in own.recall("alice", query, limit=4)]
            assert [item.key for item in foreign.recall("alice", query, limit=4)] == expected


def test_limits_hold_in_a_foreign_store(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(memory_module, "MAX_MEMORIES_PER_USER", 3)
    memory = memory_of(InMemoryStore())
    for fact in FACTS[:3]:
        memory.remember("alice", fact)
    with pytest.raises(ToolLimitError, match="already holds 3 facts"):
        memory.remember("alice", FACTS[3])
    memory.remember("bob", FACTS[3])  # per user
    for turn in range(1, 8):
        memory.put("experiences", "alice", f"t:{turn}", f"turn {turn} about rivers")
    assert memory.prune("experiences", "alice", keep=4) == 3
    kept = [item.key for item in memory.list("alice", kind="experiences")]
    assert kept == ["t:7", "t:6", "t:5", "t:4"]


def test_waypoints_store_keeps_its_index_through_the_store_interface(tmp_path: Path):
    with MemoryStore.open(tmp_path / "agent.sqlite") as memory:
        store = IndexedStore(memory)
        store.put(("memories", "a.b".replace(".", "%2E")), "k1", {"text": FACTS[1]})
        store.put(("memories", "a%2Eb"), "k2", {"text": FACTS[0]})
        assert [item.text for item in memory.recall("a.b", "sushi")] == [FACTS[1]]
        hits = store.search(("memories", "a%2Eb"), query="favourite food")
        assert [(hit.key, hit.score > 0) for hit in hits] == [("k1", True), ("k2", True)]
        assert hits[0].score > hits[1].score
        assert [
            hit.key for hit in store.search(("memories", "a%2Eb"), query="food", offset=1)
        ] == []
        only_k2 = store.search(("memories", "a%2Eb"), query="favourite", filter={"text": FACTS[0]})
        assert [hit.key for hit in only_k2] == ["k2"]
        store.delete(("memories", "a%2Eb"), "k1")
        assert memory.count("memories", "a.b") == 1 and memory.recall("a.b", "sushi") == []
        store.put(("notes",), "n", {"x": 1})  # any other namespace: a plain item
        assert store.get(("notes",), "n").value == {"x": 1}
        asyncio.run(store.aput(("memories", "a%2Eb"), "k3", {"text": FACTS[2]}))
        found = asyncio.run(store.asearch(("memories", "a%2Eb"), query="engineer"))
        assert [item.key for item in found] == ["k3"]


def test_the_tools_outside_a_graph_run_without_a_store_say_so():
    remember, _ = make_memory_tools("alice")
    with pytest.raises(ToolError, match="not available in this run"):
        remember.invoke({"fact": "The user likes tea"})


def test_the_cli_runs_its_graphs_on_its_own_memory_store(isolated: Path):
    with open_runtime(load_settings(model="offline")) as runtime:
        session = runtime.session("s1")
        assert isinstance(session.graph.store, IndexedStore)
        assert session.graph.store.memory is runtime.memory
    said = run_cli(
        "chat", "-t", "c1", "--user", "carol", "-m", "remember that my favourite colour is green"
    )
    assert said.returncode == 0, said.stderr.decode()
    listed = json.loads(run_cli("memory", "list", "-u", "carol", "--json").stdout)
    assert [row["text"] for row in listed] == ["my favourite colour is green"]
    answer = run_cli(
        "chat", "-t", "c2", "--user", "carol", "-m", "do you remember my favourite colour?"
    )
    assert "my favourite colour is green" in answer.stdout.decode()
    experiences = run_cli("memory", "list", "-u", "carol", "--experiences", "--json").stdout
    assert [row["thread_id"] for row in json.loads(experiences)] == ["c2", "c1"]


def test_serves_store_api_ranks_a_users_memories_by_bm25(isolated: Path):
    client = TestClient(create_app(load_settings()), base_url="http://localhost")
    for number, fact in enumerate(FACTS):
        item = {"namespace": ["memories", "alice"], "key": f"k{number}", "value": {"text": fact}}
        assert client.put("/store/items", json=item).status_code == 204
    search = {"namespace_prefix": ["memories", "alice"], "query": "favourite food", "limit": 2}
    found = client.post("/store/items/search", json=search).json()["items"]
    assert [item["key"] for item in found] == ["k1", "k0"]
    assert found[0]["score"] > found[1]["score"] > 0
    with open_runtime(load_settings()) as runtime:  # the same data the graphs and the CLI read
        assert [item.key for item in runtime.memory.recall("alice", "sushi")] == ["k1", "k3"]


def test_the_calls_on_one_foreign_store_share_its_write_state_until_it_is_gone():
    """Every tool call asks `memory_of(runtime.store)`: their compound writes must be serialised by
    one lock and prune's counts carry over, and nothing may keep the store alive."""
    import gc
    import weakref

    from tools.memory.graph_store import _writes

    gc.collect()
    before = len(_writes)
    store = InMemoryStore()
    first, second = memory_of(store), memory_of(store)
    assert first._writing is second._writing and first._last_count is second._last_count
    gone = weakref.ref(store)
    del store, first, second
    gc.collect()
    assert gone() is None and len(_writes) <= before


def test_an_async_servers_store_serves_the_tools_as_langgraphs_server_runs_them(pg_url: str):
    """LangGraph's server and Aegra run graphs with `astream` on an AsyncPostgresStore: the sync
    tools run in worker threads, and the store's sync calls go through the server's event loop."""
    from langgraph.store.postgres.aio import AsyncPostgresStore

    async def turn(store: BaseStore, thread: str, text: str) -> list:
        graph = portable.react.copy({"store": store, "checkpointer": InMemorySaver()})
        values = await graph.ainvoke(
            {"messages": [{"role": "user", "content": text}]},
            {"configurable": {"thread_id": thread}},
            context={"model": "offline", "user": "alice"},
        )
        return tool_results(values["messages"])

    async def scenario() -> tuple:
        async with AsyncPostgresStore.from_conn_string(pg_url) as store:
            await store.setup()
            told = await turn(store, "one", "remember that my favourite colour is green")
            stored = [item.value["text"] for item in await store.asearch(("memories", "alice"))]
            recalled = await turn(store, "two", "do you remember my favourite colour?")
            return told, stored, recalled[0][1].split(" (saved ")[0]

    assert asyncio.run(scenario()) == (
        [("remember", "remembered: my favourite colour is green")],
        ["my favourite colour is green"],
        "1. my favourite colour is green",
    )


def test_with_the_user_scope_memory_lives_under_the_engines_scope_of_the_authenticated_user():
    """Aegra's store API keeps a user's items under ("users", identity): APP_MEMORY_SCOPE=user
    writes there, so the API (scoped the same way) finds them, and recall reads them back."""
    from langgraph.func import entrypoint

    store = InMemoryStore()
    remember, recall = make_memory_tools("alice", scope="user")

    @entrypoint(store=store)
    def turn(text: str) -> str:
        if text.startswith("remember"):
            return remember.invoke({"fact": "my favourite colour is green"})
        return recall.invoke({"query": "favourite colour"})

    config = {"configurable": {"user_id": "anonymous"}}
    assert turn.invoke("remember", config).startswith("remembered")
    [item] = store.search(("users", "anonymous", "memories"))
    assert item.namespace == ("users", "anonymous", "memories", "alice")
    assert "green" in turn.invoke("recall", config)
    assert store.search(("memories",)) == []  # nothing outside the scope
    with pytest.raises(ToolError, match="authenticated user"):
        turn.invoke("recall", {"configurable": {}})
