"""The opt-in web backends of web_search: DuckDuckGo through `ddgs`, Tavily through
`tavily-python`; their failures become ToolErrors the model can act on."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

from tools.errors import ToolError, ToolInputError
from tools.search.result import SearchResult, one_line


class SearchUnavailableError(ToolError):
    """Raised when an online backend cannot be used: package missing, no API key, network down."""


_HTTP_PACKAGES = frozenset({"httpx", "httpcore", "requests", "urllib3", "primp", "aiohttp"})


def _import_client(module: str, attribute: str, extra: str, backend: str) -> Any:
    try:
        return getattr(importlib.import_module(module), attribute)
    except ImportError:
        raise SearchUnavailableError(
            f"the {backend} web search backend needs the '{module}' package, which is not "
            f"installed; tell the user to run: pip install 'waypoint[{extra}]' "
            "(or to use the local corpus)",
            user_message=f"the {backend} web search backend needs the '{module}' package; "
            f"install it with: pip install 'waypoint[{extra}]'",
        ) from None


def _network_error(backend: str, exc: Exception, package: str) -> SearchUnavailableError | None:
    """The ToolError for a failure of the service or the network, or None for anything else (a bug)."""
    kind = type(exc)
    root = kind.__module__.partition(".")[0]
    if isinstance(exc, TimeoutError) or "timeout" in kind.__name__.lower():
        return SearchUnavailableError(
            f"the {backend} web search timed out; the network may be slow or unreachable; try "
            "again later, search the local corpus, or answer from what you already know"
        )
    if isinstance(exc, OSError) or root in _HTTP_PACKAGES or root == package:
        return SearchUnavailableError(
            f"the {backend} web search failed ({kind.__name__}: {exc}); the network may be "
            "unreachable; try again later, search the local corpus, or answer from what you "
            "already know"
        )
    return None


class DdgsBackend:
    """DuckDuckGo and friends through the optional `ddgs` package (no API key)."""

    def __init__(
        self, *, timeout: int = 10, client_factory: Callable[[], Any] | None = None
    ) -> None:
        self.timeout = timeout
        self._client_factory = client_factory

    def search(self, query: str, max_results: int) -> list[SearchResult]:
        if not query.strip():
            raise ToolInputError("the query is empty; give a few words to search for")
        if self._client_factory is None:
            ddgs_class = _import_client("ddgs", "DDGS", "search-ddgs", "ddgs")
            client = ddgs_class(timeout=self.timeout)
        else:
            client = self._client_factory()
        try:
            rows = list(client.text(query, max_results=max_results))
        except Exception as exc:
            error = _network_error("ddgs", exc, "ddgs")
            if error is None:
                raise
            raise error from exc
        count = min(len(rows), max_results)
        return [
            SearchResult(
                title=one_line(str(row.get("title") or row.get("href") or "untitled")),
                snippet=one_line(str(row.get("body") or "")),
                source=str(row.get("href") or ""),
                score=float(count - i),
            )
            for i, row in enumerate(rows[:max_results])
        ]


class TavilyBackend:
    """Tavily's search API through the optional `tavily-python` package; needs TAVILY_API_KEY."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        client_factory: Callable[[str], Any] | None = None,
    ) -> None:
        self._api_key = api_key
        self._client_factory = client_factory

    def search(self, query: str, max_results: int) -> list[SearchResult]:
        if not query.strip():
            raise ToolInputError("the query is empty; give a few words to search for")
        factory = self._client_factory or _import_client(
            "tavily", "TavilyClient", "search-tavily", "tavily"
        )
        key = self._api_key or os.environ.get("TAVILY_API_KEY", "")
        if not key:
            raise SearchUnavailableError(
                "the tavily web search backend needs an API key and TAVILY_API_KEY is not set; "
                "tell the user to set it (or to use the local corpus)",
                user_message="the tavily web search backend needs TAVILY_API_KEY, which is not set",
            )
        try:
            response = factory(key).search(query, max_results=max_results)
        except Exception as exc:
            if type(exc).__name__ in ("InvalidAPIKeyError", "MissingAPIKeyError"):
                raise SearchUnavailableError(
                    "tavily rejected the API key in TAVILY_API_KEY; tell the user to check it",
                    user_message="tavily rejected the API key in TAVILY_API_KEY; check it",
                ) from exc
            error = _network_error("tavily", exc, "tavily")
            if error is None:
                raise
            raise error from exc
        return [
            SearchResult(
                title=one_line(str(row.get("title") or row.get("url") or "untitled")),
                snippet=one_line(str(row.get("content") or "")),
                source=str(row.get("url") or ""),
                score=float(row.get("score") or 0.0),
            )
            for row in list(response.get("results") or [])[:max_results]
        ]
