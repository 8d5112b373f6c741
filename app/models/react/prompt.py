"""What the inner model reads: the protocol's system prompt, and the conversation with tool calls
and tool results turned into Action and Observation text."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from app.models.react.schema import ReActTool
from graphs.shared.messages import is_notes


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
    # The fixed system prompt joins the tool instructions; a turn's notes stay a section of their
    # own (graphs/shared/messages.for_model), after that unchanging prefix.
    leading = next(
        (i for i, m in enumerate(messages) if not isinstance(m, SystemMessage) or is_notes(m)),
        len(messages),
    )
    system = [m.text.strip() for m in messages[:leading] if m.text.strip()]
    prompt = "\n\n".join([*system, react_system_prompt(tools)])
    converted: list[BaseMessage] = [SystemMessage(prompt)]
    rest = messages[leading:]
    for is_result, group in itertools.groupby(rest, lambda m: isinstance(m, ToolMessage)):
        if is_result:
            results = [m for m in group if isinstance(m, ToolMessage)]  # all of them
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


def _append_human(converted: list[BaseMessage], text: str) -> None:
    """Merge into a preceding user message: many chat templates require roles to alternate."""
    last = converted[-1] if converted else None
    if isinstance(last, HumanMessage) and isinstance(last.content, str):
        converted[-1] = HumanMessage(f"{last.content}\n\n{text}")
    else:
        converted.append(HumanMessage(text))
