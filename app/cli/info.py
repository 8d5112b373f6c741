"""What the agent is made of: `graph` (a strategy's state machine), `doctor` (configuration and
health) and `tools` (every tool the model can call)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from app.cli.io import Invocation, load_settings
from app.cli.options import DbOption, JsonOption

commands = typer.Typer()


@commands.command("graph")
def draw_graph(
    ctx: typer.Context,
    strategy: Annotated[
        str, typer.Option("--strategy", help="react | plan | reflexion | routed.")
    ] = "react",
) -> None:
    """Print a strategy's state machine as a Mermaid diagram (its tool-loop subgraph too)."""
    io: Invocation = ctx.obj
    from app.errors import UsageError
    from graphs.strategies import UnknownStrategyError, mermaid

    try:
        io.out.print(mermaid(strategy), markup=False, highlight=False)
    except UnknownStrategyError as exc:
        raise UsageError(str(exc)) from None


@commands.command()
def doctor(
    ctx: typer.Context,
    ping: Annotated[
        bool,
        typer.Option(
            "--ping", help="Send a tiny request to the model, and a tool-call round trip."
        ),
    ] = False,
    model: Annotated[
        str | None, typer.Option("--model", help="offline | openai:<name> (env APP_MODEL).")
    ] = None,
    tool_protocol: Annotated[
        str | None,
        typer.Option("--tool-protocol", help="native | react (env APP_TOOL_PROTOCOL)."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Print the resolved configuration (secrets masked) and check the database and workspace."""
    io: Invocation = ctx.obj
    from app.cli import doctor as checks

    settings = load_settings(db=db, model=model, tool_protocol=tool_protocol)
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


@commands.command("tools")
def list_tools(
    ctx: typer.Context,
    as_json: JsonOption = False,
    mcp_config: Annotated[
        Path | None, typer.Option("--mcp-config", help="Include the tools of these MCP servers.")
    ] = None,
    db: DbOption = None,
) -> None:
    """List every tool the agent can call, with its description and JSON schema."""
    io: Invocation = ctx.obj
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from app.service.runtime import open_runtime
    from graphs.shared.approvals import risk_of

    settings = load_settings(db=db, mcp_config=mcp_config, model="offline")
    with open_runtime(settings) as runtime:
        described = [
            {
                **convert_to_openai_tool(tool)["function"],
                "needs_approval": "sometimes"
                if (tool.metadata or {}).get("risk") or risk_of(tool, {})
                else "no",
            }
            for tool in runtime.context.tools
        ]
    if as_json:
        io.out.print_json(json.dumps(described, ensure_ascii=False))
        return
    table = Table("tool", "description", "arguments", "approval")
    for tool in described:
        arguments = ", ".join(tool.get("parameters", {}).get("properties", {})) or "-"
        table.add_row(
            tool["name"], tool["description"].split("\n")[0], arguments, tool["needs_approval"]
        )
    io.out.print(table)
