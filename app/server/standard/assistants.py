"""Assistants: one per strategy, named like langgraph.json's graphs, with the ids LangGraph's own
server gives them (uuid5 of the graph name), so a client may name either; and a client's own
(`POST /assistants`): a graph with a default run context, versioned, kept in the store."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query, Request, Response
from langgraph.channels.base import BaseChannel
from langgraph.pregel import Pregel
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError

from app.config import Settings
from app.errors import ConflictError, NotFoundError, UsageError
from app.service.memory import open_memory
from graphs.shared.skeleton import StrategyGraph
from graphs.spec import RunSpec
from graphs.strategies import STRATEGIES, drawing

# LangGraph's namespace for an assistant made from a graph (uuid5(namespace, graph id)).
GRAPH_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
GRAPH_IDS = {name: strategy.graph_id for name, strategy in STRATEGIES.items()}
STARTED = datetime.now(UTC).isoformat()


@dataclass(frozen=True)
class Assistant:
    graph_id: str
    strategy: str
    # a client's own assistant: its stored record (see `_record`); None for a graph's own
    record: dict | None = None

    @property
    def assistant_id(self) -> str:
        if self.record is not None:
            return self.record["assistant_id"]
        return str(uuid.uuid5(GRAPH_NAMESPACE, self.graph_id))

    @property
    def context(self) -> dict:
        """The run context its runs start from (a run's own context wins)."""
        return dict((self.record or {}).get("context") or {})

    def graph(self) -> StrategyGraph:
        return STRATEGIES[self.strategy].build(None)

    def as_json(self) -> dict:
        if self.record is not None:
            return {k: v for k, v in self.record.items() if k != "versions"}
        return {
            "assistant_id": self.assistant_id,
            "graph_id": self.graph_id,
            "config": {},
            "context": {},
            "metadata": {"created_by": "system", "strategy": self.strategy},
            "name": self.graph_id,
            "description": STRATEGIES[self.strategy].summary,
            "created_at": STARTED,
            "updated_at": STARTED,
            "version": 1,
        }


ASSISTANTS = [Assistant(graph_id, strategy) for strategy, graph_id in GRAPH_IDS.items()]
STRATEGY_OF = {graph_id: strategy for strategy, graph_id in GRAPH_IDS.items()}
STORED = ("waypoint", "assistants")  # the store namespace of the clients' own assistants
MAX_VERSIONS = 100  # kept per assistant; older versions are dropped


def assistant(ref: str, settings: Settings | None = None) -> Assistant:
    """The assistant with this id, or the one of this graph id; with `settings`, a client's own
    assistant (stored) too."""
    for found in ASSISTANTS:
        if ref in (found.assistant_id, found.graph_id):
            return found
    stored = _parsed(_load(settings, ref)) if settings is not None else None
    if stored is not None:
        return stored
    names = ", ".join(a.graph_id for a in ASSISTANTS)
    raise NotFoundError(f"assistant {ref!r} does not exist; the graphs are: {names}")


def graph_id_of(strategy: str) -> str:
    return GRAPH_IDS[strategy]


class AssistantCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    graph_id: str
    assistant_id: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]{1,64}$")
    config: dict | None = None
    context: dict | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    name: str | None = Field(None, max_length=200)
    description: str | None = Field(None, max_length=2000)


class AssistantPatch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    graph_id: str | None = None
    config: dict | None = None
    context: dict | None = None
    metadata: dict[str, Any] | None = None
    name: str | None = Field(None, max_length=200)
    description: str | None = Field(None, max_length=2000)


class AssistantSearch(BaseModel):
    """A search of the assistants as the SDKs send it (other fields are accepted and ignored)."""

    model_config = ConfigDict(extra="ignore")

    graph_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] | None = None
    limit: int = Field(10, ge=0, le=1000)
    offset: int = Field(0, ge=0)

    def matches(self, found: dict) -> bool:
        return (
            self.graph_id in (None, found["graph_id"])
            and self.name in (None, found["name"])
            and _has(found["metadata"], self.metadata or {})
        )


class VersionsQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")

    metadata: dict[str, Any] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)


class LatestVersion(BaseModel):
    model_config = ConfigDict(extra="ignore")

    version: int = Field(ge=1)


def routes() -> APIRouter:
    api = APIRouter(tags=["assistants"])

    def settings_of(request: Request) -> Settings:
        return request.app.state.settings

    @api.post("/assistants")
    def create(request: Request, body: AssistantCreate) -> dict:
        """A graph with a default run context (and name, metadata); version 1."""
        settings = settings_of(request)
        assistant_id = body.assistant_id or str(uuid.uuid4())
        existing = _load(settings, assistant_id)
        if existing is not None or assistant_id in {a.assistant_id for a in ASSISTANTS}:
            if body.if_exists == "do_nothing":
                return assistant(assistant_id, settings).as_json()
            raise ConflictError(f"assistant {assistant_id} already exists")
        now = _now()
        record = _version(
            {"assistant_id": assistant_id, "created_at": now},
            _graph_id(body.graph_id),
            body.name or "Untitled",
            body.description,
            _context(body.context, body.config),
            body.metadata or {},
            1,
        )
        _save(settings, {**record, "versions": [_as_version(record)]})
        return record

    @api.patch("/assistants/{assistant_id}")
    def update(request: Request, assistant_id: str, body: AssistantPatch) -> dict:
        """A new version with what the body changes; it becomes the latest."""
        settings = settings_of(request)
        current = _own(settings, assistant_id)
        versions = current["versions"]
        changed = body.context is not None or body.config is not None
        record = _version(
            current,
            _graph_id(body.graph_id) if body.graph_id else current["graph_id"],
            body.name if body.name is not None else current["name"],
            body.description if body.description is not None else current["description"],
            _context(body.context, body.config) if changed else current["context"],
            body.metadata if body.metadata is not None else current["metadata"],
            max(v["version"] for v in versions) + 1,
        )
        _save(settings, {**record, "versions": [*versions, _as_version(record)][-MAX_VERSIONS:]})
        return record

    @api.delete("/assistants/{assistant_id}", status_code=204)
    def delete(request: Request, assistant_id: str) -> Response:
        settings = settings_of(request)
        _own(settings, assistant_id)
        with open_memory(settings) as memory:
            memory.store.delete(STORED, assistant_id)
        return Response(status_code=204)

    @api.post("/assistants/{assistant_id}/versions")
    def versions(
        request: Request, assistant_id: str, body: Annotated[VersionsQuery | None, Body()] = None
    ) -> list[dict]:
        """Its versions, newest first (a graph's own assistant has one)."""
        body = body or VersionsQuery()
        found = assistant(assistant_id, settings_of(request))
        kept = (found.record or {}).get("versions") or [_as_version(found.as_json())]
        wanted = body.metadata or {}
        chosen = [v for v in reversed(kept) if _has(v["metadata"], wanted)]
        return chosen[body.offset : body.offset + body.limit]

    @api.post("/assistants/{assistant_id}/latest")
    def set_latest(request: Request, assistant_id: str, body: LatestVersion) -> dict:
        settings = settings_of(request)
        current = _own(settings, assistant_id)
        chosen = next((v for v in current["versions"] if v["version"] == body.version), None)
        if chosen is None:
            raise NotFoundError(f"assistant {assistant_id} has no version {body.version}")
        chosen = {k: v for k, v in chosen.items() if k != "created_at"}
        record = {**current, **chosen, "updated_at": _now()}
        _save(settings, record)
        return {k: v for k, v in record.items() if k != "versions"}

    @api.post("/assistants/search")
    def search(
        request: Request, body: Annotated[AssistantSearch | None, Body()] = None
    ) -> list[dict]:
        """Filter by `graph_id`, `name` or `metadata`; page with `limit` and `offset`."""
        body = body or AssistantSearch()
        found = [
            a.as_json()
            for a in [*ASSISTANTS, *_stored(settings_of(request))]
            if body.matches(a.as_json())
        ]
        return found[body.offset : body.offset + body.limit]

    @api.post("/assistants/count")
    def count(request: Request, body: Annotated[AssistantSearch | None, Body()] = None) -> int:
        wanted = body or AssistantSearch()
        every = [*ASSISTANTS, *_stored(settings_of(request))]
        return sum(wanted.matches(a.as_json()) for a in every)

    @api.get("/assistants/{assistant_id}")
    def get(request: Request, assistant_id: str) -> dict:
        return assistant(assistant_id, settings_of(request)).as_json()

    @api.get("/assistants/{assistant_id}/graph")
    def graph(
        request: Request, assistant_id: str, xray: Annotated[bool | int, Query()] = False
    ) -> dict:
        """Nodes and edges, as LangGraph draws the compiled graph."""
        return drawing(assistant(assistant_id, settings_of(request)).graph()).to_json()

    @api.get("/assistants/{assistant_id}/schemas")
    def schemas(request: Request, assistant_id: str) -> dict:
        found = assistant(assistant_id, settings_of(request))
        return graph_schemas(found.graph_id, found.graph())

    @api.get("/assistants/{assistant_id}/subgraphs")
    @api.get("/assistants/{assistant_id}/subgraphs/{namespace}")
    def subgraphs(
        request: Request, assistant_id: str, namespace: str | None = None, recurse: bool = False
    ) -> dict:
        """The schemas of the graph's subgraphs, by namespace (a strategy's tool loop)."""
        found = assistant(assistant_id, settings_of(request))
        return {
            name: graph_schemas(found.graph_id, subgraph)
            for name, subgraph in found.graph().get_subgraphs(namespace=namespace, recurse=recurse)
            if isinstance(subgraph, Pregel)  # a strategy's subgraphs are its own compiled graphs
        }

    return api


def graph_schemas(graph_id: str, compiled: Pregel[Any, Any, Any, Any]) -> dict:
    """A graph's schemas as LangGraph's server gives them (state fields as input and output)."""
    state = state_jsonschema(compiled)
    return {
        "graph_id": graph_id,
        "input_schema": state,
        "output_schema": state,
        "state_schema": state,
        "config_schema": None,
        "context_schema": compiled.get_context_jsonschema(),
    }


def state_jsonschema(graph: Pregel[Any, Any, Any, Any]) -> dict:
    """The state's fields from the graph's channels, each with its value type's schema where
    pydantic can make one ({} where it cannot: typing.TypedDict before Python 3.12)."""
    properties = {}
    for name, channel in graph.channels.items():
        if name.startswith(("__", "branch:")) or not isinstance(channel, BaseChannel):
            continue  # LangGraph's own channels; a managed value is no field of the state
        try:
            schema = TypeAdapter(channel.ValueType).json_schema()
        except (PydanticUserError, PydanticSchemaGenerationError, TypeError, ValueError):
            schema = {}
        properties[name] = {"title": name.replace("_", " ").title(), **schema}
    return {"title": "state", "type": "object", "properties": properties}


def _has(metadata: dict, wanted: dict) -> bool:
    return all(metadata.get(k) == v for k, v in wanted.items())


def _graph_id(graph_id: str) -> str:
    if graph_id not in STRATEGY_OF:
        raise NotFoundError(
            f"graph {graph_id!r} does not exist; the graphs are: {', '.join(GRAPH_IDS.values())}"
        )
    return graph_id


def _context(context: dict | None, config: dict | None) -> dict:
    """The assistant's run context (config.configurable's run settings count too), checked now."""
    configurable = (config or {}).get("configurable") or {}
    fields = RunSpec.__dataclass_fields__
    merged = {**{k: v for k, v in configurable.items() if k in fields}, **(context or {})}
    try:
        RunSpec(**merged)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"context: {problems}") from None
    return merged


def _version(
    base: dict,
    graph_id: str,
    name: str,
    description: str | None,
    context: dict,
    metadata: dict,
    version: int,
) -> dict:
    """An assistant's record as LangGraph's server answers it."""
    return {
        "assistant_id": base["assistant_id"],
        "graph_id": graph_id,
        "config": {},
        "context": context,
        "metadata": metadata,
        "name": name,
        "description": description,
        "created_at": base["created_at"],
        "updated_at": _now(),
        "version": version,
    }


def _as_version(record: dict) -> dict:
    keys = ("assistant_id", "graph_id", "config", "context", "metadata", "name", "description")
    return {**{k: record[k] for k in keys}, "version": record["version"], "created_at": _now()}


def _load(settings: Settings, assistant_id: str) -> dict | None:
    with open_memory(settings) as memory:
        item = memory.store.get(STORED, assistant_id)
    return dict(item.value) if item is not None else None


def _own(settings: Settings, assistant_id: str) -> dict:
    """A client's own assistant's record; a graph's own assistant cannot be changed."""
    if assistant_id in {a.assistant_id for a in ASSISTANTS} | set(GRAPH_IDS.values()):
        raise ConflictError(
            f"assistant {assistant_id} is a graph's own and cannot be changed; create one "
            "(POST /assistants) with the context you want"
        )
    found = _parsed(_load(settings, assistant_id))
    if found is None or found.record is None:
        raise NotFoundError(f"assistant {assistant_id!r} does not exist")
    return found.record


def _save(settings: Settings, record: dict) -> None:
    with open_memory(settings) as memory:
        memory.store.put(STORED, record["assistant_id"], record)


def _stored(settings: Settings) -> list[Assistant]:
    with open_memory(settings) as memory:
        items = memory.store.search(STORED, limit=10_000)
    found = [a for a in (_parsed(dict(i.value)) for i in items) if a is not None]
    return sorted(found, key=lambda a: str(a.as_json()["created_at"]))


def _parsed(record: dict | None) -> Assistant | None:
    """A stored record as an assistant; None for one that is not (the store is writable through
    its own API too, so a record is checked, not trusted)."""
    keys = {"assistant_id", "graph_id", "context", "metadata", "name", "created_at", "versions"}
    if not record or not keys <= set(record) or record["graph_id"] not in STRATEGY_OF:
        return None
    shapes = (("context", dict), ("metadata", dict), ("versions", list))
    if not all(isinstance(record[key], kind) for key, kind in shapes):
        return None
    return Assistant(record["graph_id"], STRATEGY_OF[record["graph_id"]], record)


def _now() -> str:
    return datetime.now(UTC).isoformat()
