"""Read what a user asks for, in English or Chinese, as an ordered list of intents (no model involved)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from app.models.offline.arithmetic import find_calculations
from tools.weather import find_cities

CJK = re.compile(r"[\u4e00-\u9fff]")
ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
FILE_NAME = r"[`'\"“”‘’]?([\w\-./]*\w\.[A-Za-z0-9]{1,8})[`'\"“”‘’]?"
QUOTED = re.compile(r"[\"“「『]([^\"”」』]+)[\"”」』]|'([^']+)'")

WEATHER_WORDS = re.compile(
    r"weather|temperature|forecast|degrees|warm|cold|hot|cool|rain|sunny|天气|气温|温度|温差|冷|热|暖"
)
COMPARE_WORDS = re.compile(
    r"difference|differ|warm(?:er|est)|cold(?:er|est)|hott?(?:er|est)|cool(?:er|est)|compare"
    r"|温差|相差|差多少|差几度|哪个|更暖|更热|更冷|最暖|最热|最冷"
)
# Without a weather word, these ask to compare only as a follow-up to earlier forecasts.
DIFFERENCE_WORDS = re.compile(r"difference|differ|compare|相差|差多少|差几度")
TIME_WORDS = re.compile(
    r"\bwhat time\b|\bcurrent time\b|\btime is it\b|\bthe time\b|\bwhat date\b|\btoday'?s date\b"
    r"|\bwhat day\b|\bdate today\b|\bthe date\b|几点|现在时间|当前时间|日期|几号|星期几"
)
LIST_WORDS = re.compile(
    r"\blist\b.*\bfiles?\b|\b(?:what|which) files\b|\bshow (?:me )?(?:the |my )?files\b"
    r"|^\s*ls\s*$|\bwhat'?s in (?:the |my )?workspace\b"
    r"|列出|哪些文件|什么文件|文件列表|工作区(?:里|中)?的?文件"
)
WRITE_VERBS = r"(?:save|write|store|put|record|append)"
CHINESE_WRITE_VERBS = r"(?:写入|写到|保存到|保存为|存到|存入|记录到)"
READ_VERBS = r"(?:read|show|open|cat|display|print|view)"
READ_QUESTIONS = (
    rf"\bwhat(?:'s| is| does)(?: written)? in(?: the file)? {FILE_NAME}|\bcontents? of {FILE_NAME}"
)
# "write it / that / the results to x.txt" refers to results, not to literal text to write.
REFERENCE = re.compile(
    r"(?:all (?:of )?)?(?:it|that|this|them|these|those|everything)(?: all)?"
    r"|(?:(?:the|these|those|that|this|my|all the|all) )?"
    r"(?:results?|answers?|output|outcome|difference|weather|forecasts?|summary|report|findings)"
    r"(?: above)?"
    r"|(?:这个|那个|这些|它|上面的|刚才的)?(?:结果|答案|内容|温差|天气)?"
)


@dataclass(frozen=True)
class Intent:
    """One thing the user asked for; `position` orders independent intents as they were written."""

    kind: str
    position: int
    args: dict = field(default_factory=dict)


def is_chinese(text: str) -> bool:
    return bool(CJK.search(text))


def parse_request(text: str) -> list[Intent]:
    """Every intent in the request, in the order it should run."""
    lowered = text.lower()
    code = _code_intent(text)
    if code:  # a program is run as given; its text is not read for other requests
        return code
    weather = _weather_intents(text, lowered)
    intents = [
        *_memory_intents(text),
        *_time_intent(lowered),
        *weather,
        *([] if weather else _search_intent(text)),
        *_arithmetic_intent(text),
        *_list_intent(lowered),
        *_read_intent(text, lowered),
        *_write_intent(text, lowered),
    ]
    return sorted(intents, key=_run_order)


# Intents for tools that may not be configured (sandbox, corpus, long-term memory): without the
# tool they are dropped silently instead of reported as missing.
CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)
RUN_CODE = re.compile(
    r"(?:\b(?:run|execute)\s+(?:this\s+)?python(?:\s+code)?|运行(?:这段)?\s*python(?:代码)?)"
    r"\s*[:：]\s*(.+)$",
    re.I | re.S,
)
SEARCH = re.compile(
    r"\b(?:search(?:\s+the\s+corpus)?(?:\s+for)?|look\s+up|find\s+documents?\s+about)\s+"
    r"(.+?)[\s?.!]*$",
    re.I,
)
SEARCH_ZH = re.compile(r"(?:搜索|查找|查一下)\s*(.+?)[\s？?。!！]*$")
REMEMBER = re.compile(r"\bremember\b\s+(?:that\s+)?(.+?)[\s.!]*$", re.I)
REMEMBER_ZH = re.compile(r"记住[:：]?\s*(.+?)[\s。！]*$")
RECALL = re.compile(
    r"\b(?:what\s+do\s+you\s+remember(?:\s+about)?|do\s+you\s+remember|recall)\b\s*(.*?)"
    r"[\s?.!]*$",
    re.I,
)
RECALL_ZH = re.compile(r"你(?:还)?记得(.*?)(?:吗)?[\s？?。]*$")


def _code_intent(text: str) -> list[Intent]:
    match = CODE_BLOCK.search(text) or RUN_CODE.search(text)
    if not match or not match.group(1).strip():
        return []
    return [Intent("run_code", match.start(), {"code": match.group(1).strip(), "optional": True})]


def _search_intent(text: str) -> list[Intent]:
    match = SEARCH.search(text) or SEARCH_ZH.search(text)
    if not match or not match.group(1).strip():
        return []
    return [Intent("search", match.start(), {"query": match.group(1).strip(), "optional": True})]


def _memory_intents(text: str) -> list[Intent]:
    recall = RECALL.search(text) or RECALL_ZH.search(text)
    if recall:
        query = recall.group(1).strip() or text.strip()
        return [Intent("recall", recall.start(), {"query": query, "optional": True})]
    if text.rstrip().endswith(("?", "？")):
        return []
    remember = REMEMBER.search(text) or REMEMBER_ZH.search(text)
    statement = remember.group(1).strip() if remember else None
    if statement is None and re.search(
        r"\bmy name is\b|\bI live in\b|我叫|我住在|我的名字", text, re.I
    ):
        statement = text.strip()
    if not statement:
        return []
    return [Intent("remember", 0, {"fact": statement, "optional": True})]


def _run_order(intent: Intent) -> tuple[int, int]:
    # A write with no explicit content saves the other results, so it runs last.
    if intent.kind == "write" and intent.args.get("content") is None:
        return (1, intent.position)
    return (0, intent.position)


def _time_intent(lowered: str) -> list[Intent]:
    match = TIME_WORDS.search(lowered)
    return [Intent("time", match.start())] if match else []


def _weather_intents(text: str, lowered: str) -> list[Intent]:
    cities = _mentioned_places(text)
    wants_weather = WEATHER_WORDS.search(lowered)
    if not wants_weather and len(find_cities(text)) >= 2:
        # "look up Paris and Tokyo, compute the difference": comparing cities is about weather
        wants_weather = COMPARE_WORDS.search(lowered)
    intents = []
    if cities and wants_weather:
        unit = "fahrenheit" if re.search(r"fahrenheit|°f|\bin f\b|华氏", lowered) else "celsius"
        date = _weather_date(lowered)
        intents.append(
            Intent("weather", wants_weather.start(), {"cities": cities, "unit": unit, "date": date})
        )
    compare = COMPARE_WORDS.search(lowered)
    follow_up = (
        not wants_weather and DIFFERENCE_WORDS.search(lowered) and not re.search(r"\d", text)
    )
    if compare and (wants_weather or follow_up):
        position = max(compare.start(), intents[0].position + 1 if intents else 0)
        intents.append(
            Intent("compare", position, {"cities": cities, "follow_up": bool(follow_up)})
        )
    return intents


def _mentioned_places(text: str) -> list[str]:
    """Known cities, plus capitalised places the dataset lacks (so the tool can say it is unknown)."""
    known = find_cities(text)
    unknown = [
        name
        for name in re.findall(
            r"\b(?:in|for|at|and)\s+([A-Z][a-z][\w-]*(?: [A-Z][a-z][\w-]*)?)", text
        )
        if not find_cities(name) and name not in {"Celsius", "Fahrenheit"}
    ]
    ordered = sorted(known + unknown, key=lambda name: _first_index(text, name))
    return list(dict.fromkeys(ordered))


def _first_index(text: str, name: str) -> int:
    index = text.find(name)
    return index if index >= 0 else len(text)


def _weather_date(lowered: str) -> str:
    iso = ISO_DATE.search(lowered)
    if iso:
        return iso.group(0)
    return "tomorrow" if re.search(r"tomorrow|明天", lowered) else "today"


def _arithmetic_intent(text: str) -> list[Intent]:
    """Each calculation asked for; math the calculator cannot take whole is one refusal."""
    intents = []
    for number, found in enumerate(find_calculations(_without_other_values(text.lower()))):
        if not found.readable:
            shown = text.strip() if len(text.strip()) <= 100 else found.expression
            return [Intent("unreadable", found.position, {"expression": shown})]
        args = {"then": found.expression} if found.then else {"expression": found.expression}
        intents.append(Intent("calculate", found.position + number, args))
    return intents


def _without_other_values(lowered: str) -> str:
    """Dates, file names and quoted text hold digits that are not arithmetic."""
    lowered = ISO_DATE.sub(" ; ", lowered)
    lowered = QUOTED.sub(" ; ", lowered)
    return re.sub(r"[\w\-./]*\w\.[a-z][a-z0-9]{0,7}\b", " ; ", lowered)


def _list_intent(lowered: str) -> list[Intent]:
    match = LIST_WORDS.search(lowered)
    return [Intent("list", match.start())] if match else []


def _read_intent(text: str, lowered: str) -> list[Intent]:
    english = re.search(rf"\b{READ_VERBS}\b[^.?!]*?{FILE_NAME}|{READ_QUESTIONS}", lowered)
    chinese = re.search(rf"(?:读取|读一下|读|查看|打开|显示|看看)\s*(?:文件)?\s*{FILE_NAME}", text)
    asked = re.search(rf"{FILE_NAME}\s*(?:里|中|里面)?(?:写了什么|有什么|是什么|的内容)", text)
    match = english or chinese or asked
    if not match:
        return []
    # READ_QUESTIONS joins patterns with `|`, so the path is the first group that took part.
    path = next(g for g in match.groups() if g is not None)
    if _is_write_target(lowered, path):
        return []
    return [Intent("read", match.start(), {"path": _original_case(text, path)})]


def _write_intent(text: str, lowered: str) -> list[Intent]:
    english = re.search(
        rf"\b{WRITE_VERBS}\b(.*?)\b(?:to|into|in|as)\s+(?:a\s+|the\s+)?(?:file\s+)?"
        rf"(?:called\s+|named\s+)?{FILE_NAME}",
        text,
        re.IGNORECASE,
    )
    chinese = re.search(
        rf"(?:(?:把|将)(.+?))?{CHINESE_WRITE_VERBS}\s*(?:文件)?\s*{FILE_NAME}", text
    )
    match = english or chinese
    if not match:
        return []
    path = match.group(2)
    quoted = QUOTED.search(text)
    content = next(g for g in quoted.groups() if g is not None) if quoted else None
    if content is not None and content.strip() == path:
        content = None
    literal = (match.group(1) or "").strip(" ,:;'\"“”‘’")
    if REFERENCE.fullmatch(literal.lower()):
        literal = ""
    return [Intent("write", match.start(), {"path": path, "content": content, "text": literal})]


def _is_write_target(lowered: str, path: str) -> bool:
    verb = rf"(?:\b{WRITE_VERBS}\b|{CHINESE_WRITE_VERBS})"
    return bool(re.search(rf"{verb}.*{re.escape(path)}", lowered))


def _original_case(text: str, lowered_fragment: str) -> str:
    index = text.lower().find(lowered_fragment)
    return text[index : index + len(lowered_fragment)] if index >= 0 else lowered_fragment
