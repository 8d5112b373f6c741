"""One request replayed against the tool results already in the turn: its intents, the calls they
need, the next calls to make, and the answer once every call has a result."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Mapping, Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage

from app.models.offline import answers
from app.models.offline.facts import Fact, asked_fact, recall, stated_facts
from app.models.offline.intents import Intent, is_chinese, parse_request
from graphs.shared.messages import call_signature


class Walk:
    """Replays the plan of one request against the tool results already in the turn."""

    def __init__(
        self,
        request: str,
        turn: list[BaseMessage],
        earlier_messages: list[BaseMessage],
        tools: set[str],
        earlier_texts: Sequence[str] = (),
        avoided: Mapping[str, str] | None = None,
    ) -> None:
        """`avoided`: calls a lesson said not to make again (call signature → why)."""
        self.request = request
        self.avoided = dict(avoided or {})
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
        position = 0
        for index, intent in enumerate(self.intents):
            calls = self._calls_for(intent, index)
            if calls and all(self.avoids(call) for call in calls):
                self.outcomes.append((intent, [(c, None) for c in calls]))
                continue
            calls = [call for call in calls if not self.avoids(call)]
            if not calls:
                # A bare "what's the difference?" with no forecasts to compare is not a step.
                if not intent.args.get("follow_up") and not intent.args.get("optional"):
                    self.outcomes.append((intent, []))
                continue
            # Calls are matched to intents by tool: a plan leaves out intents whose tool it was
            # not offered, so the next call made may belong to a later intent.
            made = _leading(calls[0]["name"], self.executed[position : position + len(calls)])
            position += len(made)
            if not made:
                self.pending = calls if self.tools else []
                self.outcomes.append((intent, [(c, None) for c in calls]))
                if self.pending:
                    return
                continue
            self.outcomes.append((intent, [(c, self._result_of(c)) for c in made]))

    def _result_of(self, call: ToolCall) -> ToolMessage | None:
        return self.results.get(call["id"]) if call["id"] is not None else None

    def _recall_for_unknown_fact(self, earlier_texts: Sequence[str]) -> list[Intent]:
        """A question about a fact this thread never heard is looked up in long-term memory."""
        asked = fact_answer(self.request, list(earlier_texts))
        if asked is None or asked[2] is not None or any(i.kind == "recall" for i in self.intents):
            return []
        key, topic, _ = asked
        query = topic or {"name": "name", "number": "number", "home": "live"}.get(key, self.request)
        return [Intent("recall", 0, {"query": query, "optional": True, "for_fact": True})]

    def avoids(self, call: ToolCall) -> bool:
        return call_signature(call["name"], call["args"]) in self.avoided

    def next_calls(self) -> list[ToolCall]:
        return self.pending

    def _calls_for(self, intent: Intent, index: int) -> list[ToolCall]:
        args_list = tool_args(intent, self)
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

    def failed(self, tool: str) -> bool:
        return any(
            result is not None and result.status == "error" and call["name"] == tool
            for _, pairs in self.outcomes
            for call, result in pairs
        )

    def compared_forecasts(self) -> list[dict]:
        return compared_forecasts(self)

    def answer(self, earlier: list[str]) -> str:
        asked = fact_answer(self.request, earlier)
        if any(i.kind == "recall" for i, pairs in self.outcomes if pairs):
            asked = None  # long-term memory answers it below
        parts = answers.facts_part(stated_facts(self.request), asked, self.chinese)
        for intent, pairs in self.outcomes:
            parts.extend(answers.describe(intent, pairs, self))
        if not parts:
            return answers.small_talk(self.request, self.chinese) or answers.fallback(self.chinese)
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
    "unreadable": "calculator",
    "list": "list_files",
    "read": "read_file",
    "write": "write_file",
}


# The calls of the intents whose arguments are in the request's own words, one dict per call.
WORDED_ARGS: dict[str, Callable[[dict], list[dict]]] = {
    "time": lambda args: [{}],
    "list": lambda args: [{"path": "."}],
    "weather": lambda args: [
        {"city": city, "unit": args["unit"], "date": args["date"]} for city in args["cities"]
    ],
    "run_code": lambda args: [{"code": args["code"]}],
    "search": lambda args: [{"query": args["query"], "max_results": 3}],
    "remember": lambda args: [{"fact": args["fact"]}],
    "recall": lambda args: [{"query": args["query"]}],
    "read": lambda args: [{"path": args["path"]}],
}


def tool_args(intent: Intent, walk: Walk) -> list[dict] | None:
    """The arguments of the intent's calls, one dict per call; None when they need results the
    walk does not hold (yet)."""
    if intent.kind in WORDED_ARGS:
        return WORDED_ARGS[intent.kind](intent.args)
    if intent.kind == "calculate":
        return _calculation_args(intent.args, walk)
    if intent.kind == "write":
        return _write_args(intent.args, walk)
    if intent.kind == "compare":
        highs = [str(f["high"]) for f in compared_forecasts(walk)]
        return [{"expression": comparison_expression(highs)}] if highs else None
    return None


def walk_free_args(intent: Intent) -> list[dict] | None:
    """The arguments of the calls `intent` makes when they read nothing of the walk (None: they
    do, or it makes none)."""
    kind, args = intent.kind, intent.args
    if kind in WORDED_ARGS:
        return WORDED_ARGS[kind](args)
    if kind == "calculate" and "then" not in args:
        return [{"expression": args["expression"]}]
    if kind == "write" and args["content"]:
        return [{"path": args["path"], "content": args["content"]}]
    return None


def _calculation_args(args: dict, walk: Walk) -> list[dict] | None:
    if "then" not in args:
        return [{"expression": args["expression"]}]
    done = walk.successful("calculator")  # "then": on the result of the calculation before it
    if not done:
        return None
    previous = done[-1][1]  # a negative result in parentheses: "-7" then "** 2" is (-7) ** 2
    previous = f"({previous})" if previous.startswith("-") else previous
    return [{"expression": f"{previous} {args['then']}"}]


def _write_args(args: dict, walk: Walk) -> list[dict] | None:
    content = args["content"]
    if content is None and incomplete(walk):
        return None  # part of the results would read as all of them
    if content is None:
        # This turn's results, else the literal text, else "save that": the previous answer
        # (only when saving is all the request asks: never an unrelated earlier answer).
        alone = all(i.kind == "write" for i in walk.intents)
        content = walk_summary(walk) or args.get("text") or (walk.earlier_answer if alone else "")
    return [{"path": args["path"], "content": content}] if content else None


def compared_forecasts(walk: Walk) -> list[dict]:
    """The forecasts to compare (two or more, else none): from this turn, else the latest two from
    earlier turns."""
    current = [json.loads(text) for _, text in walk.successful("get_weather")]
    if walk.failed("get_weather"):
        return []  # a ranking without one of the cities asked about would be wrong
    if len(current) >= 2:
        return current
    parsed = [
        answers.json_object(m.content) for m in walk.earlier_results if m.name == "get_weather"
    ]
    earlier = [f for f in parsed if f and "high" in f]
    return earlier[-2:] if len(earlier) >= 2 else []


def comparison_expression(highs: list[str]) -> str:
    """Two highs: their difference (first minus second); more: the spread, warmest minus coldest."""
    if len(highs) == 2:
        return f"{highs[0]} - {highs[1]}"
    listed = ", ".join(highs)
    return f"max({listed}) - min({listed})"


def incomplete(walk: Walk) -> bool:
    """A result this turn was to gather failed, or a step could not run."""
    for intent, pairs in walk.outcomes:
        if intent.kind in {"write", "read", "list"}:
            continue
        if not pairs or any(r is None or r.status == "error" for _, r in pairs):
            return True
    return False


def walk_summary(walk: Walk) -> str:
    """What a write with no explicit content saves: the results gathered so far, one per line."""
    lines = []
    for intent, pairs in walk.outcomes:
        if intent.kind in {"write", "read", "list"}:
            continue
        lines.extend(answers.describe(intent, pairs, walk))
    return "\n".join(lines) + "\n" if lines else ""


def fact_answer(request: str, earlier: list[str]) -> tuple[str, str, Fact | None] | None:
    asked = asked_fact(request)
    if asked is None:
        return None
    key, topic = asked
    return key, topic, recall(key, topic, earlier)


def _leading(tool: str, calls: Sequence[ToolCall]) -> list[ToolCall]:
    """The calls to `tool` at the start of `calls`."""
    return list(itertools.takewhile(lambda call: call["name"] == tool, calls))


def digest(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]


def _call_id(request: str, stage: int, index: int, args: dict) -> str:
    return f"call_{digest(request, stage, index, json.dumps(args, sort_keys=True))}"
