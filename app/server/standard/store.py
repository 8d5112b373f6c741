"""The store API over the store Waypoint's graphs run with (tools.memory.IndexedStore): items by
namespace and key. In Waypoint's own namespaces (`memories` and `experiences`, then the user) the
store keeps its search index in step and ranks a search with a `query` by BM25; their items need a
text (`{"text": "…"}`). Any other namespace is a plain item."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response
from langgraph.store.base import BaseStore, Item
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from app.errors import NotFoundError, UsageError
from app.server.users import Caller, CurrentUser
from app.service.memory import open_memory
from tools.memory import graph_store
from tools.memory.graph_store import KINDS, memory_namespace

# A namespace label as LangGraph's stores take it: not empty, no "." (the separator of paths).
Label = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^.]+$")]
# A filter: {"field": value} or {"field": {"$op": value}}, on plain field names (a JSON path of
# names); stores build queries from these, so nothing else reaches them.
FILTER_KEY = re.compile(r"^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,7}$")
FILTER_OPS = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"}
Scalar = str | int | float | bool | None
MAX_NAMESPACES = 10_000  # a users-file server lists at most this many, then keeps the caller's


class ItemPut(BaseModel):
    model_config = ConfigDict(extra="ignore")

    namespace: list[Label] = Field(min_length=1, max_length=8)
    key: str = Field(min_length=1, max_length=512)
    value: dict[str, Any]


class ItemDelete(BaseModel):
    model_config = ConfigDict(extra="ignore")

    namespace: list[Label] = Field(min_length=1, max_length=8)
    key: str = Field(min_length=1, max_length=512)


class ItemSearch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    namespace_prefix: list[Label] = Field(default_factory=list, max_length=8)
    filter: dict[str, Any] | None = None
    query: str | None = Field(None, max_length=2000)
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)

    @field_validator("filter")
    @classmethod
    def _plain_filter(cls, found: dict[str, Any] | None) -> dict[str, Any] | None:
        for key, condition in (found or {}).items():
            if not FILTER_KEY.match(key):
                raise ValueError(f"filter field {key[:80]!r}: use letters, digits, _ and -")
            tests = condition if isinstance(condition, dict) else {"$eq": condition}
            for op, value in tests.items():
                if op not in FILTER_OPS or not isinstance(value, Scalar):
                    raise ValueError(
                        f"filter {key!r}: a value or {{op: value}} with op one of "
                        f"{', '.join(sorted(FILTER_OPS))} and a plain value"
                    )
        return found


class NamespaceList(BaseModel):
    model_config = ConfigDict(extra="ignore")

    prefix: list[Label] | None = Field(None, max_length=8)
    suffix: list[Label] | None = Field(None, max_length=8)
    max_depth: int | None = Field(None, ge=1, le=8)
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0)


def item_json(item: Item) -> dict:
    found = {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }
    score = getattr(item, "score", None)
    return found if score is None else found | {"score": round(score, 6)}


router = APIRouter(tags=["store"])


@router.put("/store/items", status_code=204)
def put_item(request: Request, caller: CurrentUser, body: ItemPut) -> Response:
    namespace = callers_namespace(caller, tuple(body.namespace))
    value = body.value
    if memory_namespace(namespace):
        text = value.get("text")
        if not isinstance(text, str) or not text.strip():
            raise UsageError(f'items of {namespace[0]} need a "text" value')
        value = value | {"saved_at": time.time()}  # orders the user's items, newest first
    with _store(request) as store:
        store.put(namespace, body.key, value)
    return Response(status_code=204)


@router.get("/store/items")
def get_item(
    request: Request,
    caller: CurrentUser,
    key: str,
    namespace: Annotated[str | None, Query()] = None,
) -> dict | None:
    """The item, or null when there is none (as LangGraph's server answers)."""
    path = tuple((namespace or "").split(".")) if namespace else ()
    callers_namespace(caller, path)
    with _store(request) as store:
        item = store.get(path, key)
    return item_json(item) if item is not None else None


@router.delete("/store/items", status_code=204)
def delete_item(request: Request, caller: CurrentUser, body: ItemDelete) -> Response:
    namespace = callers_namespace(caller, tuple(body.namespace))
    with _store(request) as store:
        store.delete(namespace, body.key)
    return Response(status_code=204)


@router.post("/store/items/search")
def search_items(
    request: Request, caller: CurrentUser, body: Annotated[ItemSearch | None, Body()] = None
) -> dict:
    """Items under the prefix; with a `query`, in Waypoint's own namespaces ranked by BM25,
    elsewhere those whose value holds every word of it."""
    body = body or ItemSearch()
    prefix = callers_namespace(caller, tuple(body.namespace_prefix))
    ranked = bool(body.query) and memory_namespace(prefix)
    with _store(request) as store:
        items = store.search(
            prefix,
            query=body.query if ranked else None,
            filter=body.filter,
            limit=body.limit,
            offset=body.offset,
        )
    words = [] if ranked else (body.query or "").lower().split()
    matching = [i for i in items if all(w in str(i.value).lower() for w in words)]
    return {"items": [item_json(i) for i in matching]}


@router.post("/store/namespaces")
def list_namespaces(
    request: Request, caller: CurrentUser, body: Annotated[NamespaceList | None, Body()] = None
) -> dict:
    """The namespaces under `prefix` (and ending in `suffix`); under a users file, the caller's."""
    body = body or NamespaceList()
    page = slice(body.offset, body.offset + body.limit)
    with _store(request) as store:
        found = store.list_namespaces(
            prefix=tuple(body.prefix) if body.prefix else None,
            suffix=tuple(body.suffix) if body.suffix else None,
            max_depth=body.max_depth,
            limit=MAX_NAMESPACES if caller.scoped else body.limit,
            offset=0 if caller.scoped else body.offset,
        )
    if caller.scoped:  # LangGraph's stores cannot filter a listing by owner: this page does
        found = [n for n in found if owner_of_namespace(n) == caller.user][page]
    return {"namespaces": [list(n) for n in found]}


def owner_of_namespace(namespace: tuple[str, ...]) -> str | None:
    """Whose a namespace is under a users file: Waypoint's memory (kind, user, …) is the user's;
    any other is its first label's, as in LangGraph's auth examples ((identity, …))."""
    if namespace[:1] and namespace[0] in KINDS:
        return namespace[1] if len(namespace) > 1 else None
    return namespace[0] if namespace else None


def callers_namespace(caller: Caller, namespace: tuple[str, ...]) -> tuple[str, ...]:
    """The namespace, if the caller may use it; another user's is a 404 whether or not anything is
    stored there (nothing is revealed), and one naming no user is refused."""
    if not caller.scoped:
        return namespace
    owner = owner_of_namespace(namespace)
    if owner is None:
        raise UsageError(
            "this server has users: name your own namespace, "
            f'["memories", "{caller.user}"], ["experiences", "{caller.user}"] or '
            f'["{caller.user}", …]'
        )
    if owner != caller.user:
        raise NotFoundError(f"namespace {list(namespace)} does not exist")
    return namespace


@contextlib.contextmanager
def _store(request: Request) -> Iterator[BaseStore]:
    """The store the graphs of this server run with, over the settings' database. What a store
    still refuses (a namespace it reserves, a value it cannot hold) is the client's 400."""
    with open_memory(request.app.state.settings) as memory:
        try:
            yield graph_store(memory)
        except (ValueError, TypeError) as exc:
            raise UsageError(f"the store refused it: {exc}") from None
