"""What long-term memory holds: a MemoryItem (made from a store's Item), the two kinds of item,
and the store label of a user id."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from langgraph.store.base import Item

Kind = Literal["memories", "experiences"]

USER_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


@dataclass(frozen=True)
class MemoryItem:
    """One remembered fact or experience, as stored.

    Times are naive UTC, as the store keeps them; ``saved_at`` (epoch seconds) orders items saved
    within the same second. ``score`` is the BM25 relevance of a search hit (higher is more
    relevant); ``existing`` is True when ``remember`` found the same fact already stored;
    ``fields`` holds the rest of the stored value (for experiences: thread_id, turn, status, tools).
    """

    key: str
    text: str
    created_at: datetime
    updated_at: datetime
    saved_at: float = 0.0
    score: float | None = None
    existing: bool = False
    fields: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "key": self.key,
            "text": self.text,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            **self.fields,
        }
        if self.score is not None:
            data["score"] = round(self.score, 6)
        return data


def user_label(user: str) -> str:
    """The namespace label of a user id: store labels may not contain '.', which user ids may, so
    '.' is written as '%2E' ('%' never occurs in a valid id, so the mapping is one-to-one)."""
    if not USER_ID.fullmatch(user or "") or user in {".", ".."}:
        raise ValueError(f"invalid memory user {str(user)[:80]!r}: use 1-64 of A-Z a-z 0-9 . _ -")
    return user.replace(".", "%2E")


def memory_item(item: Item) -> MemoryItem:
    """The MemoryItem of a stored item: its text, times in naive UTC, the rest of the value as
    fields."""
    value = dict(item.value)
    text = value.pop("text", "")
    saved_at = value.pop("saved_at", 0.0)
    value.pop("search_text", None)
    return MemoryItem(
        key=item.key,
        text=text if isinstance(text, str) else str(text),
        created_at=naive_utc(item.created_at),
        updated_at=naive_utc(item.updated_at),
        saved_at=saved_at if isinstance(saved_at, int | float) else 0.0,
        fields=value,
    )


def naive_utc(moment: datetime) -> datetime:
    """PostgresStore gives aware times, SqliteStore naive UTC ones: items carry naive UTC."""
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


def utc_now() -> datetime:
    """Now, in naive UTC to the second, as the stores keep their times."""
    return datetime.now(UTC).replace(tzinfo=None, microsecond=0)
