"""What the agent is made of: `graph` (a strategy's state machine), `doctor` (configuration and
health) and `tools` (every tool the model can call)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from app.cli.io import Invocation, load_settings
from app.cli.options import (
    DbOption,
    JsonOption,
    ModelOption,
    Strategy,
    ToolProtocolOption,
    chosen,
    command_group,
    examples,
)
from app.cli.tables import Column, fitted_table
from graphs.catalog import DEFAULT_STRATEGY

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

commands = command_group()
DEFAULT_GRAPH = Strategy(DEFAULT_STRATEGY)


@commands.command("graph", epilog=examples("graph", "graph --strategy plan"))
def draw_graph(
    ctx: typer.Context,
    strategy: Annotated[
        Strategy, typer.Option("--strategy", help="Which strategy's graph.")
    ] = DEFAULT_GRAPH,
) -> None:
    """A strategy's state machine as a Mermaid diagram.

    The tool-loop subgraph a strategy runs is drawn too."""
    io: Invocation = ctx.obj
    from graphs.strategies import mermaid

    io.out.print(mermaid(strategy.value), markup=False, highlight=False)


@commands.command(
    epilog=examples(
        "doctor",
        "doctor --ping",
        "doctor --ping --model openai:llama3.1 --tool-protocol react",
        "doctor --forget-window --model openai:smollm2",
    )
)
def doctor(
    ctx: typer.Context,
    ping: Annotated[
        bool,
        typer.Option(
            "--ping", help="Send a tiny request to the model, and a tool-call round trip."
        ),
    ] = False,
    forget_window: Annotated[
        bool,
        typer.Option(
            "--forget-window",
            help="Forget the context window learned for this endpoint and model, then check.",
        ),
    ] = False,
    model: ModelOption = None,
    tool_protocol: ToolProtocolOption = None,
    db: DbOption = None,
) -> None:
    """Check the configuration, the database and the workspace.

    Secrets are masked; --ping also checks the model and its tool calls. Exit 1 when a check
    fails."""
    io: Invocation = ctx.obj
    from app.cli import doctor as checks

    settings = load_settings(db=db, model=model, tool_protocol=chosen(tool_protocol))
    if forget_window:
        from app.service.context import forget_learned_window

        io.out.print(forget_learned_window(settings), markup=False, highlight=False)
    table = Table("setting", "value", title="Waypoint configuration", box=box.SIMPLE_HEAD)
    for name, value in checks.configuration(settings):
        table.add_row(name, value)
    io.out.print(table)
    results = [checks.check_database(settings), checks.check_workspace(settings)]
    if ping:
        results += [
            checks.ping(settings),
            checks.probe_tools(settings),
            checks.check_window(settings),
        ]
    for check in results:
        mark = "[green]ok[/green]" if check.ok else "[red]FAIL[/red]"
        io.out.print(f"{mark}  {check.name}: {escape(check.detail)}")
    if not all(check.ok for check in results):
        raise typer.Exit(1)


@commands.command("tools", epilog=examples("tools", "tools --json --mcp-config servers.json"))
def list_tools(
    ctx: typer.Context,
    as_json: JsonOption = False,
    mcp_config: Annotated[
        Path | None,
        typer.Option(
            "--mcp-config", metavar="FILE", help="Include the tools of these MCP servers."
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Every tool the agent can call, and when it asks first."""
    io: Invocation = ctx.obj
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from app.service.runtime import open_runtime

    settings = load_settings(db=db, mcp_config=mcp_config, model="offline")
    # The runtime a chat would open: MCP tools get the names a chat gives them (`wp__calculator`
    # when a built-in tool has the name already).
    with open_runtime(settings) as runtime:
        described = [
            {
                **convert_to_openai_tool(tool)["function"],
                "needs_approval": approval_of(tool),
                "source": source_of(tool),
            }
            for tool in runtime.context.tools
        ]
    if as_json:
        io.print_json(described)
        return
    columns = [
        Column("tool"),
        Column("description", text=True),
        Column("arguments", priority=2),
        Column("approval", priority=1),
        Column("source", priority=3),
    ]
    rows = [
        [
            tool["name"],
            Text(tool["description"].split("\n")[0]),
            "\n".join(tool.get("parameters", {}).get("properties", {})) or "-",
            tool["needs_approval"],
            tool["source"],
        ]
        for tool in described
    ]
    io.out.print(fitted_table(columns, rows, io.out.width), soft_wrap=False)


def approval_of(tool: BaseTool) -> str:
    """When a call of the tool asks for approval (with `--approve ask`): always, never, or what
    its risk depends on."""
    from graphs.shared.approvals import risk_of

    metadata = tool.metadata or {}
    if risk_of(tool, {}) is not None:
        return "always"
    if metadata.get("risk") is not None:
        return str(metadata.get("approval", "depending on the arguments"))
    return "no"


def source_of(tool: BaseTool) -> str:
    """built-in, or the MCP server and the name the tool has there."""
    metadata = tool.metadata or {}
    server = metadata.get("mcp_server")
    if server is None:
        return "built-in"
    original = metadata.get("mcp_tool")
    return f"MCP {server}" + (f" ({original})" if original and original != tool.name else "")
