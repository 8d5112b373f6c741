"""Structured output for the offline planner: plans, verdicts, lessons and routes, derived from the
request and the tool results in the conversation (English and Chinese), returned as a tool call."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from app.models.offline import answers
from app.models.offline.intents import Intent, is_chinese, parse_request
from app.models.offline.walk import (
    TOOL_FOR_INTENT,
    Walk,
    comparison_expression,
    walk_free_args,
    walk_summary,
)
from app.text import plural
from graphs.plan.steps import REFERENCE
from graphs.shared.messages import call_signature
from graphs.shared.requests import request_of
from graphs.shared.tool_calls import for_user

REASONS = {
    "weather": ("weather for {city}", "查询{city}的天气"),
    "compare": ("the temperature difference", "计算温差"),
    "calculate": ("the arithmetic", "计算"),
    "write": ("save to {path}", "写入 {path}"),
    "read": ("read {path}", "读取 {path}"),
    "list": ("list the workspace", "列出工作区文件"),
    "time": ("the current time", "查询当前时间"),
    "run_code": ("run the program", "运行程序"),
    "search": ("search the documents", "搜索文档"),
    "remember": ("remember it", "记住它"),
    "recall": ("look it up in memory", "在记忆中查找"),
}


def respond(schema: str, messages: Sequence[BaseMessage]) -> AIMessage:
    """The reply of a model bound to one structured-output schema: a call to that schema."""
    args = RESPONDERS[schema](list(messages))
    digest = hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()[:16]
    call_id = f"call_{schema.lower()}_{digest}"
    return AIMessage(
        content="", tool_calls=[{"name": schema, "args": args, "id": call_id, "type": "tool_call"}]
    )


def _request(messages: list[BaseMessage]) -> tuple[int, str]:
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return index, str(messages[index].content)
    return len(messages), ""


def plan_args(messages: list[BaseMessage]) -> dict:
    """Every step the request needs, up to a save that must name a comparison's winner (which no
    reference can choose: the plan continues once the results are in); after steps ran, the
    rest of the plan, without the steps that need a failed one."""
    start, request = _request(messages)
    available = set(request_of(messages).get("tools", ()))
    earlier = messages[:start]
    steps = plan_for(request, available, earlier)
    turn = messages[start + 1 :]
    outcomes = [m.status for m in turn if isinstance(m, ToolMessage)]
    if not outcomes:
        first = steps[: _first_save_naming_a_winner(steps)]
        return {"steps": first, "continues": len(first) < len(steps)}
    failed = {n for n, status in enumerate(outcomes, 1) if status == "error"}
    steps = remaining_steps(steps, len(outcomes), failed)
    if not failed:
        summary = walk_summary(Walk(request, turn, earlier, available))
        steps = [_saving(step, summary) for step in steps]
    return {"steps": steps}


def _first_save_naming_a_winner(steps: list[dict]) -> int:
    """The index of the first write whose text uses a comparison of two forecasts or more."""
    comparisons = {
        number
        for number, step in enumerate(steps, 1)
        if step["tool"] == "calculator" and len(_compared_steps(step)) >= 2
    }
    for index, step in enumerate(steps):
        used = _references(step["arguments"]) if step["tool"] == "write_file" else []
        if comparisons & set(used):
            return index
    return len(steps)


def _compared_steps(step: dict) -> list[int]:
    return [
        int(n) for n in re.findall(r"\{\{step (\d+)\.high\}\}", step["arguments"]["expression"])
    ]


def _saving(step: dict, summary: str) -> dict:
    """A save of this turn's results writes them as the answer words them, winner named."""
    content = step["arguments"].get("content", "") if step["tool"] == "write_file" else ""
    if not summary or not REFERENCE.search(content):
        return step
    return {**step, "arguments": {**step["arguments"], "content": summary}}


def plan_for(request: str, available: set[str], earlier: list[BaseMessage]) -> list[dict]:
    chinese = is_chinese(request)
    steps: list[dict] = []
    intents = parse_request(request)
    # "save that" saves the previous answer only when saving is all the request asks.
    previous = _last_answer(earlier) if all(i.kind == "write" for i in intents) else ""
    for intent in intents:
        if available and TOOL_FOR_INTENT[intent.kind] not in available:
            continue
        tool = TOOL_FOR_INTENT[intent.kind]
        for arguments in _arguments(intent, steps, earlier, previous):
            reason = _reason(intent, arguments, chinese)
            steps.append({"tool": tool, "arguments": arguments, "reason": reason})
    return steps


def _arguments(
    intent: Intent, steps: list[dict], earlier: list[BaseMessage], previous: str
) -> list[dict]:
    if intent.kind == "compare":
        expression = _comparison(steps, earlier)
        return [{"expression": expression}] if expression else []
    if intent.kind == "calculate" and "then" in intent.args:  # on the result of the step before
        calculations = [n for n, step in enumerate(steps, 1) if step["tool"] == "calculator"]
        then = intent.args["then"]
        return [{"expression": f"{{{{step {calculations[-1]}}}}} {then}"}] if calculations else []
    if intent.kind == "write" and intent.args["content"] is None:
        zh = is_chinese(intent.args.get("text") or "") or any(
            is_chinese(step["reason"]) for step in steps
        )
        content = _results_text(steps, zh) or intent.args.get("text") or previous
        return [{"path": intent.args["path"], "content": content}] if content else []
    return walk_free_args(intent) or []


def _comparison(steps: list[dict], earlier: list[BaseMessage]) -> str | None:
    weather = [n for n, step in enumerate(steps, 1) if step["tool"] == "get_weather"]
    if len(weather) >= 2:
        return comparison_expression([f"{{{{step {n}.high}}}}" for n in weather])
    forecasts = [answers.json_object(m.content) for m in earlier if isinstance(m, ToolMessage)]
    highs = [f["high"] for f in forecasts if f and "high" in f]
    return f"{highs[-2]} - {highs[-1]}" if len(highs) >= 2 else None


def _results_text(steps: list[dict], zh: bool) -> str:
    """What "save it" writes: each earlier result as the sentence the answer would use, written
    with references the executor fills in (never a tool's raw JSON)."""
    kept = ("write_file", "read_file", "list_files")
    lines = [_sentence(n, steps, zh) for n, s in enumerate(steps, 1) if s["tool"] not in kept]
    return "\n".join(lines) + "\n" if lines else ""


def _sentence(number: int, steps: list[dict], zh: bool) -> str:
    tool, arguments = steps[number - 1]["tool"], steps[number - 1]["arguments"]
    fields = _Fields(number)
    if tool == "get_weather":
        return answers.weather_sentence(fields.with_unit(arguments.get("unit")), zh)
    if tool == "current_time":
        return answers.time_sentence(fields, zh)
    if tool == "calculator":
        compared = _compared_steps(steps[number - 1])
        if len(compared) >= 2:
            unit = answers.UNIT.get(steps[compared[0] - 1]["arguments"].get("unit"), "°")
            return _difference_sentence(number, list(dict.fromkeys(compared)), unit, zh)
        return f"{arguments['expression']} = {fields.whole}"
    if tool == "remember":
        return "已保存到长期记忆。" if zh else "Saved to long-term memory."
    return fields.whole


class _Fields(dict):
    """`{{step N.field}}` for any field asked for: a step's result before it exists."""

    def __init__(self, number: int) -> None:
        super().__init__()
        self.number = number
        self.whole = f"{{{{step {number}}}}}"

    def __missing__(self, field: str) -> str:
        return f"{{{{step {self.number}.{field}}}}}"

    def get(self, field: str, default: object = None) -> object:
        return self[field]

    def with_unit(self, unit: str | None) -> _Fields:
        self["unit"] = unit or "celsius"
        return self


def _difference_sentence(number: int, compared: list[int], unit: str, zh: bool) -> str:
    if len(compared) > 2:
        fields = [_Fields(n) for n in compared]
        if zh:
            highs = "、".join(f"{f['city_zh']} {f['high']}{unit}" for f in fields)
            return f"最高气温的差距（最暖减最冷）：{{{{step {number}}}}}{unit}（{highs}）。"
        highs = ", ".join(f"{f['city']} {f['high']}{unit}" for f in fields)
        return f"Spread of highs (warmest minus coldest): {{{{step {number}}}}}{unit} ({highs})."
    first, second = _Fields(compared[0]), _Fields(compared[1])
    highs = f"{first['high']}{unit} vs {second['high']}{unit}"
    if zh:
        return (
            f"最高气温差（{first['city_zh']}减{second['city_zh']}）：{{{{step {number}}}}}{unit}"
            f"（{highs}）。"
        )
    return (
        f"Difference in highs ({first['city']} minus {second['city']}): "
        f"{{{{step {number}}}}}{unit} ({highs})."
    )


def _last_answer(earlier: list[BaseMessage]) -> str:
    for message in reversed(earlier):
        if isinstance(message, AIMessage) and not message.tool_calls and str(message.content):
            return str(message.content)
    return ""


def _reason(intent: Intent, arguments: dict, chinese: bool) -> str:
    template = REASONS.get(intent.kind, (intent.kind, intent.kind))[int(chinese)]
    return template.format(city=arguments.get("city", ""), path=arguments.get("path", ""))


def remaining_steps(steps: list[dict], done: int, failed: set[int]) -> list[dict]:
    """The steps after the first `done`, minus those that need a failed (or dropped) step's
    result; references are renumbered to the steps' new places."""
    new_number = {n: n for n in range(1, done + 1) if n not in failed}
    kept: list[dict] = []
    for number, step in enumerate(steps[done:], done + 1):
        if any(ref not in new_number for ref in _references(step["arguments"])):
            continue
        new_number[number] = done + len(kept) + 1
        kept.append({**step, "arguments": _renumber(step["arguments"], new_number)})
    return kept


def _references(value: object) -> list[int]:
    text = json.dumps(value, ensure_ascii=False)
    return [int(match.group(1)) for match in REFERENCE.finditer(text)]


def _renumber(value: object, numbers: dict[int, int]) -> object:
    if isinstance(value, dict):
        return {key: _renumber(item, numbers) for key, item in value.items()}
    if isinstance(value, str):
        return REFERENCE.sub(lambda m: _reference(numbers[int(m.group(1))], m.group(2)), value)
    return value


def _reference(number: int, field: str | None) -> str:
    return f"{{{{step {number}.{field}}}}}" if field else f"{{{{step {number}}}}}"


def verdict_args(messages: list[BaseMessage]) -> dict:
    """Success when the last answer stands on tool results that all succeeded, and every call the
    request needs was made."""
    start, request = _request(messages)
    zh = is_chinese(request)
    attempt = messages[start + 1 :]
    answer = next((m for m in reversed(attempt) if _is_answer(m)), None)
    failures = [m for m in attempt if isinstance(m, ToolMessage) and m.status == "error"]
    if answer is None:
        return {"success": False, "reason": "没有给出回答。" if zh else "no answer was given"}
    if failures:  # named, not quoted: the card and the lesson say what the error was
        return {
            "success": False,
            "reason": f"{failures[0].name} 失败了" if zh else f"{failures[0].name} failed",
        }
    if str(answer.content).strip() in {answers.fallback(False), answers.fallback(True)}:
        reason = "离线规划器读不懂这个请求。" if zh else "the offline planner could not read it"
        return {"success": False, "reason": reason}
    missing = _not_done(request, attempt)
    if missing:
        return {
            "success": False,
            "reason": f"{missing} 没有完成" if zh else f"{missing} was not done",
        }
    used = sum(isinstance(m, ToolMessage) for m in attempt)
    reason = (
        f"回答基于 {used} 个工具结果。"
        if zh
        else f"the answer rests on {plural(used, 'tool result')}"
    )
    return {"success": True, "reason": reason}


def _not_done(request: str, attempt: list[BaseMessage]) -> str:
    """The first call the request needs that this attempt did not make."""
    walk = Walk(request, attempt, earlier_messages=[], tools=set())
    for _, pairs in walk.outcomes:
        for call, result in pairs:
            if result is None:
                return call["name"]
    return ""


def _is_answer(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage) and not message.tool_calls and bool(message.content)


def lesson_args(messages: list[BaseMessage]) -> dict:
    """What to do differently, from the failed call of the last attempt (or the lack of one): the
    call is named with its arguments, so the next attempt knows which one not to make again."""
    start, request = _request(messages)
    zh = is_chinese(request)
    attempt = messages[start + 1 :]
    failures = [m for m in attempt if isinstance(m, ToolMessage) and m.status == "error"]
    calls = {c["id"]: c for m in attempt if isinstance(m, AIMessage) for c in m.tool_calls}
    if failures and failures[0].tool_call_id in calls:
        failed = failures[0]
        call = calls[failed.tool_call_id]
        return {"lesson": avoid_lesson(call["name"], call["args"], for_user(failed), zh)}
    if zh:
        return {"lesson": "回答前确认请求的每一部分都有工具结果支持；做不到就直说。"}
    return {
        "lesson": "Before answering, check that every part of the request is backed by a tool "
        "result; if it cannot be, say so plainly."
    }


def avoid_lesson(name: str, args: dict, error: str, zh: bool) -> str:
    arguments = json.dumps(args, ensure_ascii=False, sort_keys=True)
    if zh:
        return f"{name} 失败了（{error[:160]}）。不要再调用 {name} {arguments}；用已知信息回答，并说明缺少什么。"
    return (
        f"{name} failed ({error[:160]}). Do not call {name} {arguments} again; answer with what "
        "is known and say what is missing."
    )


# A lesson of this turn starts its line ("- read_file failed …"); one recalled from another
# thread's experience is quoted inside its line ("- lesson for: … | read_file failed …") and is
# not a reason to skip a call now (the file may exist by now).
AVOIDED_CALL = re.compile(
    r"^(?:- )?(?P<name>\w+) (?:failed \((?P<reason>.*)\)\. Do not call|失败了（(?P<reason_zh>.*)）。不要再调用) "
    r"(?P=name) (?P<args>\{.*?\})(?: again;|；)",
    re.M,
)


def avoided_calls(notes: str) -> dict[str, str]:
    """The calls that lessons in `notes` (this model's own, from `avoid_lesson`) said not to make
    again: call signature → why (the error it gave)."""
    avoided = {}
    for match in AVOIDED_CALL.finditer(notes):
        try:
            args = json.loads(match["args"])
        except ValueError:
            continue
        reason = match["reason"] if match["reason"] is not None else match["reason_zh"]
        avoided[call_signature(match["name"], args)] = reason
    return avoided


def route_args(messages: list[BaseMessage]) -> dict:
    """Pure arithmetic → calculator; a greeting or thanks → small talk; anything else → tools."""
    _, request = _request(messages)
    intents = parse_request(request)
    if [i.kind for i in intents] == ["calculate"]:
        expression = intents[0].args["expression"]
        return {"path": "calculator", "expression": expression, "reason": "arithmetic only"}
    if not intents and answers.SMALL_TALK.match(request):
        return {"path": "small_talk", "expression": None, "reason": "a greeting or thanks"}
    return {"path": "tools", "expression": None, "reason": "needs the tool loop"}


RESPONDERS: dict[str, Callable[[list[BaseMessage]], dict]] = {
    "Plan": plan_args,
    "Verdict": verdict_args,
    "Lesson": lesson_args,
    "Route": route_args,
}
