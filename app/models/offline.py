"""The embedded `offline` model: a deterministic intent planner behind LangChain's chat-model interface.

It is not a language model. It reads the request (English or Chinese), calls the bound tools step by step,
and answers from their results; it streams tokens and tool-call chunks like a real endpoint.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

from app.models import answers
from app.models.facts import asked_fact, recall, stated_facts
from app.models.intents import Intent, is_chinese, parse_request
from graphs.messages import without_notes
from graphs.summarize import SUMMARIZE_INSTRUCTION, is_summary

OFFLINE_NOTICE = (
    "offline: Waypoint's embedded intent planner (deterministic, no network) — not a language model"
)


class OfflineChatModel(BaseChatModel):
    """Plans tool calls from the request and answers from the tool results; deterministic."""

    bound_tools: tuple[str, ...] = ()
    structured_schema: str | None = (
        None  # bound by with_structured_output (app/models/structured.py)
    )

    @property
    def _llm_type(self) -> str:
        return "waypoint-offline"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineChatModel:
        from app.models.structured import RESPONDERS

        names = tuple(convert_to_openai_tool(t)["function"]["name"] for t in tools)
        schema = names[0] if len(names) == 1 and names[0] in RESPONDERS else None
        return self.model_copy(update={"bound_tools": names, "structured_schema": schema})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.plan(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = self.plan(messages)
        for chunk in _chunks(reply):
            if run_manager and chunk.content:
                run_manager.on_llm_new_token(
                    str(chunk.content), chunk=ChatGenerationChunk(message=chunk)
                )
            yield ChatGenerationChunk(message=chunk)

    def plan(self, messages: Sequence[BaseMessage]) -> AIMessage:
        """The next message: tool calls for the first step not yet run, else the final answer.
        It reads the user's own words: notes put in front of them (past experience) are not
        requests."""
        messages = [without_notes(m) for m in messages]
        if self.structured_schema:
            from app.models.structured import respond

            return respond(self.structured_schema, messages)
        if _asks_for_summary(messages):
            return _answer(extractive_summary(str(messages[-1].content)), messages)
        turn_start = _last_human_index(messages)
        if turn_start is None:
            return _answer(answers.fallback(chinese=False), messages)
        request = str(messages[turn_start].content)
        earlier = _earlier_user_texts(messages[:turn_start])
        turn = list(messages[turn_start + 1 :])
        steps = _Walk(
            request,
            turn,
            earlier_messages=list(messages[:turn_start]),
            tools=set(self.bound_tools),
            earlier_texts=earlier,
        )
        calls = steps.next_calls()
        if calls:
            return AIMessage(content="", tool_calls=calls, id=_stable_id("ai", messages))
        text = steps.answer(earlier)
        return _answer(text, messages)


class _Walk:
    """Replays the plan of one request against the tool results already in the turn."""

    def __init__(
        self,
        request: str,
        turn: list[BaseMessage],
        earlier_messages: list[BaseMessage],
        tools: set[str],
        earlier_texts: Sequence[str] = (),
    ) -> None:
        self.request = request
        self.chinese = is_chinese(request)
        self.tools = tools
        self.intents = parse_request(request)
        self.intents += self._recall_for_unknown_fact(earlier_texts)
        # One list of calls: the tool loop makes one message per intent, a plan one per step.
        self.executed = [c for m in turn if isinstance(m, AIMessage) for c in m.tool_calls]
        self.results = {m.tool_call_id: m for m in turn if isinstance(m, ToolMessage)}
        self.earlier_results = [m for m in earlier_messages if isinstance(m, ToolMessage)]
        self.earlier_answer = next(
            (
                str(m.content)
                for m in reversed(earlier_messages)
                if isinstance(m, AIMessage) and not m.tool_calls and str(m.content).strip()
            ),
            "",
        )
        self.outcomes: list[tuple[Intent, list[tuple[ToolCall, ToolMessage | None]]]] = []
        self.pending: list[ToolCall] = []
        self._walk()

    def _walk(self) -> None:
        executed = iter(self.executed)
        for index, intent in enumerate(self.intents):
            calls = self._calls_for(intent, index)
            if not calls:
                # A bare "what's the difference?" with no forecasts to compare is not a step.
                if not intent.args.get("follow_up") and not intent.args.get("optional"):
                    self.outcomes.append((intent, []))
                continue
            made = list(itertools.islice(executed, len(calls)))
            if not made:
                self.pending = calls if self.tools else []
                self.outcomes.append((intent, [(c, None) for c in calls]))
                if self.pending:
                    return
                continue
            self.outcomes.append((intent, [(c, self.results.get(c["id"])) for c in made]))

    def _recall_for_unknown_fact(self, earlier_texts: Sequence[str]) -> list[Intent]:
        """A question about a fact this thread never heard is looked up in long-term memory."""
        asked = _fact_answer(self.request, list(earlier_texts))
        if asked is None or asked[2] is not None or any(i.kind == "recall" for i in self.intents):
            return []
        key, topic, _ = asked
        query = topic or {"name": "name", "number": "number", "home": "live"}.get(key, self.request)
        return [Intent("recall", 0, {"query": query, "optional": True, "for_fact": True})]

    def next_calls(self) -> list[ToolCall]:
        return self.pending

    def _calls_for(self, intent: Intent, index: int) -> list[ToolCall]:
        args_list = _tool_args(intent, self)
        tool = TOOL_FOR_INTENT[intent.kind]
        if args_list is None or (self.tools and tool not in self.tools):
            return []
        ran = {c["name"] for c in self.executed}
        if intent.args.get("optional") and tool not in self.tools | ran:
            return []
        return [
            ToolCall(
                name=tool, args=args, id=_call_id(self.request, index, n, args), type="tool_call"
            )
            for n, args in enumerate(args_list)
        ]

    def successful(self, tool: str) -> list[tuple[ToolCall, str]]:
        return [
            (call, str(result.content))
            for _, pairs in self.outcomes
            for call, result in pairs
            if result is not None and result.status != "error" and call["name"] == tool
        ]

    def compared_forecasts(self) -> tuple[dict, dict] | None:
        return compared_forecasts(self)

    def answer(self, earlier: list[str]) -> str:
        asked = _fact_answer(self.request, earlier)
        if any(i.kind == "recall" for i, pairs in self.outcomes if pairs):
            asked = None  # long-term memory answers it below
        parts = answers.facts_part(stated_facts(self.request), asked, self.chinese)
        for intent, pairs in self.outcomes:
            parts.extend(answers.describe(intent, pairs, self))
        if not parts:
            return answers.fallback(self.chinese)
        return "\n".join(parts)


TOOL_FOR_INTENT = {
    "run_code": "run_python",
    "search": "web_search",
    "remember": "remember",
    "recall": "recall",
    "time": "current_time",
    "weather": "get_weather",
    "compare": "calculator",
    "calculate": "calculator",
    "list": "list_files",
    "read": "read_file",
    "write": "write_file",
}


def _tool_args(intent: Intent, walk: _Walk) -> list[dict] | None:
    kind, args = intent.kind, intent.args
    if kind == "time" or kind == "list":
        return [{}] if kind == "time" else [{"path": "."}]
    if kind == "weather":
        return [{"city": c, "unit": args["unit"], "date": args["date"]} for c in args["cities"]]
    if kind == "run_code":
        return [{"code": args["code"]}]
    if kind == "search":
        return [{"query": args["query"], "max_results": 3}]
    if kind == "remember":
        return [{"fact": args["fact"]}]
    if kind == "recall":
        return [{"query": args["query"]}]
    if kind == "calculate":
        return [{"expression": args["expression"]}]
    if kind == "read":
        return [{"path": args["path"]}]
    if kind == "write":
        content = args["content"]
        if content is None:
            # This turn's results, else the literal text, else "save that": the previous answer.
            content = walk_summary(walk) or args.get("text") or walk.earlier_answer
        return [{"path": args["path"], "content": content}] if content else None
    if kind == "compare":
        pair = compared_forecasts(walk)
        return [{"expression": f"{pair[0]['high']} - {pair[1]['high']}"}] if pair else None
    return None


def compared_forecasts(walk: _Walk) -> tuple[dict, dict] | None:
    """The two forecasts to compare: from this turn, else the latest two from earlier turns."""
    current = [json.loads(text) for _, text in walk.successful("get_weather")]
    if len(current) >= 2:
        return current[0], current[1]
    earlier = [
        answers.json_object(m.content) for m in walk.earlier_results if m.name == "get_weather"
    ]
    earlier = [f for f in earlier if f and "high" in f]
    return (earlier[-2], earlier[-1]) if len(earlier) >= 2 else None


def walk_summary(walk: _Walk) -> str:
    """What a write with no explicit content saves: the results gathered so far, one per line."""
    lines = []
    for intent, pairs in walk.outcomes:
        if intent.kind in {"write", "read", "list"}:
            continue
        lines.extend(answers.describe(intent, pairs, walk))
    return "\n".join(lines) + "\n" if lines else ""


def _fact_answer(request: str, earlier: list[str]) -> tuple[str, str, object] | None:
    asked = asked_fact(request)
    if asked is None:
        return None
    key, topic = asked
    return key, topic, recall(key, topic, earlier)


def _earlier_user_texts(messages: Sequence[BaseMessage]) -> list[str]:
    """What the user said before this turn, including what a summary kept of older turns."""
    texts = []
    for message in messages:
        if isinstance(message, HumanMessage):
            texts.append(str(message.content))
        elif is_summary(message):
            texts += [
                line.split("user: ", 1)[1]
                for line in str(message.content).splitlines()
                if "user: " in line
            ]
    return texts


def _asks_for_summary(messages: Sequence[BaseMessage]) -> bool:
    return (
        bool(messages)
        and isinstance(messages[0], SystemMessage)
        and (messages[0].content == SUMMARIZE_INSTRUCTION)
    )


def extractive_summary(transcript: str, limit: int = 160) -> str:
    """What the user said (so stated facts survive, verbatim) and each tool result, shortened."""
    kept = []
    for line in transcript.splitlines():
        if line.startswith(("user: ", "earlier summary: ", "tool result")):
            kept.append(line if len(line) <= limit else line[:limit] + "…")
    return "\n".join(kept) or "(nothing to summarise)"


def _last_human_index(messages: Sequence[BaseMessage]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return index
    return None


def _digest(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]


def _stable_id(prefix: str, messages: Sequence[BaseMessage]) -> str:
    return f"{prefix}-offline-{_digest(len(messages), *(m.content for m in messages[-3:]))}"


def _call_id(request: str, stage: int, index: int, args: dict) -> str:
    return f"call_{_digest(request, stage, index, json.dumps(args, sort_keys=True))}"


def _answer(text: str, messages: Sequence[BaseMessage]) -> AIMessage:
    return AIMessage(content=text, id=_stable_id("ai", messages))


def _chunks(reply: AIMessage) -> Iterator[AIMessageChunk]:
    """Text as word-sized tokens; tool calls as tool_call_chunks with the arguments in pieces."""
    for token in re.findall(r"\s*[\u4e00-\u9fff]|\s*[^\s\u4e00-\u9fff]+|\s+", str(reply.content)):
        yield AIMessageChunk(content=token, id=reply.id)
    for index, call in enumerate(reply.tool_calls):
        arguments = json.dumps(call["args"], ensure_ascii=False)
        yield AIMessageChunk(
            content="",
            id=reply.id,
            tool_call_chunks=[{"name": call["name"], "args": "", "id": call["id"], "index": index}],
        )
        for start in range(0, len(arguments), 16):
            piece = arguments[start : start + 16]
            yield AIMessageChunk(
                content="",
                id=reply.id,
                tool_call_chunks=[{"name": None, "args": piece, "id": None, "index": index}],
            )
