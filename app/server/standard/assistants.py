"""Assistants: one per strategy, named like langgraph.json's graphs, with the ids LangGraph's own
server gives them (uuid5 of the graph name), so a client may name either."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from langgraph.graph.state import CompiledStateGraph
from pydantic import TypeAdapter
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError

from app.errors import NotFoundError
from graphs.strategies import STRATEGIES, drawing

# LangGraph's namespace for an assistant made from a graph (uuid5(namespace, graph id)).
GRAPH_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
GRAPH_IDS = {
    "react": "waypoint",
    "plan": "waypoint-plan",
    "reflexion": "waypoint-reflexion",
    "routed": "waypoint-routed",
}
STARTED = datetime.now(UTC).isoformat()


@dataclass(frozen=True)
class Assistant:
    graph_id: str
    strategy: str

    @property
    def assistant_id(self) -> str:
        return str(uuid.uuid5(GRAPH_NAMESPACE, self.graph_id))

    def graph(self) -> CompiledStateGraph:
        return STRATEGIES[self.strategy].build(None)

    def as_json(self) -> dict:
        return {
            "assistant_id": self.assistant_id,
            "graph_id": self.graph_id,
            "config": {},
            "context": {},
            "metadata": {"created_by": "system"},
            "name": self.graph_id,
            "description": STRATEGIES[self.strategy].summary,
            "created_at": STARTED,
            "updated_at": STARTED,
            "version": 1,
        }


ASSISTANTS = [Assistant(graph_id, strategy) for strategy, graph_id in GRAPH_IDS.items()]


def assistant(ref: str) -> Assistant:
    """The assistant with this id, or the one of this graph id."""
    for found in ASSISTANTS:
        if ref in (found.assistant_id, found.graph_id):
            return found
    names = ", ".join(a.graph_id for a in ASSISTANTS)
    raise NotFoundError(f"assistant {ref!r} does not exist; the graphs are: {names}")


def routes() -> APIRouter:
    api = APIRouter(tags=["assistants"])

    @api.post("/assistants/search")
    def search(body: Annotated[dict[str, Any] | None, Body()] = None) -> list[dict]:
        """Filter by `graph_id`, `name` or `metadata`; page with `limit` and `offset`."""
        body = body or {}
        found = [
            a.as_json()
            for a in ASSISTANTS
            if body.get("graph_id") in (None, a.graph_id)
            and body.get("name") in (None, a.graph_id)
            and _has(a.as_json()["metadata"], body.get("metadata") or {})
        ]
        offset, limit = int(body.get("offset") or 0), int(body.get("limit") or 10)
        return found[offset : offset + limit]

    @api.post("/assistants/count")
    def count(body: Annotated[dict[str, Any] | None, Body()] = None) -> int:
        return len(search({**(body or {}), "limit": len(ASSISTANTS), "offset": 0}))

    @api.get("/assistants/{assistant_id}")
    def get(assistant_id: str) -> dict:
        return assistant(assistant_id).as_json()

    @api.get("/assistants/{assistant_id}/graph")
    def graph(assistant_id: str, xray: Annotated[bool | int, Query()] = False) -> dict:
        """Nodes and edges, as LangGraph draws the compiled graph."""
        return drawing(assistant(assistant_id).graph()).to_json()

    @api.get("/assistants/{assistant_id}/schemas")
    def schemas(assistant_id: str) -> dict:
        found = assistant(assistant_id)
        return graph_schemas(found.graph_id, found.graph())

    @api.get("/assistants/{assistant_id}/subgraphs")
    @api.get("/assistants/{assistant_id}/subgraphs/{namespace}")
    def subgraphs(assistant_id: str, namespace: str | None = None, recurse: bool = False) -> dict:
        """The schemas of the graph's subgraphs, by namespace (a strategy's tool loop)."""
        found = assistant(assistant_id)
        return {
            name: graph_schemas(found.graph_id, subgraph)
            for name, subgraph in found.graph().get_subgraphs(namespace=namespace, recurse=recurse)
        }

    return api


def graph_schemas(graph_id: str, compiled: CompiledStateGraph) -> dict:
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


def state_jsonschema(graph: CompiledStateGraph) -> dict:
    """The state's fields from the graph's channels, each with its value type's schema where
    pydantic can make one ({} where it cannot: typing.TypedDict before Python 3.12)."""
    properties = {}
    for name, channel in graph.channels.items():
        if name.startswith(("__", "branch:")):
            continue
        try:
            schema = TypeAdapter(channel.ValueType).json_schema()
        except (PydanticUserError, PydanticSchemaGenerationError, TypeError, ValueError):
            schema = {}
        properties[name] = {"title": name.replace("_", " ").title(), **schema}
    return {"title": "state", "type": "object", "properties": properties}


def _has(metadata: dict, wanted: dict) -> bool:
    return all(metadata.get(k) == v for k, v in wanted.items())
