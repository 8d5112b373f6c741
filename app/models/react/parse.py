"""Parsing a ReAct reply: `Thought:` / `Action:` / `Action Input:` / `Final Answer:` text into tool
calls or an answer, with format mistakes as invalid calls whose error says what to write instead."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, InvalidToolCall, ToolCall

from app.models.react.schema import ReActTool, json_type, schema_errors

FORMAT_HINT = (
    "Reply with either 'Action: <tool>' + 'Action Input: {json}' or 'Final Answer: <answer>'."
)
THOUGHT_ONLY = "the reply has a Thought but neither an Action nor a Final Answer"

_MARKER = re.compile(
    r"^[ \t>*#`-]*(?P<key>thought|action[ _]?input|action|final[ _]?answer)[ \t*]*:[ \t*]*",
    re.IGNORECASE | re.MULTILINE,
)
_OBSERVATION = re.compile(
    r"^[ \t>*#-]*observation[ \t]*(?:\([^)\n]*\))?[ \t*]*:", re.IGNORECASE | re.MULTILINE
)
# Tool-call syntaxes other than ReAct's (prose "Action: x", Hermes/Llama tags, JSON call objects).
_CALL_SYNTAX = re.compile(
    r"\baction(?:[ _]?input)?\s*:|<tool_call>|<function[=>]|\"(?:tool|action|function)\"\s*:",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ParsedAction:
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class InvalidAction:
    """A call the model attempted but got wrong; `raw` is what it wrote, `error` how to fix it."""

    name: str | None
    raw: str
    error: str


@dataclass(frozen=True)
class ParsedReply:
    """One inner reply: a final answer, or actions (valid and invalid) with the thought before them."""

    text: str
    thought: str = ""
    final_answer: str | None = None
    actions: tuple[ParsedAction, ...] = ()
    invalid: tuple[InvalidAction, ...] = ()

    def to_message(self, *, salt: str = "", **fields: Any) -> AIMessage:
        """The AIMessage Waypoint's graph expects; call ids are derived from salt, text and index."""
        if self.final_answer is not None:
            return AIMessage(content=self.final_answer, **fields)
        ids = (call_id(salt, self.text, index) for index in itertools.count())
        calls = [
            ToolCall(name=a.name, args=a.args, id=next(ids), type="tool_call") for a in self.actions
        ]
        invalid = [
            InvalidToolCall(
                name=i.name, args=i.raw, id=next(ids), error=i.error, type="invalid_tool_call"
            )
            for i in self.invalid
        ]
        return AIMessage(
            content=self.thought, tool_calls=calls, invalid_tool_calls=invalid, **fields
        )


def parse_react(text: str, tools: Sequence[ReActTool]) -> ParsedReply:
    """Read a ReAct reply. Format mistakes become `invalid` entries whose error says what to write."""
    text = cut_observation(text).strip()
    if not text:
        return _format_error(text, "the reply is empty")
    head, final = _split_final_answer(text)
    matches = list(_MARKER.finditer(head))
    thoughts, actions, invalid = _read_steps(head, matches, tools)
    thought = "\n".join(t for t in thoughts if t)
    if final is not None:
        return _final_answer(text, thought, final, acted=bool(actions or invalid))
    if actions or invalid:
        return ParsedReply(text, thought, actions=tuple(actions), invalid=tuple(invalid))
    if matches:
        return _format_error(text, THOUGHT_ONLY)
    if looks_like_action(text, tools):
        return _format_error(
            text, "the reply looks like a tool call but is not in the ReAct format"
        )
    return ParsedReply(text, final_answer=text)


def _read_steps(
    head: str, matches: list[re.Match[str]], tools: Sequence[ReActTool]
) -> tuple[list[str], list[ParsedAction], list[InvalidAction]]:
    """The thoughts, the actions and the format mistakes of the marked lines before the answer,
    in order (the text before the first marker is a thought too)."""
    thoughts = [_clean(head[: matches[0].start()] if matches else head)]
    actions: list[ParsedAction] = []
    invalid: list[InvalidAction] = []
    pending: str | None = None  # the tool named by an `Action:` line, until its input is read
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(head)
        key, value = match["key"].lower(), head[match.end() : end].strip()
        if key == "thought":
            thoughts.append(_clean(value))
        elif key == "action":
            if pending is not None:
                invalid.append(_missing_input(pending))
            pending = _tool_name(value)
        elif pending is None:
            problem = "'Action Input:' needs an 'Action: <tool>' line before it"
            invalid.append(InvalidAction(None, value, f"{problem}. {FORMAT_HINT}"))
        else:
            outcome = _action(pending, value, tools)
            if isinstance(outcome, ParsedAction):
                actions.append(outcome)
            else:
                invalid.append(outcome)
            pending = None
    if pending is not None:
        invalid.append(_missing_input(pending))
    return thoughts, actions, invalid


def _final_answer(text: str, thought: str, final: str, *, acted: bool) -> ParsedReply:
    """A reply with a `Final Answer:`, which must neither act too nor be empty."""
    if acted:
        return _format_error(text, "the reply has both an Action and a Final Answer")
    if not final:
        return _format_error(text, "the Final Answer is empty")
    return ParsedReply(text, thought, final_answer=final)


def is_thought_only(reply: ParsedReply) -> bool:
    """The reply reasons (`Thought:`) but neither acts nor answers."""
    return len(reply.invalid) == 1 and reply.invalid[0].error.startswith(THOUGHT_ONLY)


def unparsed_answer(reply: ParsedReply) -> ParsedReply:
    """The reply's own words as the answer, without the protocol's markers."""
    words = _clean(_MARKER.sub("", reply.text)) or reply.text
    return ParsedReply(reply.text, final_answer=words)


def cut_observation(text: str) -> str:
    """Drop everything from a line starting with `Observation:` on: the model invented a result."""
    match = _OBSERVATION.search(text)
    return text[: match.start()] if match else text


def looks_like_action(text: str, tools: Sequence[ReActTool]) -> bool:
    """Prose that tries to call a tool in some other syntax (so it is not a final answer)."""
    if _CALL_SYNTAX.search(text):
        return True
    for tool in tools:
        name = re.escape(tool.name)
        if re.search(rf"(?<![\w-]){name}[(\[]|\"name\"\s*:\s*\"{name}\"", text):
            return True
    return False


def call_id(salt: str, text: str, index: int) -> str:
    """Deterministic and unique per call: the same reply at the same point gets the same ids."""
    return f"react_{digest(salt, text, index)}"


def digest(*parts: object) -> str:
    """A short stable hash of `parts`, for deterministic call and message ids."""
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:24]


def _split_final_answer(text: str) -> tuple[str, str | None]:
    """Text before the first `Final Answer:` marker, and everything after it (or None)."""
    for match in _MARKER.finditer(text):
        if match["key"].lower().startswith("final"):
            return text[: match.start()], text[match.end() :].strip()
    return text, None


def _action(name: str, raw: str, tools: Sequence[ReActTool]) -> ParsedAction | InvalidAction:
    tool = _find_tool(name, tools)
    if tool is None:
        valid = ", ".join(t.name for t in tools)
        where = f"Valid tools: {valid}." if valid else "No tools are available in this step."
        return InvalidAction(name, raw, f"there is no tool named '{name}'. {where} {FORMAT_HINT}")
    args, problem = _json_object(raw)
    if args is None:
        return InvalidAction(tool.name, raw, f"{problem}. {_expected(tool)}")
    if errors := schema_errors(args, tool.parameters):
        detail = f"invalid arguments for {tool.name}: {'; '.join(errors)}"
        return InvalidAction(tool.name, raw, f"{detail}. {_expected(tool)}")
    return ParsedAction(tool.name, args)


def _find_tool(name: str, tools: Sequence[ReActTool]) -> ReActTool | None:
    exact = [t for t in tools if t.name == name]
    folded = [t for t in tools if t.name.lower() == name.lower()]
    return exact[0] if exact else folded[0] if len(folded) == 1 else None


def _json_object(raw: str) -> tuple[dict[str, Any] | None, str]:
    """The arguments object (code fences and text around it tolerated), or None and the problem."""
    body = re.sub(r"^```[\w-]*[ \t]*\n?|\n?```\s*$", "", raw.strip()).strip().strip("`").strip()
    if body.lower() in {"", "none", "null"}:
        return {}, ""
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        value = _leading_object(body)
        if value is None and "{" not in body:
            return None, f"Action Input must be one JSON object, not {body[:60]!r}"
        if value is None:
            where = f"line {exc.lineno}, column {exc.colno}"
            return None, f"Action Input is not valid JSON: {exc.msg} at {where}"
    if not isinstance(value, dict):
        return None, f"Action Input must be one JSON object, not {json_type(value)}"
    return value, ""


def _leading_object(body: str) -> Any:
    """The first complete JSON object in `body`, ignoring text around it."""
    start = body.find("{")
    try:
        return json.JSONDecoder().raw_decode(body[start:])[0] if start >= 0 else None
    except json.JSONDecodeError:
        return None


def _expected(tool: ReActTool) -> str:
    example = json.dumps(_example(tool.parameters), ensure_ascii=False)
    return f"Expected: Action: {tool.name}\nAction Input: {example}"


def _example(schema: dict[str, Any]) -> dict[str, Any]:
    """Required arguments with placeholder values, for error messages."""
    properties = schema.get("properties", {})
    return {n: _placeholder(n, properties.get(n, {})) for n in schema.get("required", [])}


def _placeholder(name: str, spec: dict[str, Any]) -> Any:
    if spec.get("enum"):
        return spec["enum"][0]
    kind = spec.get("type")
    values = {"integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}
    return values.get(kind, f"<{name}>") if isinstance(kind, str) else f"<{name}>"


def _missing_input(name: str) -> InvalidAction:
    return InvalidAction(
        name, "", f"'Action: {name}' has no 'Action Input:' line after it. {FORMAT_HINT}"
    )


def _format_error(text: str, problem: str) -> ParsedReply:
    return ParsedReply(text, invalid=(InvalidAction(None, text, f"{problem}. {FORMAT_HINT}"),))


def _tool_name(value: str) -> str:
    first = value.strip().splitlines()[0] if value.strip() else ""
    return first.strip(" \t`*'\"").rstrip(".:").strip()


def _clean(text: str) -> str:
    return text.strip().strip("`*").strip()
