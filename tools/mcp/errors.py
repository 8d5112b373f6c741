"""The errors of loading MCP tools: for the person at the terminal, never for the model."""

from __future__ import annotations


class McpSetupError(Exception):
    """Raised when MCP tools cannot be loaded at all; for the person at the terminal, not the model."""


class McpConfigError(McpSetupError):
    """Raised when the MCP config file is missing, not JSON, or has an unusable server entry."""


class McpDependencyError(McpSetupError):
    """Raised when the optional `mcp` extra (mcp, langchain-mcp-adapters) is not installed."""


class McpConnectError(McpSetupError):
    """Raised when a configured server does not start or does not list its tools in time."""
