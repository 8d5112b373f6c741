"""The offline planner's sentences, in English and Chinese, built only from tool results and stated facts."""

from __future__ import annotations

import json
import re
from typing import Any

from app.models.offline.facts import Fact
from app.models.offline.intents import Intent
from graphs.shared.messages import call_signature
from graphs.shared.tool_calls import for_user
from tools.sandbox import read_result
from tools.weather import cities as weather_cities

UNIT = {"celsius": "°C", "fahrenheit": "°F"}
COLDER = re.compile(r"cold(?:er|est)|cool(?:er|est)|chill(?:ier|iest)|更冷|较冷|哪个冷|最冷")
# The tools report in English; a Chinese answer translates the few words they use.
CONDITION_ZH = {
    "clear": "晴",
    "sunny": "晴",
    "partly cloudy": "多云",
    "cloudy": "多云",
    "overcast": "阴",
    "fog": "雾",
    "hazy": "霾",
    "windy": "有风",
    "drizzle": "毛毛雨",
    "light rain": "小雨",
    "rain": "雨",
    "showers": "阵雨",
    "heavy rain": "大雨",
    "thunderstorms": "雷阵雨",
    "light snow": "小雪",
    "snow": "雪",
    "sleet": "雨夹雪",
}
WEEKDAY_ZH = {
    "Monday": "星期一",
    "Tuesday": "星期二",
    "Wednesday": "星期三",
    "Thursday": "星期四",
    "Friday": "星期五",
    "Saturday": "星期六",
    "Sunday": "星期日",
}

FALLBACK_EN = (
    "I'm running on Waypoint's offline planner, which is not a language model, so I can't answer "
    "that. Offline I can: do arithmetic; look up the weather for {cities} cities (an offline "
    "dataset; today, tomorrow or a date) and compare them; read, write and list files in the "
    "workspace; run Python you give me in a sandbox; search the documents added with `waypoint "
    "corpus add`; remember facts across threads and recall them; tell the time; and keep what you "
    "tell me in this thread. For open-ended questions use a real model: set OPENAI_API_KEY (and "
    "OPENAI_BASE_URL for any OpenAI-compatible server) or pass --model openai:<name>."
)
FALLBACK_ZH = (
    "我现在用的是 Waypoint 的离线规划器，它不是语言模型，所以回答不了这个问题。离线时我可以："
    "算术计算；查询 {cities} 个城市的天气（离线数据集，今天、明天或指定日期）并比较；读写和列出"
    "工作区里的文件；在沙箱里运行你给的 Python 代码；搜索用 `waypoint corpus add` 添加的文档；"
    "跨会话记住事实并回忆；报时；以及记住你在本会话里告诉我的事情。要回答开放式问题，请配置"
    "真实模型：设置 OPENAI_API_KEY（兼容 OpenAI 的服务器再设置 OPENAI_BASE_URL），或使用 "
    "--model openai:<名称>。"
)


GREETING = (
    r"hi|hello|hey|hiya|howdy|good (?:morning|afternoon|evening)|how are you(?: doing)?"
    r"|你好|您好|嗨|早上好|下午好|晚上好|你好吗"
)
THANKS = r"thanks?|thank you|cheers|谢谢|多谢"
FAREWELL = r"bye|goodbye|see you|再见|拜拜"
# The whole message is small talk: "hello there!", "thanks a lot", "你好呀" (not "hi, tell me a joke").
SMALL_TALK = re.compile(
    rf"^\s*(?:(?P<greeting>{GREETING})|(?P<thanks>{THANKS})|(?P<farewell>{FAREWELL}))"
    r"(?:\s+(?:there|everyone|all|again|waypoint|friend|so much|very much|a lot|you))*"
    r"[\s!.,?~。！？，呀啊吧]*$",
    re.I,
)
CAPABILITIES_EN = (
    "Offline I can do arithmetic, look up and compare the weather for {cities} cities, read and "
    "write files in the workspace, run Python, search your documents, remember facts and tell the "
    "time — try 'weather in Paris and Rome, which is warmer?' or 'what is 17!'."
)
CAPABILITIES_ZH = (
    "离线时我可以算术计算、查询并比较 {cities} 个城市的天气、读写工作区文件、运行 Python、搜索文档、"
    "记住事实和报时——试试“巴黎和罗马的天气，哪个更暖？”或“17 的阶乘是多少”。"
)


def small_talk(request: str, chinese: bool) -> str | None:
    """A short reply to a greeting, thanks or goodbye that says what the planner can do, or None
    when the message is more than small talk."""
    match = SMALL_TALK.match(request)
    if match is None:
        return None
    cities = len(weather_cities())
    if match["thanks"]:
        return "不客气！" if chinese else "You're welcome!"
    if match["farewell"]:
        return "再见！" if chinese else "Goodbye!"
    if chinese:
        return "你好！我是 Waypoint 的离线规划器。" + CAPABILITIES_ZH.format(cities=cities)
    return "Hello! I'm Waypoint's offline planner. " + CAPABILITIES_EN.format(cities=cities)


def fallback(chinese: bool) -> str:
    return (FALLBACK_ZH if chinese else FALLBACK_EN).format(cities=len(weather_cities()))


def facts_part(
    stated: list[Fact], asked: tuple[str, str, Fact | None] | None, chinese: bool
) -> list[str]:
    parts = [_acknowledge(fact, chinese) for fact in stated]
    if asked is not None and not stated:
        parts.append(_recall(*asked, chinese))
    return parts


def _acknowledge(fact: Fact, chinese: bool) -> str:
    if chinese:
        return {
            "name": f"你好，{fact.value}！我记住了你的名字。",
            "number": f"好的，我记住了这个数字：{fact.value}。",
            "home": f"好的，我记住了：你住在{fact.value}。",
            "favourite": f"好的，我记住了：你最喜欢的{fact.topic}是{fact.value}。",
        }.get(fact.key, f"好的，我记住了：{fact.value}。")
    return {
        "name": f"Nice to meet you, {fact.value}! I'll remember your name.",
        "number": f"Got it — I'll remember the number {fact.value}.",
        "home": f"Got it — you live in {fact.value}.",
        "favourite": f"Got it — your favourite {fact.topic} is {fact.value}.",
    }.get(fact.key, f"Got it — I'll remember that {fact.value}.")


def _recall(key: str, topic: str, fact: Fact | None, chinese: bool) -> str:
    if fact is None:
        return (
            "你还没有在这个会话里告诉过我。"
            if chinese
            else "You haven't told me that in this thread yet."
        )
    if chinese:
        return {
            "name": f"你叫{fact.value}。",
            "number": f"你让我记住的数字是 {fact.value}。",
            "home": f"你住在{fact.value}。",
            "favourite": f"你最喜欢的{fact.topic}是{fact.value}。",
        }.get(key, f"你让我记住的是：{fact.value}。")
    return {
        "name": f"Your name is {fact.value}.",
        "number": f"The number you asked me to remember is {fact.value}.",
        "home": f"You live in {fact.value}.",
        "favourite": f"Your favourite {fact.topic} is {fact.value}.",
    }.get(key, f"You asked me to remember that {fact.value}.")


def describe(intent: Intent, pairs: list, walk: Any) -> list[str]:
    """One sentence per tool result of an intent; failures say what failed and why."""
    zh = walk.chinese
    if not pairs:
        return [_skipped(intent, walk, zh)]
    lines = []
    for call, result in pairs:
        if result is None and walk.avoids(call):
            lines.append(_not_again(call, walk, zh))
        elif result is None:
            lines.append(f"（未完成：{call['name']}）" if zh else f"(not done: {call['name']})")
        elif result.status == "error":
            lines.append(_failed(call, for_user(result), zh))
        else:
            lines.append(_succeeded(intent, call, str(result.content), walk, zh))
    return lines


def _skipped(intent: Intent, walk: Any, zh: bool) -> str:
    if intent.kind == "compare":
        return (
            "无法比较：需要所问每个城市（至少两个）的天气结果。"
            if zh
            else "I couldn't compare: that needs a weather result for every city asked about "
            "(two at least)."
        )
    if intent.kind == "write":
        return _not_written(intent.args["path"], walk, zh)
    if intent.kind == "unreadable":
        return unreadable(intent.args["expression"], zh)
    if intent.kind == "calculate" and "then" in intent.args:  # after a calculation that failed
        step = intent.args.get("then", "")
        return (
            f"没有进行“{step}”：前一步计算没有结果。"
            if zh
            else f"I did not go on with '{step}': the calculation before it has no result."
        )
    return (
        f"工具不可用：{intent.kind}" if zh else f"That tool is not available here ({intent.kind})."
    )


def _not_written(path: str, walk: Any, zh: bool) -> str:
    if any(outcome[0].kind not in {"write", "read", "list"} for outcome in walk.outcomes):
        if zh:
            return f"没有写入 {path}：前面的步骤没有全部成功，只写一部分结果会误导。"
        return (
            f"I did not write {path}: not every step before it succeeded, and part of the "
            "result would read as all of it."
        )
    return f"没有可以写入 {path} 的内容。" if zh else f"There was nothing to write to {path}."


def unreadable(expression: str, zh: bool) -> str:
    """Math the calculator cannot take whole: none of it is computed; what it takes is shown."""
    if zh:
        return (
            f"我无法把“{expression}”完整地读成一个算式，所以一部分也没有计算。计算器支持：数字、"
            "+ - * / ** 和 n!、括号，以及 sqrt(x)、log(x, 底数)、max(a, b) 等函数；也可以用文字，"
            "如“16 的平方根”“17 的阶乘”“2 的 10 次方”。单位（如 km、kg）不支持。"
        )
    return (
        f"I can't read '{expression}' as one whole calculation, so I computed none of it. The "
        "calculator takes numbers, + - * / ** and n!, parentheses, and functions such as sqrt(x), "
        "log(x, base) or max(a, b); in words, 'the square root of 16', '17 factorial' or '2 to "
        "the power of 10'. It does not take units such as km or kg."
    )


def _failed(call: dict, error: str, zh: bool) -> str:
    what = _call_name(call)
    return f"{what} 失败：{error}" if zh else f"{what} failed: {error}"


def _not_again(call: dict, walk: Any, zh: bool) -> str:
    """A call an earlier attempt's lesson said not to repeat, and why."""
    what = _call_name(call)
    why = walk.avoided[call_signature(call["name"], call["args"])]
    if zh:
        return f"{what} 没有再试：之前的尝试中它失败了（{why}）。"
    return f"{what} was not tried again: it failed in an earlier attempt ({why})."


def _call_name(call: dict) -> str:
    target = call["args"].get("city") or call["args"].get("path") or call["args"].get("expression")
    return f"{call['name']}({target})" if target else call["name"]


OPTIONAL_RESULTS = {
    "search": ("Search results:", "搜索结果："),
    "recall": ("From long-term memory:", "长期记忆中："),
}


def _succeeded(intent: Intent, call: dict, content: str, walk: Any, zh: bool) -> str:
    if intent.kind == "remember":
        return "已保存到长期记忆。" if zh else "Saved to long-term memory."
    if intent.kind == "run_code":
        return _python(content, zh)
    if intent.kind in OPTIONAL_RESULTS:
        english, chinese = OPTIONAL_RESULTS[intent.kind]
        return f"{chinese if zh else english}\n{content}"
    if intent.kind == "weather":
        return weather_sentence(json.loads(content), zh)
    if intent.kind == "compare":
        return _comparison(content, walk, zh)
    if intent.kind == "calculate":
        result = f"{call['args']['expression']} = {content}"
        return f"计算结果：{result}" if zh else result
    if intent.kind == "time":
        return time_sentence(json.loads(content), zh)
    if intent.kind == "write":
        return f"已写入文件：{content}。" if zh else f"{content[:1].upper()}{content[1:]}."
    if intent.kind == "read":
        header = (
            f"{call['args']['path']} 的内容：" if zh else f"Contents of {call['args']['path']}:"
        )
        return f"{header}\n{content}"
    header = "工作区文件：" if zh else "Files in the workspace:"
    return f"{header}\n{content}"


def time_sentence(now: dict, zh: bool) -> str:
    if zh:
        weekday = WEEKDAY_ZH.get(now["weekday"], now["weekday"])
        return f"现在是 {now['date']} {now['time']}（{weekday}，{now['timezone']}）。"
    return f"It is {now['time']} on {now['weekday']}, {now['date']} ({now['timezone']})."


def _python(content: str, zh: bool) -> str:
    """What the program printed; its exit status and stderr only when something went wrong."""
    run = read_result(content)
    if run is None:
        return content
    parts = [run.stdout.rstrip("\n") or ("（没有输出）" if zh else "(the program printed nothing)")]
    if run.status != "0" or run.limit != "none":
        limit = "" if run.limit == "none" else f"; limit hit: {run.limit}"
        parts.append(
            f"退出状态：{run.status}{limit}" if zh else f"exit status: {run.status}{limit}"
        )
    if run.stderr.strip():
        parts.append(f"stderr:\n{run.stderr.rstrip()}")
    return "\n".join(parts)


def weather_sentence(forecast: dict, zh: bool) -> str:
    unit = UNIT.get(forecast.get("unit", "celsius"), "°")
    if zh:
        city = forecast.get("city_zh") or forecast["city"]
        condition = CONDITION_ZH.get(forecast["condition"], forecast["condition"])
        return (
            f"{city} {forecast['date']}：{condition}，最高 {forecast['high']}{unit}，"
            f"最低 {forecast['low']}{unit}。"
        )
    return (
        f"{forecast['city']} on {forecast['date']}: {forecast['condition']}, "
        f"high {forecast['high']}{unit}, low {forecast['low']}{unit}."
    )


def _comparison(difference: str, walk: Any, zh: bool) -> str:
    asks_colder = bool(COLDER.search(walk.request.lower()))
    return comparison_sentence(walk.compared_forecasts(), float(difference), asks_colder, zh)


def comparison_sentence(forecasts: list[dict], gap: float, asks_colder: bool, zh: bool) -> str:
    """Which city is warmer (or colder, when that was asked) and by how much: the names from the
    forecasts, the gap from the calculator (first minus second for two, the spread for more)."""
    if len(forecasts) > 2:
        return _ranking(forecasts, abs(gap), asks_colder, zh)
    first, second = forecasts
    unit = UNIT.get(first.get("unit", "celsius"), "°")
    size = f"{abs(gap):g}{unit}"
    a, b = _name(first, zh), _name(second, zh)
    if gap == 0:
        return (
            f"{a}和{b}的最高气温相同（{first['high']}{unit}）。"
            if zh
            else f"{a} and {b} have the same high ({first['high']}{unit})."
        )
    warmer, colder = (a, b) if gap > 0 else (b, a)
    highs = f"{first['high']}{unit} vs {second['high']}{unit}"
    if asks_colder:  # the answer names what was asked about
        if zh:
            return f"温差：{colder}比{warmer}冷 {size}（最高气温 {highs}）。"
        return f"Difference: {colder} is {size} colder than {warmer} (highs {highs})."
    if zh:
        return f"温差：{warmer}比{colder}暖 {size}（最高气温 {highs}）。"
    return f"Difference: {warmer} is {size} warmer than {colder} (highs {highs})."


def _name(forecast: dict, zh: bool) -> str:
    return (forecast.get("city_zh") or forecast["city"]) if zh else forecast["city"]


def _ranking(forecasts: list[dict], spread: float, asks_colder: bool, zh: bool) -> str:
    """Three cities or more: the warmest and the coldest (every one of them on a tie)."""
    unit = UNIT.get(forecasts[0].get("unit", "celsius"), "°")
    top, bottom = max(f["high"] for f in forecasts), min(f["high"] for f in forecasts)
    warmest = _joined([_name(f, zh) for f in forecasts if f["high"] == top], zh)
    coldest = _joined([_name(f, zh) for f in forecasts if f["high"] == bottom], zh)
    highs = ("、" if zh else ", ").join(f"{_name(f, zh)} {f['high']}{unit}" for f in forecasts)
    if spread == 0:
        return (
            f"{warmest}的最高气温相同（{top}{unit}）。"
            if zh
            else f"{warmest} have the same high ({top}{unit})."
        )
    if zh:
        first = f"最冷的是{coldest}（最高 {bottom}{unit}），最暖的是{warmest}（{top}{unit}）"
        if not asks_colder:
            first = f"最暖的是{warmest}（最高 {top}{unit}），最冷的是{coldest}（{bottom}{unit}）"
        return f"{first}，相差 {spread:g}{unit}。各城市最高气温：{highs}。"
    ends = [("warmest", warmest, top, "warmer"), ("coldest", coldest, bottom, "colder")]
    (word, lead, high, comparison), (_, other, other_high, _) = ends[::-1] if asks_colder else ends
    verb = "are" if " and " in lead else "is"
    return (
        f"{lead} {verb} the {word} (high {high}{unit}), {spread:g}{unit} {comparison} than "
        f"{other} ({other_high}{unit}). Highs: {highs}."
    )


def _joined(names: list[str], zh: bool) -> str:
    if len(names) == 1:
        return names[0]
    return "和".join(names) if zh else ", ".join(names[:-1]) + " and " + names[-1]


def json_object(content: object) -> dict | None:
    """A tool result's JSON object, or None when the result is not one."""
    try:
        value = json.loads(str(content))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
