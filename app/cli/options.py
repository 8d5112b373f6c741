"""Options that several commands share, declared once, and how --help shows them: plain text that
reads well at 80 columns, a metavar that says what to give (ID, PATH, SECONDS), choices listed, and
an examples block per command (`examples`)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import annotated_types
import typer

from app.cli.hints import PROGRAM
from graphs.catalog import DEFAULT_STRATEGY, STRATEGY_NAMES
from graphs.run_settings import ApprovalPolicy, definition, env_name


def command_group(**options: Any) -> typer.Typer:
    """A group of commands whose --help is plain text, as `llm` and click print it: compact at 80
    columns, choices shown as <a|b|c>, flags without a type, an examples block at the end."""
    return typer.Typer(rich_markup_mode=None, **options)


def examples(*lines: str) -> str:
    """An --help epilog: each line a command as it is typed (`waypoint` is put in front of a
    line that does not name it), kept as written."""
    commands = (line if PROGRAM in line.split() else f"{PROGRAM} {line}" for line in lines)
    return "\b\nExamples:\n" + "\n".join(f"  {command}" for command in commands)


def chosen(choice: StrEnum | None) -> str | None:
    """A choice option's value as the settings take it (a plain string)."""
    return None if choice is None else choice.value


# The strategies' names, found by graphs/catalog.py without LangGraph (so --help stays quick);
# the members exist at run time only, so a type checker sees a plain StrEnum.
if TYPE_CHECKING:
    Strategy = StrEnum
else:
    Strategy = StrEnum("Strategy", {name: name for name in STRATEGY_NAMES})


class ToolProtocol(StrEnum):
    native = "native"
    react = "react"


class StreamStyle(StrEnum):
    tokens = "tokens"
    updates = "updates"


DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="PATH|URL",
        help="SQLite file or postgresql://user@host/dbname URL (env APP_DB; default: "
        "checkpoints/ here or in a parent, else the user data directory).",
    ),
]
ThreadOption = Annotated[
    str, typer.Option("--thread", "-t", metavar="ID", help="Thread id, e.g. demo.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
WorkspaceOption = Annotated[
    Path | None,
    typer.Option(
        "--workspace",
        metavar="DIR",
        help="The only directory the file tools may use (env APP_WORKSPACE).",
    ),
]
ToolProtocolOption = Annotated[
    ToolProtocol | None,
    typer.Option(
        "--tool-protocol",
        help="How tools reach the model: native tool calls, or react (Thought/Action text) "
        "(env APP_TOOL_PROTOCOL).",
    ),
]
StrategyOption = Annotated[
    Strategy | None,
    typer.Option(
        "--strategy",
        help="How the agent works a turn (env APP_STRATEGY; default: the thread's own, "
        f"{DEFAULT_STRATEGY} for a new one).",
    ),
]


def run_option(name: str, flag: str | None = None, metavar: str | None = "N") -> Any:
    """The option of run setting `name` (graphs/run_settings.py): its help, its bounds and its
    environment variable from the setting's one definition (metavar None: the choices)."""
    setting = definition(name)
    about = setting.description or name.replace("_", " ")
    text = f"{about[0].upper()}{about[1:]} (env {env_name(name)})."
    low, high = _bounds(setting.metadata)
    flag = flag or f"--{name.replace('_', '-')}"
    return typer.Option(flag, help=text, metavar=metavar, min=low, max=high)


def _bounds(constraints: list[Any]) -> tuple[Any, Any]:
    """A setting's closed bounds (None: none) as click's min and max, shown in --help (an open
    one, such as max_seconds > 0, is checked with the others when the flags become a RunSpec)."""
    low = high = None
    for constraint in constraints:
        if isinstance(constraint, annotated_types.Ge):
            low = constraint.ge
        elif isinstance(constraint, annotated_types.Le):
            high = constraint.le
    return low, high


ModelOption = Annotated[str | None, run_option("model", metavar="offline|openai:NAME")]
UserOption = Annotated[str | None, run_option("user", metavar="NAME")]
# typer lists a Literal's values as the choices: <ask|auto|never>
ApproveOption = Annotated[ApprovalPolicy | None, run_option("approval", "--approve", metavar=None)]
MaxIterationsOption = Annotated[int | None, run_option("max_iterations")]
MaxRetriesOption = Annotated[int | None, run_option("max_retries")]
MaxSecondsOption = Annotated[float | None, run_option("max_seconds", metavar="SECONDS")]
MaxTokensPerTurnOption = Annotated[int | None, run_option("max_tokens_per_turn")]
MaxTrialsOption = Annotated[int | None, run_option("max_trials")]
