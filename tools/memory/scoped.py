"""A store seen under a fixed namespace prefix: an engine whose store API keeps each authenticated
user's items under a scope of its own (Aegra: ("users", identity, …)) finds the agent's memory only
there, so on such an engine the memory tools write through this view (APP_MEMORY_SCOPE=user)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)


class ScopedStore(BaseStore):
    """`store` under `prefix`: a namespace a caller names is `prefix + namespace` in `store`, and
    comes back without the prefix."""

    def __init__(self, store: BaseStore, prefix: tuple[str, ...]) -> None:
        self.store, self.prefix = store, prefix

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._outward(r) for r in self.store.batch([self._inward(op) for op in ops])]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        results = await self.store.abatch([self._inward(op) for op in ops])
        return [self._outward(r) for r in results]

    def _inward(self, op: Op) -> Op:
        if isinstance(op, GetOp | PutOp):
            return op._replace(namespace=self.prefix + tuple(op.namespace))
        if isinstance(op, SearchOp):
            return op._replace(namespace_prefix=self.prefix + tuple(op.namespace_prefix))
        if isinstance(op, ListNamespacesOp):
            return self._listing(op)
        raise TypeError(f"unknown store operation {type(op).__name__}")

    def _listing(self, op: ListNamespacesOp) -> ListNamespacesOp:
        conditions = list(op.match_conditions or ())
        prefixes = [c for c in conditions if c.match_type == "prefix"]
        others = [c for c in conditions if c.match_type != "prefix"]
        path = self.prefix + (tuple(prefixes[0].path) if prefixes else ())
        depth = op.max_depth + len(self.prefix) if op.max_depth is not None else None
        return op._replace(
            match_conditions=(MatchCondition("prefix", path), *others), max_depth=depth
        )

    def _outward(self, result: Any) -> Any:
        if isinstance(result, SearchItem):
            return SearchItem(
                self._strip(result.namespace),
                result.key,
                result.value,
                result.created_at,
                result.updated_at,
                result.score,
            )
        if isinstance(result, Item):
            return Item(
                value=result.value,
                key=result.key,
                namespace=self._strip(result.namespace),
                created_at=result.created_at,
                updated_at=result.updated_at,
            )
        if isinstance(result, list):
            return [self._outward(r) if isinstance(r, Item) else self._strip(r) for r in result]
        return result

    def _strip(self, namespace: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(namespace[len(self.prefix) :])
