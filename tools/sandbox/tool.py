"""The run_python tool: its argument model, the checks on the code it is given, and how a
RunResult is reported to the model."""

from __future__ import annotations

import re
from dataclasses import dataclass

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from tools.errors import ToolInputError
from tools.sandbox.cgroup import TreeBounds
from tools.sandbox.limits import KIB, MIB
from tools.sandbox.outcome import RunResult
from tools.sandbox.sandbox import Sandbox

MAX_CODE_CHARS = 20_000

_LIMIT_TEXT: dict[str, str] = {
    "cpu": "CPU time limit ({cpu} s)",
    "wall": "wall-clock limit ({wall:g} s); the program was killed",
    "memory": "memory limit ({memory})",
    "file_size": "file size limit ({file_size} MiB per file)",
    "disk": "disk limit ({disk} MiB in /tmp)",
    "output": "output limit ({output} KiB per stream); the program was killed",
    "processes": "process limit ({processes} processes and threads)",
}


def format_result(result: RunResult, sandbox: Sandbox) -> str:
    """The tool's answer: exit status, which limit was hit, then stdout and stderr."""
    status = f"killed by signal {result.signal}" if result.signal else str(result.exit_code)
    limit = "none"
    if result.limit_hit:
        limit = f"{result.limit_hit} — " + _LIMIT_TEXT[result.limit_hit].format(
            cpu=sandbox.cpu_seconds,
            wall=sandbox.wall_seconds,
            memory=memory_text(sandbox.bounds),
            file_size=sandbox.file_size_bytes // MIB,
            disk=sandbox.tmpfs_bytes // MIB,
            output=sandbox.output_bytes // KIB,
            processes=sandbox.bounds.max_processes,
        )
    return (
        f"exit status: {status}\n"
        f"limit hit: {limit}\n"
        f"stdout:\n{result.stdout or '(empty)'}\n"
        f"stderr:\n{result.stderr or '(empty)'}"
    )


def memory_text(bounds: TreeBounds) -> str:
    """The memory limit as the model should read it: the whole sandbox's, and each process's share
    in the rlimit fallback."""
    total = f"{bounds.memory_bytes // MIB} MiB for the whole sandbox"
    if bounds.mode != "rlimit":
        return total
    return f"{total}: {bounds.process_memory_bytes // MIB} MiB per process"


@dataclass(frozen=True)
class ReadResult:
    """A run_python result read back from the text `format_result` wrote."""

    status: str
    limit: str
    stdout: str
    stderr: str


RESULT_FORMAT = re.compile(
    r"exit status: (?P<status>.*)\nlimit hit: (?P<limit>.*)\nstdout:\n(?P<stdout>.*)\nstderr:\n"
    r"(?P<stderr>.*)",
    re.S,
)


def read_result(text: str) -> ReadResult | None:
    """The parts of a run_python result (an empty stream is ""), or None for any other text."""
    match = RESULT_FORMAT.fullmatch(text)
    if match is None:
        return None
    stdout, stderr = (
        match[name] if match[name] != "(empty)" else "" for name in ("stdout", "stderr")
    )
    return ReadResult(match["status"], match["limit"], stdout, stderr)


class RunPythonArgs(BaseModel):
    code: str = Field(
        description="A complete Python 3 program (standard library only); print what you need to see."
    )


def make_python_tool(sandbox: Sandbox) -> BaseTool:
    """Build the run_python tool bound to ``sandbox``."""

    def run_python(code: str) -> str:
        """Run a short Python 3 program in an isolated sandbox (no network, no files kept) and return its exit status, stdout and stderr."""
        if len(code) > MAX_CODE_CHARS:
            raise ToolInputError(
                f"the program is {len(code)} characters long; the limit is {MAX_CODE_CHARS}; "
                "send a shorter program"
            )
        if not code.strip():
            raise ToolInputError("the program is empty; send Python source code to run")
        return format_result(sandbox.run(code), sandbox)

    description = (
        f"{run_python.__doc__}\n\nOnly the standard library is available and nothing persists "
        f"between calls; /tmp is writable (up to {sandbox.tmpfs_bytes // MIB} MiB). Limits: "
        f"{sandbox.cpu_seconds} s CPU, {sandbox.wall_seconds:g} s wall clock, "
        f"memory {memory_text(sandbox.bounds)}, {sandbox.bounds.max_processes} processes and "
        f"threads, {sandbox.output_bytes // KIB} KiB of output per stream. A failing program is "
        "reported, not raised."
    )
    return StructuredTool.from_function(
        run_python, name="run_python", description=description, args_schema=RunPythonArgs
    )
