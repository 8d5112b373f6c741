"""The MCP config: an `{"mcpServers": {...}}` JSON file read and validated into `ServerSpec`s."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tools.mcp.errors import McpConfigError

if TYPE_CHECKING:  # an optional dependency (tools/mcp/loader.py says how to install it)
    from langchain_mcp_adapters.sessions import (
        Connection,
        SSEConnection,
        StdioConnection,
        StreamableHttpConnection,
    )

DEFAULT_CALL_TIMEOUT = 60.0

Transport = Literal["stdio", "streamable_http", "sse"]
TRANSPORTS: dict[str, Transport] = {
    "stdio": "stdio",
    "http": "streamable_http",
    "streamable_http": "streamable_http",
    "streamable-http": "streamable_http",
    "sse": "sse",
}
EXAMPLE = '{"mcpServers": {"files": {"command": "npx", "args": ["-y", "some-mcp-server"]}}}'


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

    def connection(self) -> Connection:
        """The connection entry langchain-mcp-adapters' MultiServerMCPClient expects."""
        if self.transport == "stdio":
            assert self.command is not None  # load_mcp_config gives a stdio server its command
            stdio: StdioConnection = {
                "transport": "stdio",
                "command": self.command,
                "args": list(self.args),
            }
            if self.env is not None:
                stdio["env"] = dict(self.env)
            if self.cwd is not None:
                stdio["cwd"] = str(self.cwd)
            return stdio
        assert self.url is not None  # and any other server its url
        http: SSEConnection | StreamableHttpConnection = (
            {"transport": "sse", "url": self.url}
            if self.transport == "sse"
            else {"transport": "streamable_http", "url": self.url}
        )
        if self.headers:
            http["headers"] = dict(self.headers)
        return http

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
