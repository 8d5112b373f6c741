"""Facts a user states about themselves ("my name is …", "记住这个数字 …") and questions about them."""

from __future__ import annotations

import re
from dataclasses import dataclass

NAME = r"([A-Za-z\u4e00-\u9fff][\w\u4e00-\u9fff\-']{0,30}(?: [A-Z][\w\-']{0,30})?)"
NUMBER = r"(-?\d+(?:\.\d+)?)"

STATEMENTS: list[tuple[str, re.Pattern[str]]] = [
    ("number", re.compile(rf"remember (?:the |this |my )?number(?: is)?:?\s*{NUMBER}", re.I)),
    ("number", re.compile(rf"记住(?:这个|那个)?数字[是为:：]?\s*{NUMBER}")),
    ("name", re.compile(rf"\bmy name is {NAME}", re.I)),
    ("name", re.compile(rf"\bcall me {NAME}", re.I)),
    # "I'm Ada" only with a capitalised name, so "I'm tired" or "I am in Paris" is not a name.
    (
        "name",
        re.compile(
            r"(?:^|[,.!]\s*|\b(?i:hi|hello|hey)\W+)(?i:I'm|I am) "
            r"([A-Z][a-z][\w\-']{0,30}(?: [A-Z][a-z][\w\-']{0,30})?)\b"
        ),
    ),
    ("name", re.compile(rf"我叫\s*{NAME}")),
    ("name", re.compile(rf"我的名字(?:是|叫)\s*{NAME}")),
    ("home", re.compile(r"\bI live in ([A-Za-z][\w \-]{0,40}?)(?:[.,!]|$)", re.I)),
    ("home", re.compile(r"我住在\s*([\u4e00-\u9fff\w]{1,20})")),
    ("favourite", re.compile(r"\bmy favou?rite (\w+) is ([\w \-]{1,40}?)(?:[.,!]|$)", re.I)),
    (
        "favourite",
        re.compile(r"我最喜欢的\s*([\u4e00-\u9fff\w]{1,10}?)\s*是\s*([\u4e00-\u9fff\w]{1,20})"),
    ),
    ("note", re.compile(r"\bremember (?:that )?(.{3,200}?)[.!]?$", re.I)),
    ("note", re.compile(r"记住[:：]?\s*(.{2,200}?)[。！]?$")),
]

QUESTIONS: list[tuple[str, re.Pattern[str]]] = [
    (
        "number",
        re.compile(
            r"what(?:'s| is| was)? (?:the |that )?number|which number|"
            r"do you (?:still )?remember (?:the |that |my )?number(?!\s*:?\s*-?\d)|"
            r"记住的数字|什么数字|哪个数字|数字是(?:多少|几|什么)",
            re.I,
        ),
    ),
    (
        "name",
        re.compile(
            r"what(?:'s| is) my name|\bwhat my name is\b|who am i\b|"
            r"do you (?:know|remember) my name|"
            r"我叫什么|我的名字是什么|我是谁",
            re.I,
        ),
    ),
    ("home", re.compile(r"where do i live|我住在哪", re.I)),
    (
        "favourite",
        re.compile(
            r"what(?:'s| is) my favou?rite (\w+)|我最喜欢的\s*([\u4e00-\u9fff\w]{1,10}?)\s*是什么",
            re.I,
        ),
    ),
    (
        "note",
        re.compile(
            r"what did i (?:ask|tell) you to remember|what do you remember|你记得什么|我让你记住了什么",
            re.I,
        ),
    ),
]


@dataclass(frozen=True)
class Fact:
    key: str
    value: str
    topic: str = ""


def stated_facts(text: str) -> list[Fact]:
    """Facts stated in one message. A number or name wins over the generic 'remember …' note.

    A question about a fact states neither that fact nor a note: "我叫什么？" names nobody.
    """
    asked = asked_fact(text)
    # "Do you remember what …?" asks; it states nothing to remember
    question = asked or text.rstrip().endswith(("?", "？"))
    facts: list[Fact] = []
    for key, pattern in STATEMENTS:
        match = pattern.search(text.strip())
        if not match or (key == "note" and (facts or question)) or (asked and asked[0] == key):
            continue
        if key == "favourite":
            facts.append(Fact(key, match.group(2).strip(), topic=match.group(1).lower()))
        else:
            facts.append(Fact(key, match.group(1).strip()))
    return _first_per_key(facts)


def asked_fact(text: str) -> tuple[str, str] | None:
    """The (key, topic) a question asks about, or None when it is not a question about a fact."""
    for key, pattern in QUESTIONS:
        match = pattern.search(text)
        if match:
            topic = next((g for g in match.groups() if g), "") if match.groups() else ""
            return key, topic.lower()
    return None


def recall(key: str, topic: str, history: list[str]) -> Fact | None:
    """The latest fact with this key (and topic) stated in earlier user messages."""
    for text in reversed(history):
        for fact in stated_facts(text):
            if fact.key == key and (not topic or fact.topic == topic):
                return fact
    return None


def _first_per_key(facts: list[Fact]) -> list[Fact]:
    seen: set[tuple[str, str]] = set()
    unique = []
    for fact in facts:
        if (fact.key, fact.topic) not in seen:
            seen.add((fact.key, fact.topic))
            unique.append(fact)
    return unique
