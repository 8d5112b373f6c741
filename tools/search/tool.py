"""The web_search tool: the SearchBackend protocol, make_backend (local corpus, ddgs or
tavily) and make_search_tool, which formats a backend's results for the model."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from tools.search.local_index import LocalIndex
from tools.search.result import SearchResult, one_line
from tools.search.web_backends import DdgsBackend, TavilyBackend

BACKENDS = ("local", "ddgs", "tavily")


class SearchBackend(Protocol):
    """Anything web_search can ask: the local corpus or a web search service."""

    def search(self, query: str, max_results: int) -> list[SearchResult]: ...


def make_backend(name: str, db_path: Path) -> SearchBackend:
    """The backend called `name`: "local" (the corpus in `db_path`), "ddgs" or "tavily"."""
    key = (name or "local").strip().lower()
    if key == "local":
        return LocalIndex(db_path)
    if key == "ddgs":
        return DdgsBackend()
    if key == "tavily":
        return TavilyBackend()
    raise ValueError(f"unknown search backend {name!r}; use one of: {', '.join(BACKENDS)}")


def format_results(results: Iterable[SearchResult]) -> str:
    """'1. Title — source' and the snippet indented below it, one entry per result."""
    lines: list[str] = []
    for number, result in enumerate(results, 1):
        lines.append(f"{number}. {one_line(result.title)} — {result.source}")
        if result.snippet:
            lines.append(f"   {one_line(result.snippet)}")
    return "\n".join(lines)


def no_match_message(query: str) -> str:
    shown = one_line(query)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return (
        f"nothing matched {shown!r}; try other words: synonyms, fewer or more general terms, "
        "or just the most distinctive word"
    )


class WebSearchArgs(BaseModel):
    """Arguments of web_search."""

    query: str = Field(
        min_length=1,
        description="A few distinctive words to look for, e.g. 'solar panel efficiency'.",
    )
    max_results: int = Field(default=5, ge=1, le=20, description="How many results (1-20).")


def make_search_tool(backend: SearchBackend) -> BaseTool:
    """Build the web_search tool on `backend`."""

    def web_search(query: str, max_results: int = 5) -> str:
        """Search the local document corpus (or the configured web backend) and return titles, snippets and sources."""
        results = backend.search(query, max_results)
        return format_results(results) if results else no_match_message(query)

    return StructuredTool.from_function(web_search, args_schema=WebSearchArgs)
