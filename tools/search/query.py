"""Text → FTS5 terms: the hidden `grams` column that makes CJK text searchable, safe MATCH
expressions built from free text, and the highlights snippet() cannot make."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

MAX_QUERY_CHARS = 2000
MAX_QUERY_TERMS = 32
HIGHLIGHT = "**"

# Scripts written without spaces between words. unicode61 turns a whole run of them into one
# token, so such runs are also indexed as overlapping bigrams in the hidden `grams` column.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(rf"[^\W_{_CJK}]+")
_WORD_AT_END = re.compile(rf"[^\W_{_CJK}]+\Z")
_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        "a about an and are as at be but by can could did do does for from had has have he her his "
        "how i if in into is it its me my no not of on or our she should so than that the their "
        "them then there these they this to us was we were what when where which who why will "
        "with would you your",
    )
)


def index_grams(text: str) -> str:
    """The hidden `grams` column: every run of CJK characters as overlapping bigrams plus its last
    character (so one-character prefix queries find any character), and Latin words glued to a
    run ("GPT模型") which unicode61 would otherwise fold into one token with the CJK text."""
    out: list[str] = []
    last_glued = -1
    for run in _CJK_RUN.finditer(text):
        chars = run.group()
        out.extend(chars[i : i + 2] for i in range(len(chars) - 1))
        out.append(chars[-1])
        before = _WORD_AT_END.search(text, max(0, run.start() - 64), run.start())
        if before and before.start() != last_glued:
            out.append(before.group())
        after = _WORD.match(text, run.end())
        if after:
            out.append(after.group())
            last_glued = after.start()
    return " ".join(out)


@dataclass(frozen=True)
class QueryPlan:
    """Two FTS5 expressions built only from quoted tokens: every term (`strict`), then any term
    (`loose`, stopwords dropped, CJK runs as single bigrams); `needles` are the CJK runs and words,
    for highlighting what snippet() cannot mark."""

    strict: str
    loose: str
    needles: tuple[str, ...]


def _bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)] or [run]


def _cjk_term(run: str) -> str:
    if len(run) == 1:
        return f'grams : "{run}"*'
    return 'grams : "' + " ".join(_bigrams(run)) + '"'


def plan_query(query: str) -> QueryPlan | None:
    """Turn free text into safe FTS5 syntax; None when it holds no searchable word.

    User and model text is never passed through: only runs of letters and digits survive, each
    inside double quotes, so quotes, parentheses, `*`, `-`, `:`, AND/OR/NOT/NEAR are inert.
    """
    strict: list[str] = []
    loose: list[str] = []
    needles: list[str] = []
    for chunk in query[:MAX_QUERY_CHARS].split():
        words = _WORD.findall(chunk)
        if words and not (len(words) == 1 and words[0].casefold() in _STOPWORDS):
            strict.append('"' + " ".join(words) + '"')
        loose.extend(f'"{w}"' for w in words if w.casefold() not in _STOPWORDS)
        needles.extend(w for w in words if w.casefold() not in _STOPWORDS)
        for run in _CJK_RUN.findall(chunk):
            strict.append(_cjk_term(run))
            loose.extend(_cjk_term(gram) for gram in _bigrams(run))
            needles.append(run)
    if not strict:  # only stopwords: search for them after all
        strict = loose = [f'"{w}"' for w in _WORD.findall(query[:MAX_QUERY_CHARS])]
        if not strict:
            return None
    strict = list(dict.fromkeys(strict))[:MAX_QUERY_TERMS]
    loose = list(dict.fromkeys(loose or strict))[:MAX_QUERY_TERMS]
    return QueryPlan(" AND ".join(strict), " OR ".join(loose), tuple(needles))


def highlight_window(body: str, needles: Iterable[str]) -> str | None:
    """A snippet around the longest needle found, for matches snippet() cannot mark: CJK text and
    words glued to it, which match only in the hidden `grams` column."""
    cjk = [gram for needle in needles if _CJK_RUN.match(needle) for gram in _bigrams(needle)]
    for needle in sorted({*needles, *cjk}, key=len, reverse=True):
        found = re.search(re.escape(needle), body, re.IGNORECASE)
        if found:
            at, stop = found.span()
            start, end = max(0, at - 50), min(len(body), stop + 100)
            return (
                ("…" if start else "")
                + f"{body[start:at]}{HIGHLIGHT}{body[at:stop]}{HIGHLIGHT}{body[stop:end]}"
                + ("…" if end < len(body) else "")
            )
    return None
