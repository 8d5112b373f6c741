"""Loading the configured servers' tools: unique names, and the toolset that closes the sessions."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from types import TracebackType

from langchain_core.tools import BaseTool

from tools.mcp.config import ServerSpec
from tools.mcp.errors import McpConfigError, McpDependencyError
from tools.mcp.runtime import McpRuntime

INSTALL_HINT = "pip install 'waypoint[mcp]'"
DEFAULT_STARTUP_TIMEOUT = 30.0
MAX_TOOL_NAME = 64  # OpenAI-compatible endpoints reject longer function names
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


class McpToolset(list[BaseTool]):
    """The loaded tools, callable synchronously from any thread; `close()` ends every session."""

    def __init__(self, tools: Iterable[BaseTool], runtime: McpRuntime | None) -> None:
        super().__init__(tools)
        self._runtime = runtime

    def close(self) -> None:
        """Close the sessions (stdio servers exit) and stop the loop thread; safe to call twice."""
        if self._runtime is not None:
            self._runtime.close()

    def __enter__(self) -> McpToolset:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def load_mcp_tools(
    config: Mapping[str, ServerSpec],
    *,
    reserved_names: Collection[str] = (),
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
) -> McpToolset:
    """Start every configured server and return its tools as sync LangChain tools.

    A tool keeps its MCP name unless another server, or `reserved_names` (e.g. the built-in tools),
    has the same name: then it is called `<server>__<name>`. Each tool's metadata says which server
    it comes from and whether that server is trusted. Close the returned toolset when done.
    """
    if not config:
        return McpToolset([], None)
    try:
        from langchain_mcp_adapters.client import MultiServerMCPClient
    except ImportError as exc:
        raise McpDependencyError(
            f"MCP support is not installed ({exc.name or exc} is missing); "
            f"install it with: {INSTALL_HINT}"
        ) from None
    client = MultiServerMCPClient(
        {name: spec.connection() for name, spec in config.items()}, handle_tool_errors=False
    )
    runtime = McpRuntime(client, list(config.values()))
    try:
        loaded = runtime.start(startup_timeout)
        names = _tool_names([(spec.name, tool.name) for spec, tool in loaded], reserved_names)
        tools = [
            runtime.wrap(spec, tool, name) for (spec, tool), name in zip(loaded, names, strict=True)
        ]
    except BaseException:
        runtime.close()
        raise
    return McpToolset(tools, runtime)


def _tool_names(pairs: list[tuple[str, str]], reserved: Collection[str]) -> list[str]:
    """Keep each MCP tool name, prefixed with `<server>__` when several servers (or a reserved
    name) claim it, so no server silently shadows another's tool."""
    safe = [(_safe_name(server), _safe_name(tool)) for server, tool in pairs]
    servers_per_name = Counter(tool for _, tool in set(safe))
    names = [
        f"{server}__{tool}"[:MAX_TOOL_NAME]
        if servers_per_name[tool] > 1 or tool in reserved
        else tool[:MAX_TOOL_NAME]
        for server, tool in safe
    ]
    duplicates = sorted(name for name, n in Counter(names).items() if n > 1)
    if duplicates:
        raise McpConfigError(
            f"several MCP tools would be called {', '.join(duplicates)}; rename one of the servers"
        )
    return names


def _safe_name(name: str) -> str:
    return _UNSAFE_NAME_CHARS.sub("_", name) or "_"
