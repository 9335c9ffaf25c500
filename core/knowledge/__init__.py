"""The knowledge base: documents an operator adds (text, Markdown, HTML, PDF; files, folders, URLs), split into
passages by section, indexed for full-text search (and by meaning with an embedding model), and found by the
bot (the ``search_knowledge`` action, or before every answer), which cites the document and section.

The ``Knowledge`` plugin searches a ``KnowledgeStore``: ``SQLiteKnowledge`` in one process, ``PostgresKnowledge``
(``core.knowledge.postgres``, the ``postgres`` extra) in a fleet. ``Indexer`` adds documents and reindexes only
those whose bytes changed.
"""

from .documents import KINDS, MAX_CHARS, Parsed, kind_of, parse_document, split_markdown
from .embeddings import Embedder, OpenAIEmbedder
from .index import DEFAULT_COLLECTION, Indexer, Report, is_url
from .model import DocumentInfo, Hit, Passage, citation
from .plugin import KNOWLEDGE, Knowledge, SearchKnowledgeArgs, search_knowledge
from .sqlite_store import SQLiteKnowledge
from .store import KnowledgeStore, fuse, query_terms

__all__ = (  # noqa: RUF022 (sorted as tests/test_public_api.py sorts: plain string order)
    "DEFAULT_COLLECTION",
    "DocumentInfo",
    "Embedder",
    "Hit",
    "Indexer",
    "KINDS",
    "KNOWLEDGE",
    "Knowledge",
    "KnowledgeStore",
    "MAX_CHARS",
    "OpenAIEmbedder",
    "Parsed",
    "Passage",
    "Report",
    "SQLiteKnowledge",
    "SearchKnowledgeArgs",
    "citation",
    "fuse",
    "is_url",
    "kind_of",
    "parse_document",
    "query_terms",
    "search_knowledge",
    "split_markdown",
)
