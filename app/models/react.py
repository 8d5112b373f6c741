"""The ReAct text protocol for endpoints without native tool calling (`--tool-protocol react`).

`ReActChatModel` wraps any chat model: bound tools become a system prompt, tool calls and results become
plain text, and the `Action:` / `Final Answer:` reply is parsed back into tool calls or an answer.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManager, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    InvalidToolCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.constants import TAG_NOSTREAM

OBSERVATION_STOP = "\nObservation:"
FORMAT_HINT = (
    "Reply with either 'Action: <tool>' + 'Action Input: {json}' or 'Final Answer: <answer>'."
)

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
_JSON_TYPES = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


@dataclass(frozen=True)
class ReActTool:
    """What the protocol needs of a bound tool: name, description and argument JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]

    @classmethod
    def from_tool(cls, tool: Any) -> ReActTool:
        function = convert_to_openai_tool(tool)["function"]
        schema = function.get("parameters") or {"type": "object", "properties": {}}
        return cls(function["name"], function.get("description", ""), schema)


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
    preamble = _clean(head[: matches[0].start()] if matches else head)
    thoughts: list[str] = [preamble]
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
            (actions if isinstance(outcome, ParsedAction) else invalid).append(outcome)
            pending = None
    if pending is not None:
        invalid.append(_missing_input(pending))
    thought = "\n".join(t for t in thoughts if t)
    if final is not None:
        if actions or invalid:
            return _format_error(text, "the reply has both an Action and a Final Answer")
        if not final:
            return _format_error(text, "the Final Answer is empty")
        return ParsedReply(text, thought, final_answer=final)
    if actions or invalid:
        return ParsedReply(text, thought, actions=tuple(actions), invalid=tuple(invalid))
    if matches:
        return _format_error(
            text, "the reply has a Thought but neither an Action nor a Final Answer"
        )
    if looks_like_action(text, tools):
        return _format_error(
            text, "the reply looks like a tool call but is not in the ReAct format"
        )
    return ParsedReply(text, final_answer=text)


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


def schema_errors(value: Any, schema: dict[str, Any], where: str = "") -> list[str]:
    """Violations of the JSON-schema subset tools use (type, enum, required, properties, items)."""
    label = where or "arguments"
    for key in ("anyOf", "oneOf"):
        if key in schema and all(schema_errors(value, s, where) for s in schema[key]):
            return [f"{label}: {json.dumps(value)} does not match any allowed form"]
    errors = [e for sub in schema.get("allOf", []) for e in schema_errors(value, sub, where)]
    if "enum" in schema and value not in schema["enum"]:
        allowed = json.dumps(schema["enum"], ensure_ascii=False)
        return [*errors, f"{label}: must be one of {allowed}"]
    expected = schema.get("type")
    if expected and not _has_type(value, expected):
        return [*errors, f"{label}: expected {expected}, got {_json_type(value)}"]
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        missing = [n for n in schema.get("required", []) if n not in value]
        errors += [f"{_join(where, n)}: required argument is missing" for n in missing]
        for name, item in value.items():
            if name in properties:
                errors += schema_errors(item, properties[name], _join(where, name))
            elif extra is False:
                errors.append(f"{_join(where, name)}: unknown argument")
            elif isinstance(extra, dict):
                errors += schema_errors(item, extra, _join(where, name))
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{label}[{index}]")
    return errors


def react_system_prompt(tools: Sequence[ReActTool]) -> str:
    """The protocol: every tool with its argument schema, then the two reply formats."""
    answer_format = "Thought: <your reasoning>\nFinal Answer: <your answer to the user>"
    if not tools:
        return f"No tools are available in this step. Reply in this format:\n\n{answer_format}"
    listing = "\n".join(
        f"- {t.name}: {t.description}\n  arguments (JSON schema): "
        f"{json.dumps(t.parameters, ensure_ascii=False)}"
        for t in tools
    )
    names = ", ".join(t.name for t in tools)
    return (
        f"You can use these tools:\n\n{listing}\n\n"
        "To use a tool, reply in exactly this format and then stop:\n\n"
        "Thought: <why you need the tool>\n"
        f"Action: <one of: {names}>\n"
        "Action Input: <the arguments as one JSON object that follows the tool's schema>\n\n"
        'The result comes back in the next message as "Observation: <result>" (or '
        '"Observation (error): <what went wrong>"). Never write an Observation yourself. '
        "Use one tool per reply and repeat as often as needed.\n\n"
        f"When you can answer the user, reply in this format:\n\n{answer_format}"
    )


def to_react_messages(
    messages: Sequence[BaseMessage], tools: Sequence[ReActTool]
) -> list[BaseMessage]:
    """The conversation without tool roles: calls become Action text, results Observation text."""
    leading = next(
        (i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)), len(messages)
    )
    system = [m.text.strip() for m in messages[:leading] if m.text.strip()]
    prompt = "\n\n".join([*system, react_system_prompt(tools)])
    converted: list[BaseMessage] = [SystemMessage(prompt)]
    rest = messages[leading:]
    for is_result, group in itertools.groupby(rest, lambda m: isinstance(m, ToolMessage)):
        if is_result:
            results = list(group)
            _append_human(converted, "\n".join(observation(m, len(results) > 1) for m in results))
            continue
        for message in group:
            if isinstance(message, AIMessage):
                if text := assistant_text(message):
                    converted.append(AIMessage(text))
            elif isinstance(message, HumanMessage) and isinstance(message.content, str):
                _append_human(converted, message.content)
            else:
                converted.append(message)
    return converted


def assistant_text(message: AIMessage) -> str:
    """An AI message as the ReAct text that would have produced it."""
    thought = message.text.strip()
    if not (message.tool_calls or message.invalid_tool_calls):
        return f"Final Answer: {thought}" if thought else ""
    lines = [f"Thought: {thought}"] if thought else []
    for call in message.tool_calls:
        args = json.dumps(call["args"], ensure_ascii=False)
        lines += [f"Action: {call['name']}", f"Action Input: {args}"]
    for bad in message.invalid_tool_calls:
        raw = str(bad.get("args") or "")
        lines += [f"Action: {bad['name']}", f"Action Input: {raw}"] if bad.get("name") else [raw]
    return "\n".join(lines)


def observation(result: ToolMessage, labelled: bool = False) -> str:
    """A tool result as the user-side text the model reads; errors are marked as errors."""
    marks = [result.name or "tool"] if labelled else []
    if result.status == "error":
        marks.append("error")
    label = f" ({', '.join(marks)})" if marks else ""
    return f"Observation{label}: {result.text}"


def call_id(salt: str, text: str, index: int) -> str:
    """Deterministic and unique per call: the same reply at the same point gets the same ids."""
    return f"react_{_digest(salt, text, index)}"


def conversation_key(messages: Sequence[BaseMessage]) -> str:
    """Tells identical replies at different points of a thread apart, deterministically."""
    last = messages[-1] if messages else None
    return _digest(len(messages), (last.id or last.text) if last is not None else "")


class ReActChatModel(BaseChatModel):
    """Tool calling over plain text for an inner model that has no tool roles or tool API.

    There is deliberately no `_stream`: LangChain merges streamed chunks by re-parsing their
    tool_call_chunks, which drops an invalid call's error and can turn truncated JSON into a valid
    call. `_generate` reports the reply's text tokens through the callbacks instead, so LangGraph's
    "messages" stream still shows the answer as it is emitted, and the message itself is exact.
    """

    inner: BaseChatModel
    tools: tuple[ReActTool, ...] = ()
    stop_sequences: tuple[str, ...] = (OBSERVATION_STOP,)

    @property
    def _llm_type(self) -> str:
        return f"react-{self.inner._llm_type}"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ReActChatModel:
        """A copy that describes `tools` in its prompt; the inner model never sees a tool API."""
        return self.model_copy(update={"tools": tuple(ReActTool.from_tool(t) for t in tools)})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        stops = list(dict.fromkeys([*self.stop_sequences, *(stop or [])])) or None
        # nostream: LangGraph must not stream the raw protocol text; the parsed reply is streamed.
        config = {"callbacks": _inner_callbacks(run_manager), "tags": [TAG_NOSTREAM]}
        raw = self.inner.invoke(to_react_messages(messages, self.tools), config, stop=stops)
        salt = conversation_key(messages)
        reply = parse_react(raw.text, self.tools).to_message(
            salt=salt,
            id=raw.id or f"ai-react-{_digest(salt, raw.text)}",
            usage_metadata=getattr(raw, "usage_metadata", None),
            response_metadata=dict(raw.response_metadata),
        )
        if run_manager:
            for chunk in _token_chunks(reply):
                run_manager.on_llm_new_token(
                    str(chunk.content), chunk=ChatGenerationChunk(message=chunk)
                )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def wrap_react(model: BaseChatModel) -> ReActChatModel:
    """Give `model` tool calling through the ReAct text protocol."""
    return ReActChatModel(inner=model)


def _inner_callbacks(run_manager: CallbackManagerForLLMRun | None) -> CallbackManager | None:
    """Callbacks that make the inner call a child run of this one (tracing shows both)."""
    if run_manager is None:
        return None
    manager = CallbackManager(handlers=[], parent_run_id=run_manager.run_id)
    manager.set_handlers(run_manager.inheritable_handlers)
    manager.add_tags(run_manager.inheritable_tags)
    manager.add_metadata(run_manager.inheritable_metadata)
    return manager


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
        return None, f"Action Input must be one JSON object, not {_json_type(value)}"
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


def _has_type(value: Any, expected: str | list[str]) -> bool:
    for name in [expected] if isinstance(expected, str) else expected:
        if isinstance(value, bool) and name != "boolean":
            continue  # bool is an int subclass in Python, not in JSON
        if name == "integer" and isinstance(value, float) and value.is_integer():
            return True
        if isinstance(value, _JSON_TYPES.get(name, ())):
            return True
    return False


def _json_type(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    if value is None:
        return "null"
    return names.get(type(value), "an array" if isinstance(value, list) else "an object")


def _digest(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:24]


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


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


def _append_human(converted: list[BaseMessage], text: str) -> None:
    """Merge into a preceding user message: many chat templates require roles to alternate."""
    last = converted[-1] if converted else None
    if isinstance(last, HumanMessage) and isinstance(last.content, str):
        converted[-1] = HumanMessage(f"{last.content}\n\n{text}")
    else:
        converted.append(HumanMessage(text))


def _token_chunks(reply: AIMessage) -> Iterator[AIMessageChunk]:
    """The reply's text as word-sized tokens, carrying the reply's id (the renderer dedupes on it)."""
    for token in re.findall(r"\s*\S+|\s+", reply.text):
        yield AIMessageChunk(content=token, id=reply.id)
