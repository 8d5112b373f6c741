"""Tools of MCP servers: read an `{"mcpServers": {...}}` config and load the servers' tools.

The sessions live on one background event loop thread; each tool is a sync wrapper that submits its
call to that loop, so the graph's worker threads can call MCP tools like any other tool.
The modules of this package hold the parts; every public name is importable from here.
"""

from tools.mcp.config import (
    DEFAULT_CALL_TIMEOUT,
    EXAMPLE,
    TRANSPORTS,
    ServerSpec,
    Transport,
    load_mcp_config,
    parse_mcp_config,
)
from tools.mcp.errors import McpConfigError, McpConnectError, McpDependencyError, McpSetupError
from tools.mcp.loader import (
    DEFAULT_STARTUP_TIMEOUT,
    INSTALL_HINT,
    MAX_TOOL_NAME,
    McpToolset,
    load_mcp_tools,
)
from tools.mcp.runtime import CLOSE_TIMEOUT

__all__ = [
    "CLOSE_TIMEOUT",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_STARTUP_TIMEOUT",
    "EXAMPLE",
    "INSTALL_HINT",
    "MAX_TOOL_NAME",
    "TRANSPORTS",
    "McpConfigError",
    "McpConnectError",
    "McpDependencyError",
    "McpSetupError",
    "McpToolset",
    "ServerSpec",
    "Transport",
    "load_mcp_config",
    "load_mcp_tools",
    "parse_mcp_config",
]
