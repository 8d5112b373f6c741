"""Tools of MCP servers: read an `{"mcpServers": {...}}` config and load the servers' tools.

The sessions live on one background event loop thread; each tool is a sync wrapper that submits its
call to that loop, so the graph's worker threads can call MCP tools like any other tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from collections import Counter
from collections.abc import Collection, Coroutine, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from langchain_core.tools import BaseTool, StructuredTool

from tools.errors import ToolError, ToolLimitError

INSTALL_HINT = "pip install 'waypoint[mcp]'"
DEFAULT_CALL_TIMEOUT = 60.0
DEFAULT_STARTUP_TIMEOUT = 30.0
# The stdio client waits 2 s for a server to exit after stdin closes, then 2 s more after SIGTERM.
CLOSE_TIMEOUT = 10.0
MAX_TOOL_NAME = 64  # OpenAI-compatible endpoints reject longer function names

Transport = Literal["stdio", "streamable_http", "sse"]
TRANSPORTS: dict[str, Transport] = {
    "stdio": "stdio",
    "http": "streamable_http",
    "streamable_http": "streamable_http",
    "streamable-http": "streamable_http",
    "sse": "sse",
}
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
EXAMPLE = '{"mcpServers": {"files": {"command": "npx", "args": ["-y", "some-mcp-server"]}}}'


class McpSetupError(Exception):
    """Raised when MCP tools cannot be loaded at all; for the person at the terminal, not the model."""


class McpConfigError(McpSetupError):
    """Raised when the MCP config file is missing, not JSON, or has an unusable server entry."""


class McpDependencyError(McpSetupError):
    """Raised when the optional `mcp` extra (mcp, langchain-mcp-adapters) is not installed."""


class McpConnectError(McpSetupError):
    """Raised when a configured server does not start or does not list its tools in time."""


@dataclass(frozen=True)
class ServerSpec:
    """One configured MCP server: a stdio command or an HTTP/SSE url, its trust and its call timeout."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: Path | None = None
    url: str | None = None
    headers: Mapping[str, str] | None = None
    trusted: bool = False
    timeout: float = DEFAULT_CALL_TIMEOUT

    def connection(self) -> dict[str, Any]:
        """The connection entry langchain-mcp-adapters' MultiServerMCPClient expects."""
        if self.transport == "stdio":
            connection: dict[str, Any] = {
                "transport": "stdio",
                "command": self.command,
                "args": list(self.args),
            }
            if self.env is not None:
                connection["env"] = dict(self.env)
            if self.cwd is not None:
                connection["cwd"] = str(self.cwd)
            return connection
        connection = {"transport": self.transport, "url": self.url}
        if self.headers:
            connection["headers"] = dict(self.headers)
        return connection

    def describe(self) -> str:
        if self.transport == "stdio":
            return " ".join([self.command or "", *self.args])
        return f"{self.url} ({self.transport})"


def load_mcp_config(path: Path) -> dict[str, ServerSpec]:
    """Read and validate an MCP config file; relative `cwd`s are resolved against its directory."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise McpConfigError(f"MCP config {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise McpConfigError(f"cannot read MCP config {path}: {reason}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(
            f"MCP config {path} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    return parse_mcp_config(data, source=str(path), base_dir=path.resolve().parent)


def parse_mcp_config(
    data: object, *, source: str = "the MCP config", base_dir: Path | None = None
) -> dict[str, ServerSpec]:
    """Validate decoded `{"mcpServers": {...}}` JSON; entries with `"disabled": true` are left out."""
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise McpConfigError(f'{source} has no "mcpServers" object; expected e.g. {EXAMPLE}')
    specs: dict[str, ServerSpec] = {}
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            raise McpConfigError(f"MCP server '{name}' in {source} must be a JSON object")
        if entry.get("disabled") is True:
            continue
        specs[name] = _parse_server(name, entry, f"MCP server '{name}' in {source}", base_dir)
    return specs


def _parse_server(name: str, entry: dict, where: str, base_dir: Path | None) -> ServerSpec:
    command, url = entry.get("command"), entry.get("url")
    if command is None and url is None:
        raise McpConfigError(f'{where} needs "command" (a stdio server) or "url" (http or sse)')
    if command is not None and url is not None:
        raise McpConfigError(f'{where} has both "command" and "url"; keep one')
    declared = entry.get("transport", entry.get("type"))
    if declared is None:
        transport: Transport = "stdio" if command is not None else "streamable_http"
    elif declared in TRANSPORTS:
        transport = TRANSPORTS[declared]
    else:
        raise McpConfigError(
            f"{where} has unknown transport {declared!r}; use one of {', '.join(TRANSPORTS)}"
        )
    if (transport == "stdio") != (command is not None):
        needed = '"command"' if transport == "stdio" else '"url"'
        raise McpConfigError(f"{where} uses transport {declared!r}, which needs {needed}")
    timeout = entry.get("timeout", DEFAULT_CALL_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise McpConfigError(f'{where}: "timeout" must be a positive number of seconds')
    trusted = entry.get("trusted", False)
    if not isinstance(trusted, bool):
        raise McpConfigError(f'{where}: "trusted" must be true or false')
    cwd = _string(entry, "cwd", where)
    return ServerSpec(
        name=name,
        transport=transport,
        command=_string(entry, "command", where),
        args=tuple(_strings(entry, "args", where)),
        env=_string_map(entry, "env", where),
        cwd=(base_dir / cwd if base_dir else Path(cwd)) if cwd else None,
        url=_string(entry, "url", where),
        headers=_string_map(entry, "headers", where),
        trusted=trusted,
        timeout=float(timeout),
    )


def _string(entry: dict, key: str, where: str) -> str | None:
    value = entry.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise McpConfigError(f'{where}: "{key}" must be a non-empty string')
    return value


def _strings(entry: dict, key: str, where: str) -> list[str]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise McpConfigError(f'{where}: "{key}" must be a list of strings')
    return value


def _string_map(entry: dict, key: str, where: str) -> dict[str, str] | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise McpConfigError(f'{where}: "{key}" must be an object of string values')
    return value


class McpToolset(list[BaseTool]):
    """The loaded tools, callable synchronously from any thread; `close()` ends every session."""

    def __init__(self, tools: list[BaseTool], runtime: _McpRuntime | None) -> None:
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
    runtime = _McpRuntime(client, list(config.values()))
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


class _McpRuntime:
    """The background loop thread and one long-lived session per server, each held by its own task."""

    def __init__(self, client: Any, specs: list[ServerSpec]) -> None:
        self._client = client
        self._specs = specs
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-loop", daemon=True)
        self._thread.start()
        self._lock = threading.Lock()
        self._closed = False
        self._stop: asyncio.Event | None = None
        self._holders: list[asyncio.Task] = []
        self._readies: list[asyncio.Future] = []

    def start(self, timeout: float) -> list[tuple[ServerSpec, BaseTool]]:
        return self._submit(self._start_all(timeout)).result()

    async def _start_all(self, timeout: float) -> list[tuple[ServerSpec, BaseTool]]:
        self._stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._readies = readies = [loop.create_future() for _ in self._specs]
        self._holders = [
            asyncio.create_task(self._hold(spec, ready), name=f"mcp-{spec.name}")
            for spec, ready in zip(self._specs, readies, strict=True)
        ]
        results = await asyncio.gather(
            *(_wait_ready(r, s, timeout) for s, r in zip(self._specs, readies, strict=True)),
            return_exceptions=True,
        )
        failures = [str(r) for r in results if isinstance(r, BaseException)]
        if failures:
            raise McpConnectError("; ".join(failures))
        return [(spec, t) for spec, tools in zip(self._specs, results, strict=True) for t in tools]

    async def _hold(self, spec: ServerSpec, ready: asyncio.Future) -> None:
        """Open the server's session, hand over its tools, and keep it open until close():
        anyio requires a session to be entered and exited by the same task."""
        from langchain_mcp_adapters.tools import load_mcp_tools as adapter_tools

        assert self._stop is not None
        try:
            async with self._client.session(spec.name) as session:
                tools = await adapter_tools(
                    session, server_name=spec.name, handle_tool_errors=False
                )
                ready.set_result(tools)
                await self._stop.wait()
        except Exception as exc:
            # After a crash the session may fail again while closing; only a failed start matters.
            if not ready.done():
                ready.set_exception(exc)

    def wrap(self, spec: ServerSpec, tool: BaseTool, name: str) -> StructuredTool:
        """A sync (and async) LangChain tool that runs `tool` on the loop within the server's timeout."""

        def call(**arguments: Any) -> str:
            return self.call(spec, tool, arguments)

        async def acall(**arguments: Any) -> str:
            return await asyncio.to_thread(self.call, spec, tool, arguments)

        return StructuredTool(
            name=name,
            description=tool.description or f"Tool {tool.name} of MCP server '{spec.name}'.",
            args_schema=_object_schema(tool.args_schema),
            func=call,
            coroutine=acall,
            metadata={"mcp_server": spec.name, "mcp_tool": tool.name, "trusted": spec.trusted},
        )

    def call(self, spec: ServerSpec, tool: BaseTool, arguments: dict[str, Any]) -> str:
        """Run one MCP tool call; every way it can fail becomes a ToolError naming the server."""
        where = f"tool '{tool.name}' of MCP server '{spec.name}'"
        try:
            future = self._submit(_invoke(tool, arguments, where))
        except RuntimeError:
            raise ToolError(
                f"{where} is no longer available (the MCP session was closed)"
            ) from None
        try:
            content = future.result(timeout=spec.timeout)
        except TimeoutError:
            future.cancel()
            raise ToolLimitError(
                f"{where} did not answer within {spec.timeout:g} s; the call was abandoned. "
                "Try a smaller request, or continue without this tool."
            ) from None
        except ToolError:
            raise
        # The boundary with another process: whatever goes wrong there is for the model to read.
        except Exception as exc:
            raise ToolError(f"{where} failed: {_describe(exc)}") from exc
        return _content_text(content)

    def _submit(self, coroutine: Coroutine[Any, Any, Any]) -> Future:
        with self._lock:
            if self._closed:
                coroutine.close()
                raise RuntimeError("the MCP loop is closed")
            return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            stopping = asyncio.run_coroutine_threadsafe(self._stop_all(), self._loop)
        with contextlib.suppress(Exception):
            stopping.result(timeout=CLOSE_TIMEOUT + 1)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=CLOSE_TIMEOUT)
        if not self._thread.is_alive():
            self._loop.close()

    async def _stop_all(self) -> None:
        """Let connected sessions close in order (stdio servers see EOF and exit); cancel the ones
        still starting, and any that do not finish in time (anyio then kills their process)."""
        if self._stop is not None:
            self._stop.set()
        for holder, ready in zip(self._holders, self._readies, strict=True):
            if not ready.done() or ready.cancelled() or ready.exception() is not None:
                holder.cancel()
        if self._holders:
            _, pending = await asyncio.wait(self._holders, timeout=CLOSE_TIMEOUT)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=CLOSE_TIMEOUT)


async def _wait_ready(ready: asyncio.Future, spec: ServerSpec, timeout: float) -> list[BaseTool]:
    try:
        return await asyncio.wait_for(asyncio.shield(ready), timeout)
    except TimeoutError:
        raise McpConnectError(
            f"MCP server '{spec.name}' ({spec.describe()}) did not list its tools within {timeout:g} s"
        ) from None
    except Exception as exc:
        raise McpConnectError(
            f"MCP server '{spec.name}' ({spec.describe()}) could not be started: {_describe(exc)}"
        ) from exc


async def _invoke(tool: BaseTool, arguments: dict[str, Any], where: str) -> Any:
    from langchain_core.tools import ToolException

    try:
        return await tool.ainvoke(arguments)
    except ToolException as exc:
        raise ToolError(f"{where} reported an error: {exc}") from None


def _describe(exc: BaseException) -> str:
    """The innermost useful message: anyio wraps transport failures in exception groups."""
    import anyio
    from mcp.shared.exceptions import McpError
    from mcp.types import CONNECTION_CLOSED

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"command not found: {exc.filename}"
    if isinstance(exc, McpError) and exc.error.code == CONNECTION_CLOSED:
        return "the server closed the connection (it exited or crashed)"
    if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError):
        return "the server is no longer running; its tools are unavailable until Waypoint restarts"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _content_text(content: Any) -> str:
    """MCP results are lists of content blocks; the model reads their text, other blocks by kind."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict):
            kind, mime = block.get("type", "content"), block.get("mime_type")
            parts.append(f"[{kind}{f' {mime}' if mime else ''} omitted]")
        else:
            parts.append(str(block))
    return "\n".join(parts)


def _object_schema(schema: Any) -> dict[str, Any]:
    """The tool's JSON schema as an object schema with `properties`, which LangChain requires."""
    schema = dict(schema) if isinstance(schema, dict) else {}
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema
