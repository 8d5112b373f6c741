"""web_search: a SQLite FTS5 index of the user's documents (default) or an opt-in web backend.

The index lives in `corpus_*` tables of the database it is given (Waypoint passes its checkpoint file).
The modules of this package hold the parts; every public name is importable from here.
"""

from tools.search.corpus_tables import CorpusDatabaseError
from tools.search.documents import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_MAX_FILE_BYTES,
    SUFFIXES,
    ParsedDocument,
    parse_document,
    split_chunks,
)
from tools.search.local_index import (
    SNIPPET_TOKENS,
    AddReport,
    DocumentInfo,
    EmptyCorpusError,
    FileOutcome,
    LocalIndex,
    UnknownDocumentError,
)
from tools.search.query import (
    HIGHLIGHT,
    MAX_QUERY_CHARS,
    MAX_QUERY_TERMS,
    QueryPlan,
    index_grams,
    plan_query,
)
from tools.search.result import SearchResult
from tools.search.tool import (
    BACKENDS,
    SearchBackend,
    WebSearchArgs,
    format_results,
    make_backend,
    make_search_tool,
    no_match_message,
)
from tools.search.web_backends import DdgsBackend, SearchUnavailableError, TavilyBackend

__all__ = [
    "BACKENDS",
    "DEFAULT_CHUNK_CHARS",
    "DEFAULT_MAX_FILE_BYTES",
    "HIGHLIGHT",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_TERMS",
    "SNIPPET_TOKENS",
    "SUFFIXES",
    "AddReport",
    "CorpusDatabaseError",
    "DdgsBackend",
    "DocumentInfo",
    "EmptyCorpusError",
    "FileOutcome",
    "LocalIndex",
    "ParsedDocument",
    "QueryPlan",
    "SearchBackend",
    "SearchResult",
    "SearchUnavailableError",
    "TavilyBackend",
    "UnknownDocumentError",
    "WebSearchArgs",
    "format_results",
    "index_grams",
    "make_backend",
    "make_search_tool",
    "no_match_message",
    "parse_document",
    "plan_query",
    "split_chunks",
]
