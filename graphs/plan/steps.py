"""Plan-and-Solve helpers: the planner's prompts, plan validation against the tools, and the
`{{step N}}` / `{{step N.field}}` references one step's arguments make to earlier results."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from graphs.plan.state import Plan
from graphs.shared.tool_calls import invalid_arguments_message

REFERENCE = re.compile(r"\{\{\s*step\s+(\d+)(?:\.([\w-]+))?\s*\}\}")
PLANNER_PROMPT = (
    "You are the planner. Plan how to answer the user's last message with the tools below: an "
    "ordered list of steps, each one tool call with its arguments and a short reason. Use as few "
    "steps as the request needs, and no steps when no tool is needed. A string argument may use "
    "the result of an earlier step: {{step N}} is its whole text, {{step N.field}} one field of a "
    "JSON result. When what a later step should do depends on what an earlier result says (which "
    "of two values is larger, say), plan up to there and set continues: you are asked for the "
    "rest once those steps have run. At most {max_steps} steps.\n\nTools:\n{tools}"
)
REPLAN_INSTRUCTION = (
    "Step {number} ({tool}) failed: {error}\nSteps 1 to {done} have run; their results are above. "
    "Send a new plan for what remains of the request only: do not repeat steps that ran, and avoid "
    "the failed call. Your steps are numbered from {next_number}; references to steps 1 to {done} "
    "keep their numbers."
)
CONTINUE_INSTRUCTION = (
    "Steps 1 to {done} have run; their results are above. Your plan said more would follow: send "
    "the steps that remain of the request, using what those results say. Your steps are numbered "
    "from {next_number}; references to steps 1 to {done} keep their numbers."
)
INVALID_PLAN_INSTRUCTION = "Your plan was not valid: {error}\nSend a corrected plan."
TOOL_LINE = "- {name}({signature}): {description}"


class StepSkippedError(Exception):
    """A step uses the result of a step that failed or was skipped, so it cannot run."""


def tools_description(tools: Sequence[BaseTool]) -> str:
    return "\n".join(
        TOOL_LINE.format(
            name=t.name, signature=_signature(t), description=_first_line(t.description)
        )
        for t in tools
    )


def planner_prompt(tools: Sequence[BaseTool], max_steps: int) -> str:
    return PLANNER_PROMPT.replace("{max_steps}", str(max_steps)).replace(
        "{tools}", tools_description(tools) or "(no tools are enabled)"
    )


def _signature(tool: BaseTool) -> str:
    properties = _schema_properties(tool)
    return ", ".join(f"{key}: {spec.get('type', 'any')}" for key, spec in properties.items())


def _schema_properties(tool: BaseTool) -> dict:
    schema = tool.tool_call_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema().get("properties", {})
    return (schema or {}).get("properties", {}) if isinstance(schema, dict) else {}


def _first_line(text: str) -> str:
    return (text or "").strip().split("\n")[0]


def plan_problems(
    plan: Plan, tools_by_name: dict[str, BaseTool], first_number: int, max_steps: int
) -> list[str]:
    """Why `plan` cannot run (empty when it can): unknown tools, arguments that do not fit the
    tool's schema, references to steps that do not come earlier, too many steps."""
    problems = []
    if first_number - 1 + len(plan.steps) > max_steps:
        problems.append(f"the plan has more than {max_steps} steps; merge or drop some")
    for offset, step in enumerate(plan.steps):
        number = first_number + offset
        tool = tools_by_name.get(step.tool)
        if tool is None:
            valid = ", ".join(sorted(tools_by_name)) or "(none)"
            problems.append(f"step {number}: there is no tool named '{step.tool}'; valid: {valid}")
            continue
        problems += [f"step {number}: {p}" for p in _argument_problems(tool, step.arguments)]
        problems += [
            f"step {number}: {{{{step {ref}}}}} does not refer to an earlier step"
            for ref in referenced_steps(step.arguments)
            if not 1 <= ref < number
        ]
    return problems


def _argument_problems(tool: BaseTool, arguments: dict[str, Any]) -> list[str]:
    schema = tool.tool_call_schema
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return []
    try:
        schema.model_validate(arguments)
    except ValidationError as exc:
        return [invalid_arguments_message(tool.name, exc, tool)]
    return []


def referenced_steps(value: Any) -> list[int]:
    """The step numbers a value's strings refer to, in order."""
    if isinstance(value, str):
        return [int(m.group(1)) for m in REFERENCE.finditer(value)]
    if isinstance(value, dict):
        return [n for item in value.values() for n in referenced_steps(item)]
    if isinstance(value, list):
        return [n for item in value for n in referenced_steps(item)]
    return []


def resolve_references(value: Any, results: Sequence[dict]) -> Any:
    """`value` with every reference replaced by the referenced result; a reference to a step that
    did not succeed raises StepSkippedError."""
    if isinstance(value, dict):
        return {key: resolve_references(item, results) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve_references(item, results) for item in value]
    if not isinstance(value, str):
        return value
    return REFERENCE.sub(lambda match: _referenced_text(match, results), value)


def _referenced_text(match: re.Match, results: Sequence[dict]) -> str:
    number, field = int(match.group(1)), match.group(2)
    if not 1 <= number <= len(results) or results[number - 1]["status"] != "success":
        raise StepSkippedError(f"it needs the result of step {number}, which did not succeed")
    text = str(results[number - 1]["result"])
    if field is None:
        return text
    try:
        return str(json.loads(text)[field])
    except (ValueError, KeyError, TypeError):
        raise StepSkippedError(f"the result of step {number} has no field '{field}'") from None


def step_line(number: int, step: dict) -> str:
    arguments = json.dumps(step.get("arguments", {}), ensure_ascii=False)
    reason = f" — {step['reason']}" if step.get("reason") else ""
    return f"{number}. {step['tool']} {arguments}{reason}"
