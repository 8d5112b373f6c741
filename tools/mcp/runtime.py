"""The MCP sessions on one background event loop thread, and each tool as a sync StructuredTool
that submits its call to that loop and turns every failure into a ToolError naming the server."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from tools.errors import ToolError, ToolLimitError
from tools.mcp.config import ServerSpec
from tools.mcp.errors import McpConnectError

# The stdio client waits 2 s for a server to exit after stdin closes, then 2 s more after SIGTERM.
CLOSE_TIMEOUT = 10.0


class McpRuntime:
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
        loaded = [tools for tools in results if not isinstance(tools, BaseException)]
        return [(spec, t) for spec, tools in zip(self._specs, loaded, strict=True) for t in tools]

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
            metadata={
                "mcp_server": spec.name,
                "mcp_tool": tool.name,
                "trusted": spec.trusted,
                # the server's own word (MCP tool annotations) that a call changes nothing
                "read_only": bool((tool.metadata or {}).get("readOnlyHint")),
            },
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
