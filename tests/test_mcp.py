"""MCP: config validation, real stdio round trips (`mcp serve` ↔ load_mcp_tools), names, trust, failures."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from tests.conftest import REPO, run_cli
from tools import default_tools, has_side_effects
from tools.errors import ToolError, ToolLimitError
from tools.mcp import (
    INSTALL_HINT,
    McpConfigError,
    McpConnectError,
    McpDependencyError,
    McpToolset,
    ServerSpec,
    load_mcp_config,
    load_mcp_tools,
)
from tools.mcp.loader import _tool_names

needs_mcp = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("mcp", "langchain_mcp_adapters")),
    reason=f"the optional MCP extra is not installed ({INSTALL_HINT})",
)

# A second MCP server, written with the SDK's FastMCP: tools that clash between two copies of it, one
# whose name depends on its label, a slow one and one that kills the server.
TINY_SERVER = '''
import os
import anyio
from mcp.server.fastmcp import FastMCP

label = os.environ["TINY_LABEL"]
server = FastMCP("tiny")

@server.tool()
def echo(text: str) -> str:
    """Echo the text back, prefixed with the server's label."""
    return f"{label}:{text}"

@server.tool()
async def nap(seconds: float) -> str:
    """Sleep, then answer."""
    await anyio.sleep(seconds)
    return "awake"

@server.tool()
def crash() -> str:
    """End the server process at once."""
    os._exit(3)

server.add_tool(lambda: label, name=f"label_{label}", description="Say the label.")
server.run()
'''


def write_config(path: Path, servers: dict) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def waypoint_server(workspace: Path, **extra: object) -> dict:
    return {
        "command": sys.executable,
        "args": ["-m", "app", "mcp", "serve", "--workspace", str(workspace)],
        "env": {"PYTHONPATH": str(REPO)},
        **extra,
    }


def processes_running(marker: str) -> list[int]:
    """Live processes whose command line contains `marker` (exited ones have an empty cmdline)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def assert_closed_cleanly(tools: McpToolset, marker: str) -> None:
    tools.close()
    assert processes_running(marker) == []
    assert not any(t.name == "mcp-loop" for t in threading.enumerate())
    with pytest.raises(ToolError, match="no longer available"):
        tools[0].invoke({})


@pytest.fixture
def tiny_pair(tmp_path: Path) -> tuple[Path, Path]:
    """A config with two servers `a` (trusted, 1 s timeout) and `b` running the same script."""
    script = tmp_path / "tiny_server.py"
    script.write_text(TINY_SERVER, encoding="utf-8")
    tiny = {"command": sys.executable, "args": [str(script)]}
    config = write_config(
        tmp_path / "mcp.json",
        {
            "a": {**tiny, "env": {"TINY_LABEL": "a"}, "trusted": True, "timeout": 1},
            "b": {**tiny, "env": {"TINY_LABEL": "b"}},
        },
    )
    return config, script


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "MCP config {path} does not exist"),
        ('{"mcpServers": {', "MCP config {path} is not valid JSON: Expecting property name"),
        ('{"servers": {}}', '{path} has no "mcpServers" object'),
        ('["mcpServers"]', '{path} has no "mcpServers" object'),
        ('{"mcpServers": {"s": "npx"}}', "MCP server 's' in {path} must be a JSON object"),
        (
            '{"mcpServers": {"s": {"args": ["x"]}}}',
            'MCP server \'s\' in {path} needs "command" (a stdio server) or "url" (http or sse)',
        ),
        (
            '{"mcpServers": {"s": {"command": "x", "url": "http://h/mcp"}}}',
            'has both "command" and "url"',
        ),
        (
            '{"mcpServers": {"s": {"url": "ws://h", "transport": "websocket"}}}',
            "MCP server 's' in {path} has unknown transport 'websocket'; "
            "use one of stdio, http, streamable_http, streamable-http, sse",
        ),
        (
            '{"mcpServers": {"s": {"url": "http://h/sse", "type": "stdio"}}}',
            "uses transport 'stdio', which needs \"command\"",
        ),
        ('{"mcpServers": {"s": {"command": "x", "args": "a b"}}}', '"args" must be a list'),
        ('{"mcpServers": {"s": {"command": "x", "env": {"A": 1}}}}', '"env" must be an object'),
        ('{"mcpServers": {"s": {"command": "x", "trusted": "yes"}}}', '"trusted" must be true'),
        ('{"mcpServers": {"s": {"command": "x", "timeout": 0}}}', '"timeout" must be a positive'),
    ],
)
def test_an_unusable_config_is_a_clear_error(tmp_path: Path, content: str | None, message: str):
    path = tmp_path / "mcp.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(McpConfigError) as error:
        load_mcp_config(path)
    assert message.format(path=path) in str(error.value)


def test_config_reads_stdio_and_http_servers_untrusted_by_default(tmp_path: Path):
    path = write_config(
        tmp_path / "mcp.json",
        {
            "files": {"command": "npx", "args": ["-y", "srv"], "env": {"K": "v"}, "cwd": "sub"},
            "remote": {"url": "http://h/mcp", "headers": {"A": "b"}, "trusted": True},
            "legacy": {"type": "sse", "url": "http://h/sse", "timeout": 5},
            "off": {"command": "never", "disabled": True},
        },
    )
    specs = load_mcp_config(path)
    assert specs == {
        "files": ServerSpec(
            "files",
            "stdio",
            command="npx",
            args=("-y", "srv"),
            env={"K": "v"},
            cwd=tmp_path / "sub",
        ),
        "remote": ServerSpec(
            "remote", "streamable_http", url="http://h/mcp", headers={"A": "b"}, trusted=True
        ),
        "legacy": ServerSpec("legacy", "sse", url="http://h/sse", timeout=5.0),
    }
    assert specs["files"].connection() == {
        "transport": "stdio",
        "command": "npx",
        "args": ["-y", "srv"],
        "env": {"K": "v"},
        "cwd": str(tmp_path / "sub"),
    }
    assert specs["remote"].connection() == {
        "transport": "streamable_http",
        "url": "http://h/mcp",
        "headers": {"A": "b"},
    }


def test_tool_names_stay_valid_function_names_for_chat_apis():
    pairs = [("my server", "t"), ("b", "t"), ("c", "read.file"), ("c", "x" * 80)]
    assert _tool_names(pairs, reserved=()) == ["my_server__t", "b__t", "read_file", "x" * 64]


def test_without_the_optional_extra_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setitem(sys.modules, "langchain_mcp_adapters.client", None)
    with pytest.raises(McpDependencyError, match=r"pip install 'waypoint\[mcp\]'"):
        load_mcp_tools({"s": ServerSpec("s", "stdio", command="x")})


@needs_mcp
def test_waypoint_tools_round_trip_through_a_real_stdio_server(tmp_path: Path):
    from app.service.mcp_server import input_schema
    from graphs.shared.tool_calls import run_tool_calls

    served = tmp_path / "served"
    config = write_config(tmp_path / "mcp.json", {"waypoint": waypoint_server(served)})
    local = default_tools(tmp_path / "unused")
    tools = load_mcp_tools(load_mcp_config(config))
    try:
        assert [t.name for t in tools] == [t.name for t in local]
        by_name = {t.name: t for t in tools}
        for original in local:
            remote = by_name[original.name]
            assert remote.description == original.description
            assert remote.args_schema == input_schema(original)
            assert remote.metadata == {
                "mcp_server": "waypoint",
                "mcp_tool": original.name,
                "trusted": False,
                "read_only": not has_side_effects(original),
            }
            # the side effects survive the round trip, so a replay asks before re-running them
            assert has_side_effects(remote) == has_side_effects(original)
        request = AIMessage(
            content="",
            tool_calls=[
                {"name": "calculator", "args": {"expression": "6*7"}, "id": "c1"},
                {"name": "calculator", "args": {"expression": "6*"}, "id": "c2"},
            ],
        )
        answered = run_tool_calls(request, by_name, lambda event: None, 4000)
        assert (answered[0].status, answered[0].content) == ("success", "42")
        assert answered[1].status == "error"
        assert answered[1].content.startswith(
            "tool 'calculator' of MCP server 'waypoint' reported an error: could not parse '6*'"
        )

        def write_then_read() -> str:
            by_name["write_file"].invoke({"path": "notes/a.txt", "content": "héllo"})
            return by_name["read_file"].invoke({"path": "notes/a.txt"})

        with ThreadPoolExecutor(max_workers=1) as worker:
            assert worker.submit(write_then_read).result() == "héllo"
        assert (served / "notes" / "a.txt").read_text(encoding="utf-8") == "héllo"
        with pytest.raises(ToolError, match=r"MCP server 'waypoint'.*'expression' is a required"):
            by_name["calculator"].invoke({})
    finally:
        assert_closed_cleanly(tools, str(served))


@needs_mcp
def test_clashing_names_get_the_server_prefix_and_tools_carry_the_trust_flag(tiny_pair):
    config, script = tiny_pair
    tools = load_mcp_tools(load_mcp_config(config), reserved_names={"label_a"})
    try:
        assert {t.name: t.metadata["trusted"] for t in tools} == {
            "a__echo": True,
            "a__nap": True,
            "a__crash": True,
            "a__label_a": True,
            "b__echo": False,
            "b__nap": False,
            "b__crash": False,
            "label_b": False,
        }
        by_name = {t.name: t for t in tools}
        assert by_name["a__echo"].metadata == {
            "mcp_server": "a",
            "mcp_tool": "echo",
            "trusted": True,
            "read_only": False,  # the server does not say a call changes nothing
        }
        assert has_side_effects(by_name["a__echo"])
        assert by_name["a__echo"].invoke({"text": "x"}) == "a:x"
        assert by_name["b__echo"].invoke({"text": "y"}) == "b:y"
        assert by_name["label_b"].invoke({}) == "b"
    finally:
        assert_closed_cleanly(tools, str(script))


@needs_mcp
def test_a_call_past_the_timeout_is_a_tool_error_and_the_server_stays_usable(tiny_pair):
    config, script = tiny_pair
    tools = load_mcp_tools(load_mcp_config(config))
    try:
        by_name = {t.name: t for t in tools}
        started = time.monotonic()
        with pytest.raises(
            ToolLimitError, match="'nap' of MCP server 'a' did not answer within 1 s"
        ):
            by_name["a__nap"].invoke({"seconds": 30})
        assert time.monotonic() - started < 15  # the 1 s timeout ended it, not the 30 s nap
        assert by_name["a__echo"].invoke({"text": "still here"}) == "a:still here"
    finally:
        assert_closed_cleanly(tools, str(script))


@needs_mcp
def test_a_crashed_server_is_a_tool_error_naming_it_and_the_others_keep_working(tiny_pair):
    config, script = tiny_pair
    tools = load_mcp_tools(load_mcp_config(config))
    try:
        by_name = {t.name: t for t in tools}
        with pytest.raises(ToolError, match="'crash' of MCP server 'b' failed: the server closed"):
            by_name["b__crash"].invoke({})
        with pytest.raises(
            ToolError, match="'echo' of MCP server 'b' failed: the server is no longer"
        ):
            by_name["b__echo"].invoke({"text": "anyone?"})
        assert by_name["a__echo"].invoke({"text": "fine"}) == "a:fine"
    finally:
        assert_closed_cleanly(tools, str(script))


@needs_mcp
def test_a_server_that_cannot_start_names_itself_and_leaves_nothing_running(tiny_pair):
    config, script = tiny_pair
    missing = config.parent / "no-such-server"
    servers = json.loads(config.read_text())["mcpServers"]
    write_config(config, {"good": servers["a"], "broken": {"command": str(missing)}})
    with pytest.raises(McpConnectError) as error:
        load_mcp_tools(load_mcp_config(config))
    assert str(error.value) == (
        f"MCP server 'broken' ({missing}) could not be started: command not found: {missing}"
    )
    assert processes_running(str(script)) == []
    assert not any(t.name == "mcp-loop" for t in threading.enumerate())


@needs_mcp
def test_mcp_list_shows_the_configured_tools(tmp_path: Path):
    from typer.testing import CliRunner

    from app.cli.main import app

    config = write_config(tmp_path / "mcp.json", {"waypoint": waypoint_server(tmp_path / "ws")})
    result = CliRunner().invoke(app, ["mcp", "list", "--mcp-config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["server"], r["name"], r["trusted"]) for r in rows] == [
        ("waypoint", t.name, False) for t in default_tools(tmp_path / "unused")
    ]
    assert rows[0]["input_schema"]["required"] == ["expression"]


@needs_mcp
def test_tools_lists_mcp_tools_under_the_names_a_chat_gives_them(tmp_path: Path):
    config = write_config(tmp_path / "mcp.json", {"waypoint": waypoint_server(tmp_path / "ws")})
    result = run_cli("tools", "--json", "--mcp-config", str(config))
    assert result.returncode == 0, result.stderr.decode()
    tools = {t["name"]: t for t in json.loads(result.stdout)}
    # the built-in calculator keeps its name; the server's is renamed, as chat renames it
    assert tools["calculator"]["source"] == "built-in"
    assert tools["waypoint__calculator"]["source"] == "MCP waypoint (calculator)"
    assert tools["waypoint__calculator"]["needs_approval"] == "always"  # an untrusted server


def test_mcp_list_with_a_bad_config_exits_3_with_the_reason(tmp_path: Path):
    result = run_cli("mcp", "list", "--mcp-config", str(tmp_path / "missing.json"))
    assert result.returncode == 3
    assert (
        result.stderr.decode().strip()
        == f"error: MCP config {tmp_path / 'missing.json'} does not exist"
    )


@needs_mcp
def test_serve_writes_nothing_but_json_rpc_on_stdout_and_exits_when_stdin_closes(tmp_path: Path):
    """Anything else on stdout would break the client's parsing of the stream."""
    workspace = tmp_path / "ws"
    server = subprocess.Popen(
        [sys.executable, "-m", "app", "mcp", "serve", "--workspace", str(workspace)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert server.stdin and server.stdout

    def send(message: dict) -> None:
        server.stdin.write(json.dumps(message).encode() + b"\n")
        server.stdin.flush()

    try:
        send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "0"},
                },
            }
        )
        hello = json.loads(server.stdout.readline())
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "calculator", "arguments": {"expression": "2**10"}},
            }
        )
        answer = json.loads(server.stdout.readline())
        server.stdin.close()
        assert server.wait(timeout=10) == 0, server.stderr.read().decode() if server.stderr else ""
        assert server.stdout.read() == b""
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert hello["id"] == 1 and hello["result"]["serverInfo"]["name"] == "waypoint"
    assert answer == {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {"content": [{"type": "text", "text": "1024"}], "isError": False},
    }
    assert workspace.is_dir()
