"""What long-term memory holds: a MemoryItem, the two kinds of item, and the store label of a
user id."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

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
