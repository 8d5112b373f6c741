"""Long-term memory across threads: per-user facts (and experiences) in LangGraph's SqliteStore or
PostgresStore, with a BM25 search index in the same database, or in a server's store; and the
remember/recall tools, which use the store of the graph run that calls them.

Modules: ``store`` (MemoryStore), ``graph_store`` (IndexedStore: a MemoryStore as a LangGraph
BaseStore; memory_of: any store back to a MemoryStore), ``item`` (MemoryItem, user labels),
``text`` (cleaning, dedupe keys, index and query terms), ``index`` (the FTS5 / PostgreSQL term
index), ``scan`` (BM25 over items listed from a foreign store), ``connection`` (the SQLite
connection) and ``tool`` (the tools). Every public name is importable from here.
"""

from tools.memory.connection import connect
from tools.memory.graph_store import IndexedStore, graph_store, memory_of
from tools.memory.index import Fts5Index, MemoryIndex, PostgresTermIndex
from tools.memory.item import USER_ID, Kind, MemoryItem, user_label
from tools.memory.store import MAX_FACT_CHARS, MAX_MEMORIES_PER_USER, POSTGRES_URL, MemoryStore
from tools.memory.text import (
    MAX_INDEX_CHARS,
    MAX_QUERY_TERMS,
    STOPWORDS,
    clean_text,
    fact_key,
    index_terms,
    query_terms,
)
from tools.memory.tool import (
    MAX_RECALL,
    RecallArgs,
    RememberArgs,
    format_recall,
    make_memory_tools,
    memory_errors_as_tool_errors,
)

__all__ = [
    "MAX_FACT_CHARS",
    "MAX_INDEX_CHARS",
    "MAX_MEMORIES_PER_USER",
    "MAX_QUERY_TERMS",
    "MAX_RECALL",
    "POSTGRES_URL",
    "STOPWORDS",
    "USER_ID",
    "Fts5Index",
    "IndexedStore",
    "Kind",
    "MemoryIndex",
    "MemoryItem",
    "MemoryStore",
    "PostgresTermIndex",
    "RecallArgs",
    "RememberArgs",
    "clean_text",
    "connect",
    "fact_key",
    "format_recall",
    "graph_store",
    "index_terms",
    "make_memory_tools",
    "memory_errors_as_tool_errors",
    "memory_of",
    "query_terms",
    "user_label",
]
