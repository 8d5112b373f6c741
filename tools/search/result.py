"""SearchResult, the hit every backend returns, and the one-line form its text is shown in."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SearchResult:
    """One hit. `score` is higher for better hits and comparable only within one search."""

    title: str
    snippet: str
    source: str
    score: float


def one_line(text: str) -> str:
    return " ".join(text.split())
