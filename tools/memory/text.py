"""The text of long-term memory: cleaning a fact, its dedupe key, and the terms it is indexed and
searched under (case-folded words, stopwords dropped from queries, CJK characters and pairs)."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterator

MAX_INDEX_CHARS = 2000  # of a text, only the start is indexed or searched for
MAX_QUERY_TERMS = 32

_DEDUPE_TRAILING = " .!?。！？"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# Unicode category Cc, exactly: C0 controls, DEL and C1 controls.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

# Words that carry no topic: dropped from queries, so "what is my name" does not match every fact
# containing "is" or "my". The index keeps them; only the query side filters.
_STOPWORD_TEXT = """
a about after again all also am an and any anything are as at be been before being both but by can
could did do does doing done for from had has have having he her here hers hi hello hey him his how
i if in into is it its just know let me mine more most my no not now of off ok okay on once only or
our ours please recall remember said say she should so some something tell than thank thanks that
the their theirs them then there these they this those to too up us very was we were what when
where which who whom whose why will with would yes yet you your yours
什么 怎么 一个 我的 你的 可以 这个 那个 我们 你们 他们 是不 不是 的 了 是 我 你 他 她 吗 呢 吧 啊 在 和 有 也 都 就
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_CJK_RANGES = (
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3400, 0x4DBF),  # CJK Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0x20000, 0x2EBEF),  # CJK Extensions B-F
)


def clean_text(text: str) -> str:
    """One line of valid UTF-8: lone surrogates replaced, control characters and runs of
    whitespace collapsed to single spaces."""
    text = _LONE_SURROGATE.sub("\ufffd", text)  # cannot be encoded, so cannot be stored
    return " ".join(_CONTROL.sub(" ", text).split())


def fact_key(fact: str) -> str:
    """Identical facts (ignoring case, spacing and a trailing full stop) get the same key."""
    normal = unicodedata.normalize("NFKC", clean_text(fact)).casefold().rstrip(_DEDUPE_TRAILING)
    return hashlib.sha256(normal.encode()).hexdigest()[:16]


def index_terms(text: str) -> list[str]:
    """The terms a text is indexed under: case-folded words (plural 's' dropped) and, since CJK
    scripts write words without spaces, every CJK character and every pair of adjacent ones."""
    terms: list[str] = []
    for run, cjk in _runs(text[:MAX_INDEX_CHARS]):
        if cjk:
            terms.extend(run)
            terms.extend(run[i : i + 2] for i in range(len(run) - 1))
        else:
            terms.append(_stem(run))
    return terms


def query_terms(text: str, *, keep_stopwords_if_alone: bool = True) -> list[str]:
    """Distinct search terms of a query: words, and CJK character pairs (a lone CJK character is
    its own term). Stopwords are dropped unless they are all there is and keep_stopwords_if_alone."""
    terms: list[str] = []
    common: list[str] = []
    for run, cjk in _runs(text[:MAX_INDEX_CHARS]):
        pieces = ([run[i : i + 2] for i in range(len(run) - 1)] or [run]) if cjk else [run]
        for piece in pieces:
            (common if piece in STOPWORDS else terms).append(piece if cjk else _stem(piece))
    chosen = terms or (common if keep_stopwords_if_alone else [])
    return list(dict.fromkeys(chosen))[:MAX_QUERY_TERMS]


def _runs(text: str) -> Iterator[tuple[str, bool]]:
    """Maximal runs of letters, digits and marks, split where CJK and other scripts meet."""
    text = unicodedata.normalize("NFKC", text).casefold()
    if text.isascii():  # the common case, found by a regex: no marks, no CJK, letters lower case
        return ((run, False) for run in _ASCII_RUN.findall(text))
    return _script_runs(text)


_ASCII_RUN = re.compile("[a-z0-9]+")


def _script_runs(text: str) -> Iterator[tuple[str, bool]]:
    """`_runs` of a normalised text, character by character (by Unicode category and script)."""
    run: list[str] = []
    run_cjk = False
    for ch in text:
        if unicodedata.category(ch)[0] in "LNM":
            cjk = _is_cjk(ch)
            if run and cjk != run_cjk:
                yield "".join(run), run_cjk
                run = []
            run.append(ch)
            run_cjk = cjk
        elif run:
            yield "".join(run), run_cjk
            run = []
    if run:
        yield "".join(run), run_cjk


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word
