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
from app.models.offline.walk import TOOL_FOR_INTENT, tool_args
from app.text import plural
from graphs.plan.steps import REFERENCE
from graphs.shared.requests import request_of

SMALL_TALK = re.compile(
    r"^\s*(?:hi|hello|hey|good (?:morning|afternoon|evening)|thanks?|thank you|bye|goodbye|"
    r"how are you|你好|您好|谢谢|再见|早上好|晚上好)\b",
    re.I,
)
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
    """Every step the request needs; after failed steps, the rest of the plan without them."""
    start, request = _request(messages)
    available = set(request_of(messages).get("tools", ()))
    steps = plan_for(request, available, messages[:start])
    turn = messages[start + 1 :]
    outcomes = [m.status for m in turn if isinstance(m, ToolMessage)]
    if outcomes:
        failed = {n for n, status in enumerate(outcomes, 1) if status == "error"}
        steps = remaining_steps(steps, len(outcomes), failed)
    return {"steps": steps}


def plan_for(request: str, available: set[str], earlier: list[BaseMessage]) -> list[dict]:
    chinese = is_chinese(request)
    steps: list[dict] = []
    for intent in parse_request(request):
        if available and TOOL_FOR_INTENT[intent.kind] not in available:
            continue
        tool = TOOL_FOR_INTENT[intent.kind]
        for arguments in _arguments(intent, steps, earlier):
            reason = _reason(intent, arguments, chinese)
            steps.append({"tool": tool, "arguments": arguments, "reason": reason})
    return steps


def _arguments(intent: Intent, steps: list[dict], earlier: list[BaseMessage]) -> list[dict]:
    if intent.kind == "compare":
        expression = _comparison(steps, earlier)
        return [{"expression": expression}] if expression else []
    if intent.kind == "write" and intent.args["content"] is None:
        content = _results_text(steps) or intent.args.get("text") or _last_answer(earlier)
        return [{"path": intent.args["path"], "content": content}] if content else []
    return tool_args(intent, None) or []  # the remaining kinds do not read the walk


def _comparison(steps: list[dict], earlier: list[BaseMessage]) -> str | None:
    weather = [n for n, step in enumerate(steps, 1) if step["tool"] == "get_weather"]
    if len(weather) >= 2:
        return f"{{{{step {weather[0]}.high}}}} - {{{{step {weather[1]}.high}}}}"
    forecasts = [answers.json_object(m.content) for m in earlier if isinstance(m, ToolMessage)]
    highs = [f["high"] for f in forecasts if f and "high" in f]
    return f"{highs[-2]} - {highs[-1]}" if len(highs) >= 2 else None


def _results_text(steps: list[dict]) -> str:
    kept = ("write_file", "read_file", "list_files")
    return "\n".join(f"{{{{step {n}}}}}" for n, s in enumerate(steps, 1) if s["tool"] not in kept)


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
    kept = []
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
    """Success when the last answer stands on tool results that all succeeded."""
    start, request = _request(messages)
    zh = is_chinese(request)
    attempt = messages[start + 1 :]
    answer = next((m for m in reversed(attempt) if _is_answer(m)), None)
    failures = [m for m in attempt if isinstance(m, ToolMessage) and m.status == "error"]
    if answer is None:
        return {"success": False, "reason": "没有给出回答。" if zh else "no answer was given"}
    if failures:
        problem = f"{failures[0].name}: {str(failures[0].content)[:200]}"
        return {"success": False, "reason": f"工具调用失败：{problem}" if zh else f"{problem}"}
    if str(answer.content).strip() in {answers.fallback(False), answers.fallback(True)}:
        reason = "离线规划器读不懂这个请求。" if zh else "the offline planner could not read it"
        return {"success": False, "reason": reason}
    used = sum(isinstance(m, ToolMessage) for m in attempt)
    reason = (
        f"回答基于 {used} 个工具结果。"
        if zh
        else f"the answer rests on {plural(used, 'tool result')}"
    )
    return {"success": True, "reason": reason}


def _is_answer(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage) and not message.tool_calls and bool(message.content)


def lesson_args(messages: list[BaseMessage]) -> dict:
    """What to do differently, from the failed call of the last attempt (or the lack of one)."""
    start, request = _request(messages)
    zh = is_chinese(request)
    failures = [
        m for m in messages[start + 1 :] if isinstance(m, ToolMessage) and m.status == "error"
    ]
    if failures:
        failed = failures[0]
        error = str(failed.content)[:160]
        if zh:
            return {"lesson": f"{failed.name} 失败了（{error}）。先核对参数，别再原样重试。"}
        return {
            "lesson": f"{failed.name} failed ({error}). Check its arguments first and do not "
            "repeat the same call; answer with what is known and say what is missing."
        }
    if zh:
        return {"lesson": "回答前确认请求的每一部分都有工具结果支持；做不到就直说。"}
    return {
        "lesson": "Before answering, check that every part of the request is backed by a tool "
        "result; if it cannot be, say so plainly."
    }


def route_args(messages: list[BaseMessage]) -> dict:
    """Pure arithmetic → calculator; a greeting or thanks → small talk; anything else → tools."""
    _, request = _request(messages)
    intents = parse_request(request)
    if [i.kind for i in intents] == ["calculate"]:
        expression = intents[0].args["expression"]
        return {"path": "calculator", "expression": expression, "reason": "arithmetic only"}
    if not intents and SMALL_TALK.search(request):
        return {"path": "small_talk", "expression": None, "reason": "a greeting or thanks"}
    return {"path": "tools", "expression": None, "reason": "needs the tool loop"}


RESPONDERS: dict[str, Callable[[list[BaseMessage]], dict]] = {
    "Plan": plan_args,
    "Verdict": verdict_args,
    "Lesson": lesson_args,
    "Route": route_args,
}
