"""web_search: the local FTS5 corpus, query sanitising, the tool, the online backends' errors, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.conftest import run_cli
from tools.errors import ToolError
from tools.search import (
    DdgsBackend,
    EmptyCorpusError,
    LocalIndex,
    SearchResult,
    SearchUnavailableError,
    TavilyBackend,
    UnknownDocumentError,
    make_backend,
    make_search_tool,
    parse_document,
    split_chunks,
)

SOLAR = """# Solar panels

Solar panels turn sunlight into electricity. Solar cells made of silicon reach an efficiency
of about twenty percent, and solar farms cover whole valleys.

Keeping solar panels clean matters for their output.
"""
ENERGY = """Energy sources

Wind turbines, hydro dams, nuclear plants and coal plants all feed the grid; solar is one more.
Transmission lines carry the power across the country to cities and factories.
"""
PAGE = """<html><head><title>Wind farms</title>
<style>.secretstyle { color: red }</style>
<script>var secretscript = "turbines";</script></head>
<body><h1>Offshore wind</h1><p>Turbines at sea &amp; on land.</p><p>Second paragraph.</p></body></html>
"""
CHINESE = "机器学习是人工智能的一个分支。\n\n北京大学的研究人员使用GPT模型研究自然语言处理。\n"
HOSTILE_QUERIES = [
    '"',
    '""',
    '"unbalanced solar',
    "(solar",
    "solar)",
    "((solar OR wind)",
    "AND",
    "OR",
    "NOT",
    "solar AND",
    "AND solar OR NOT",
    "NEAR(solar wind, 2)",
    "*",
    "sol*",
    "-solar",
    "solar -wind",
    "title:solar",
    "{title body}: solar",
    "^solar",
    "solar + wind",
    "'; DROP TABLE corpus_documents; --",
    "the of and",
    "\x00solar",
    "🌞 ☀️",
    "机器（学习）AND “北京”",
    "solar " * 3000,
    "x" * 20_000,
]


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "energy.txt").write_text(ENERGY)
    (folder / "solar.md").write_text(SOLAR)
    (folder / "sub" / "page.html").write_text(PAGE)
    (folder / "zh.md").write_text(CHINESE)
    paragraphs = [
        f"Paragraph {i} is about ordinary filler topics and nothing else." for i in range(80)
    ]
    paragraphs[5] = "An early zeppelin sketch."
    paragraphs[70] = (
        "Near the end the zeppelin finally appears; the zeppelin lands; zeppelin crews wave."
    )
    (folder / "big.txt").write_text("\n\n".join(paragraphs))
    (folder / "latin1.txt").write_bytes("latinmarker café crème".encode("latin-1"))
    (folder / "huge.txt").write_text("word " * 10_000)
    (folder / "report.pdf").write_bytes(b"%PDF-1.4")
    (folder / ".hidden.md").write_text("hiddenword")
    return folder


@pytest.fixture
def index(tmp_path: Path) -> LocalIndex:
    return LocalIndex(tmp_path / "db" / "agent.sqlite", max_file_bytes=20_000)


@pytest.fixture
def corpus(index: LocalIndex, docs: Path) -> LocalIndex:
    index.add([docs])
    return index


def titles(results: list[SearchResult]) -> list[str]:
    return [r.title for r in results]


def test_add_reports_every_file_with_its_outcome(index: LocalIndex, docs: Path):
    report = index.add([docs])
    status = {Path(f.path).name: (f.status, f.detail) for f in report.files}
    assert status == {
        "big.txt": ("added", "4 chunks"),
        "energy.txt": ("added", "1 chunk"),
        "huge.txt": ("skipped", "50,000 bytes is over the 20,000-byte limit per file"),
        "latin1.txt": ("added", "1 chunk; not valid UTF-8: undecodable bytes were replaced"),
        "report.pdf": (
            "skipped",
            "unsupported file type '.pdf'; supported: .htm, .html, .markdown, .md, .rst, .txt",
        ),
        "solar.md": ("added", "1 chunk"),
        "page.html": ("added", "1 chunk"),
        "zh.md": ("added", "1 chunk"),
    }
    listed = {Path(d.path).name: (d.title, d.chunks, d.bytes) for d in index.list()}
    assert listed["solar.md"] == ("Solar panels", 1, len(SOLAR.encode()))
    assert listed["page.html"][0] == "Wind farms"
    assert listed["energy.txt"][0] == "energy.txt"
    assert all(Path(d.path).is_absolute() for d in index.list())


def test_html_is_indexed_as_visible_text_without_script_or_style(corpus: LocalIndex):
    assert corpus.search("secretscript") == []
    assert corpus.search("secretstyle") == []
    [hit] = corpus.search("sea")
    assert hit.title == "Wind farms"
    assert "Turbines at **sea** & on land." in hit.snippet
    parsed = parse_document("x.html", b"<body><h2>First <b>heading</b></h2><p>a&lt;b</p></body>")
    assert (parsed.title, parsed.text) == ("First heading", "First heading\n\na<b")


def test_titles_fall_back_from_heading_to_file_name():
    assert parse_document("a.md", b"---\ntitle: 'Front'\n---\n# Other\n").title == "Front"
    assert parse_document("a.md", b"intro\n\nSetext title\n============\n").title == "Setext title"
    assert parse_document("a.rst", b"=====\nTitle\n=====\n\nbody\n").title == "Title"
    assert parse_document("a.html", b"<p>no heading</p>").title == "a.html"


def test_bm25_ranks_the_document_that_is_most_about_the_term_first(corpus: LocalIndex):
    # energy.txt was indexed first and mentions "solar" once; solar.md is about it.
    assert titles(corpus.search("solar", 5)) == ["Solar panels", "energy.txt"]
    assert titles(corpus.search("solar", 1)) == ["Solar panels"]


def test_documents_holding_every_term_come_before_those_holding_some(tmp_path: Path):
    # By BM25 alone alpha.txt wins: "alpha" is rare and it says it four times, while "beta" is
    # everywhere. both.txt holds both words, so it comes first.
    (tmp_path / "alpha.txt").write_text("alpha alpha alpha alpha")
    (tmp_path / "both.txt").write_text("alpha beta " + "and a long tail of other words " * 5)
    for i in range(3):
        (tmp_path / f"filler{i}.txt").write_text("beta gamma delta")
    index = LocalIndex(tmp_path / "db.sqlite")
    index.add([tmp_path])
    assert titles(index.search("alpha beta"))[:2] == ["both.txt", "alpha.txt"]
    # A question's stopwords do not keep it out of the every-term phase.
    assert titles(index.search("what is the alpha of beta?"))[:2] == ["both.txt", "alpha.txt"]
    assert titles(index.search("alpha"))[:2] == ["alpha.txt", "both.txt"]


def test_snippets_mark_the_query_terms(corpus: LocalIndex):
    [first, *_] = corpus.search("efficiency silicon")
    assert first.title == "Solar panels"
    assert "**silicon**" in first.snippet and "**efficiency**" in first.snippet
    assert "\n" not in first.snippet


def test_long_documents_are_chunked_and_the_snippet_comes_from_the_matching_chunk(
    corpus: LocalIndex,
):
    assert [d.chunks for d in corpus.list() if d.title == "big.txt"] == [4]
    [hit] = corpus.search("zeppelin")
    assert hit.title == "big.txt"
    assert "the **zeppelin** finally appears" in hit.snippet  # the chunk that says it most
    assert "sketch" not in hit.snippet
    assert titles(corpus.search("filler", 20)) == ["big.txt"]  # its best chunk, once


def test_chunks_keep_paragraphs_whole_and_stay_under_the_target():
    paragraphs = [f"{i} " + "word " * 50 for i in range(40)]
    chunks = split_chunks("\n\n".join(p.strip() for p in paragraphs), target=1500)
    assert len(chunks) == 8
    assert all(len(c) <= 1500 for c in chunks)
    assert "\n\n".join(chunks).split("\n\n") == [p.strip() for p in paragraphs]
    long_sentences = "This sentence goes on. " * 200
    pieces = split_chunks(long_sentences, target=1500)
    assert all(len(p) <= 1500 and p.endswith(".") for p in pieces)


def test_non_utf8_text_is_searchable_with_replacement_characters(corpus: LocalIndex):
    [hit] = corpus.search("latinmarker")
    assert hit.snippet == "**latinmarker** caf\ufffd cr\ufffdme"


def test_re_adding_is_unchanged_then_updated_replacing_the_old_text(corpus: LocalIndex, docs: Path):
    again = corpus.add([docs / "solar.md"])
    assert [(f.status, f.detail) for f in again.files] == [("unchanged", "")]
    (docs / "solar.md").write_text("# Solar panels\n\nNow about photovoltaic inverters.\n")
    updated = corpus.add([docs / "solar.md"])
    assert [(f.status, f.detail) for f in updated.files] == [("updated", "1 chunk")]
    assert "Solar panels" not in titles(corpus.search("silicon"))
    assert titles(corpus.search("inverters")) == ["Solar panels"]
    assert [Path(d.path).name for d in corpus.list()].count("solar.md") == 1


def test_remove_by_id_by_path_and_by_directory(corpus: LocalIndex, docs: Path):
    by_name = {Path(d.path).name: d for d in corpus.list()}
    assert corpus.remove(by_name["energy.txt"].id) == 1
    assert corpus.remove(str(docs / "solar.md")) == 1
    assert titles(corpus.search("solar")) == []
    assert corpus.remove(str(docs / "sub")) == 1
    assert sorted(Path(d.path).name for d in corpus.list()) == ["big.txt", "latin1.txt", "zh.md"]
    with pytest.raises(
        UnknownDocumentError, match=r"no document with id or path '999'.*corpus list"
    ):
        corpus.remove("999")
    with pytest.raises(UnknownDocumentError):
        corpus.remove(str(docs / "solar.md"))


@pytest.mark.parametrize("query", HOSTILE_QUERIES, ids=lambda q: repr(q[:20]))
def test_hostile_queries_never_raise(corpus: LocalIndex, query: str):
    results = corpus.search(query, 20)
    assert isinstance(results, list)


def test_hostile_queries_still_find_their_words(corpus: LocalIndex):
    for query in ['"unbalanced solar', "(solar", "-solar", "sol* AND solar", "NEAR(solar"]:
        assert titles(corpus.search(query))[0] == "Solar panels", query
    assert titles(corpus.search("机器（学习）")) == ["zh.md"]


def test_chinese_queries_find_chinese_text(corpus: LocalIndex):
    [hit] = corpus.search("机器学习")
    assert (hit.title, hit.snippet.startswith("**机器学习**是人工智能")) == ("zh.md", True)
    assert titles(corpus.search("北京")) == ["zh.md"]  # two characters: below a trigram's reach
    assert titles(corpus.search("语")) == ["zh.md"]
    assert titles(corpus.search("机器学习是什么")) == ["zh.md"]  # a question: matched by bigrams
    assert corpus.search("天气预报") == []
    [glued] = corpus.search("GPT")  # a Latin word written against Chinese text
    assert "使用**GPT**模型" in glued.snippet


def test_the_tool_formats_results_as_a_numbered_list():
    class Fixed:
        def search(self, query: str, max_results: int) -> list[SearchResult]:
            return [
                SearchResult("First", "one **hit**", "/a.md", 2.0),
                SearchResult("Second", "two\nlines", "https://b", 1.0),
            ][:max_results]

    tool = make_search_tool(Fixed())
    assert tool.name == "web_search"
    assert tool.description.splitlines()[0] == (
        "Search the local document corpus (or the configured web backend) and return titles, "
        "snippets and sources."
    )
    assert tool.invoke({"query": "hit"}) == (
        "1. First — /a.md\n   one **hit**\n2. Second — https://b\n   two lines"
    )
    assert tool.invoke({"query": "hit", "max_results": 1}) == "1. First — /a.md\n   one **hit**"
    for bad in (0, 21):
        with pytest.raises(ValidationError):
            tool.invoke({"query": "hit", "max_results": bad})


def test_the_tool_on_the_corpus_no_match_and_empty_corpus(corpus: LocalIndex, tmp_path: Path):
    tool = make_search_tool(corpus)
    assert tool.invoke({"query": "zeppelin"}).startswith("1. big.txt — ")
    assert tool.invoke({"query": "quasar nebula"}) == (
        "nothing matched 'quasar nebula'; try other words: synonyms, fewer or more general "
        "terms, or just the most distinctive word"
    )
    never_used = LocalIndex(tmp_path / "never.sqlite")
    emptied = LocalIndex(corpus.db_path)
    for document in emptied.list():
        emptied.remove(document.id)
    for index in (never_used, emptied):
        with pytest.raises(EmptyCorpusError, match=r"corpus is empty.*waypoint corpus add PATH"):
            make_search_tool(index).invoke({"query": "solar"})
    assert issubclass(EmptyCorpusError, ToolError)


def test_corpus_tables_live_beside_the_checkpoints(corpus: LocalIndex):
    from app.store import open_checkpointer

    with open_checkpointer(corpus.db_path) as saver:
        assert list(saver.list(None)) == []
    assert titles(corpus.search("zeppelin")) == ["big.txt"]


def test_a_file_that_is_not_a_database_is_a_clear_tool_error(tmp_path: Path):
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database at all, just some text that is long enough " * 4)
    with pytest.raises(ToolError, match=r"document index in .*bad.sqlite cannot be used"):
        LocalIndex(bad).add([bad])


@pytest.mark.parametrize(
    ("backend", "module", "extra"),
    [(DdgsBackend, "ddgs", "search-ddgs"), (TavilyBackend, "tavily", "search-tavily")],
)
def test_online_backends_without_their_package_say_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, backend: type, module: str, extra: str
):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test")
    with pytest.raises(SearchUnavailableError, match=rf"pip install 'waypoint\[{extra}\]'"):
        make_search_tool(backend()).invoke({"query": "news"})


class FailingClient:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def text(self, query: str, max_results: int) -> list[dict]:
        raise self.error

    def search(self, query: str, max_results: int) -> dict:
        raise self.error


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (ConnectionError("[Errno 101] Network is unreachable"), "network may be unreachable"),
        (TimeoutError("timed out"), "timed out"),
    ],
)
def test_online_backends_report_an_unreachable_network_to_the_model(error: Exception, message: str):
    ddgs = DdgsBackend(client_factory=lambda: FailingClient(error))
    tavily = TavilyBackend(api_key="tvly-test", client_factory=lambda key: FailingClient(error))
    for backend in (ddgs, tavily):
        with pytest.raises(SearchUnavailableError, match=message):
            backend.search("news", 3)


def test_online_backends_let_bugs_through_and_map_results(monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(KeyError):
        DdgsBackend(client_factory=lambda: FailingClient(KeyError("bug"))).search("news", 3)

    class Answering:
        def text(self, query: str, max_results: int) -> list[dict]:
            return [{"title": f"T{i}", "href": f"https://x/{i}", "body": "b"} for i in range(5)]

    results = DdgsBackend(client_factory=Answering).search("news", 2)
    assert [(r.title, r.source, r.snippet) for r in results] == [
        ("T0", "https://x/0", "b"),
        ("T1", "https://x/1", "b"),
    ]
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    with pytest.raises(SearchUnavailableError, match="TAVILY_API_KEY is not set"):
        TavilyBackend(client_factory=lambda key: Answering()).search("news", 2)


def test_make_backend_by_name(tmp_path: Path):
    local = make_backend("local", tmp_path / "x.sqlite")
    assert isinstance(local, LocalIndex) and local.db_path == tmp_path / "x.sqlite"
    assert isinstance(make_backend("DDGS", tmp_path), DdgsBackend)
    assert isinstance(make_backend("tavily", tmp_path), TavilyBackend)
    with pytest.raises(
        ValueError, match="unknown search backend 'bing'; use one of: local, ddgs, tavily"
    ):
        make_backend("bing", tmp_path)


def corpus_cli(*args: str) -> subprocess.CompletedProcess:
    return run_cli("corpus", *args)


def test_cli_add_list_search_remove_round_trip(docs: Path, db_path: Path):
    empty = corpus_cli("search", "solar")
    assert (empty.returncode, empty.stderr.decode()) == (
        2,
        "error: the corpus is empty; add documents with: waypoint corpus add PATH\n",
    )
    added = corpus_cli("add", str(docs / "solar.md"), str(docs / "sub"), str(docs / "report.pdf"))
    assert added.returncode == 0, added.stderr.decode()
    real = docs.resolve()
    assert added.stdout.decode() == (
        f"added     {real / 'solar.md'} (1 chunk)\n"
        f"added     {real / 'sub' / 'page.html'} (1 chunk)\n"
        f"skipped   {real / 'report.pdf'}: unsupported file type '.pdf'; supported: .htm, .html, "
        ".markdown, .md, .rst, .txt\n"
        "2 added, 0 updated, 0 unchanged, 1 skipped\n"
    )
    listed = json.loads(corpus_cli("list", "--json").stdout)
    assert [(d["title"], d["chunks"]) for d in listed] == [("Solar panels", 1), ("Wind farms", 1)]
    found = corpus_cli("search", "silicon", "--limit", "3")
    assert found.stdout.decode() == (
        f"1. Solar panels — {real / 'solar.md'}\n"
        "   …Solar cells made of **silicon** reach an efficiency of about twenty percent, and solar "
        "farms cover whole valleys. Keeping solar panels clean matters for…\n"
    )
    as_json = json.loads(corpus_cli("search", "turbines", "--json").stdout)
    assert [r["title"] for r in as_json] == ["Wind farms"]
    removed = corpus_cli("remove", str(docs / "solar.md"))
    assert (removed.returncode, removed.stdout.decode()) == (0, "removed 1 document\n")
    assert [d.title for d in LocalIndex(db_path).list()] == ["Wind farms"]


def test_cli_bad_input_is_a_clear_usage_error(docs: Path, tmp_path: Path):
    missing = corpus_cli("add", str(docs / "solar.md"), str(tmp_path / "nope"))
    assert missing.returncode == 2
    assert f"no such file or directory: {tmp_path / 'nope'}; nothing was added" in (
        missing.stderr.decode()
    )
    assert corpus_cli("search", "  ").returncode == 2
    unknown = corpus_cli("remove", "42")
    assert unknown.returncode == 2 and "no document with id or path '42'" in unknown.stderr.decode()
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("hello")
    damaged = corpus_cli("list", "--db", str(not_sqlite))
    assert damaged.returncode == 3 and "is not a Waypoint database" in damaged.stderr.decode()
