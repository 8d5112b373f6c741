"""The store API over long-term memory: items by namespace and key. Waypoint's own namespaces
(`memories` and `experiences`, then the user) go through the memory store, which keeps its search
index in step; their items need a text (`{"text": "…"}`). Any other namespace is a plain item."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response
from langgraph.store.base import Item
from pydantic import BaseModel, ConfigDict, Field

from app.errors import UsageError
from app.service.memory import open_memory
from tools.memory import MemoryStore

OWN = ("memories", "experiences")


class ItemPut(BaseModel):
    model_config = ConfigDict(extra="ignore")

    namespace: list[str] = Field(min_length=1, max_length=8)
    key: str = Field(min_length=1, max_length=512)
    value: dict[str, Any]


class ItemDelete(BaseModel):
    model_config = ConfigDict(extra="ignore")

    namespace: list[str] = Field(min_length=1, max_length=8)
    key: str = Field(min_length=1, max_length=512)


class ItemSearch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    namespace_prefix: list[str] = Field(default_factory=list)
    filter: dict[str, Any] | None = None
    query: str | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)


class NamespaceList(BaseModel):
    model_config = ConfigDict(extra="ignore")

    prefix: list[str] | None = None
    suffix: list[str] | None = None
    max_depth: int | None = None
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0)


def item_json(item: Item) -> dict:
    return {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }


def routes() -> APIRouter:
    api = APIRouter(tags=["store"])

    @api.put("/store/items", status_code=204)
    def put_item(request: Request, body: ItemPut) -> Response:
        with _memory(request) as memory:
            namespace = tuple(body.namespace)
            if _own(namespace):
                text = body.value.get("text")
                if not isinstance(text, str) or not text.strip():
                    raise UsageError(f'items of {namespace[0]} need a "text" value')
                fields = {k: v for k, v in body.value.items() if k not in ("text", "saved_at")}
                memory.put(namespace[0], namespace[1], body.key, text, **fields)
            else:
                memory.store.put(namespace, body.key, body.value)
        return Response(status_code=204)

    @api.get("/store/items")
    def get_item(
        request: Request,
        key: str,
        namespace: Annotated[str | None, Query()] = None,
    ) -> dict | None:
        """The item, or null when there is none (as LangGraph's server answers)."""
        path = tuple((namespace or "").split(".")) if namespace else ()
        with _memory(request) as memory:
            item = memory.store.get(path, key)
        return item_json(item) if item is not None else None

    @api.delete("/store/items", status_code=204)
    def delete_item(request: Request, body: ItemDelete) -> Response:
        namespace = tuple(body.namespace)
        with _memory(request) as memory:
            if _own(namespace):
                memory.delete(namespace[0], namespace[1], [body.key])
            else:
                memory.store.delete(namespace, body.key)
        return Response(status_code=204)

    @api.post("/store/items/search")
    def search_items(request: Request, body: Annotated[ItemSearch | None, Body()] = None) -> dict:
        body = body or ItemSearch()
        with _memory(request) as memory:
            items = memory.store.search(
                tuple(body.namespace_prefix),
                filter=body.filter,
                limit=body.limit,
                offset=body.offset,
            )
        words = (body.query or "").lower().split()
        matching = [i for i in items if all(w in str(i.value).lower() for w in words)]
        return {"items": [item_json(i) for i in matching]}

    @api.post("/store/namespaces")
    def list_namespaces(
        request: Request, body: Annotated[NamespaceList | None, Body()] = None
    ) -> dict:
        body = body or NamespaceList()
        with _memory(request) as memory:
            found = memory.store.list_namespaces(
                prefix=tuple(body.prefix) if body.prefix else None,
                suffix=tuple(body.suffix) if body.suffix else None,
                max_depth=body.max_depth,
                limit=body.limit,
                offset=body.offset,
            )
        return {"namespaces": [list(n) for n in found]}

    return api


def _own(namespace: tuple[str, ...]) -> bool:
    return len(namespace) == 2 and namespace[0] in OWN


@contextlib.contextmanager
def _memory(request: Request) -> Iterator[MemoryStore]:
    with open_memory(request.app.state.settings) as memory:
        yield memory
