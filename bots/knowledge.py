"""The knowledge base of a deployment: where it lives (``knowledge_store``: SQLite under ``BOT_DATA_DIR`` in one
process, PostgreSQL at ``DATABASE_URL`` when set), its embedding model (``KNOWLEDGE_EMBED_*``), and the ``bots
knowledge`` command that adds, lists, removes, reindexes and searches documents:

    bots knowledge add handbook/ https://intranet.example/faq.html --collection hr
    bots knowledge list
    bots knowledge reindex            # only documents whose bytes changed are indexed again
    bots knowledge search "how long do refunds take"
    bots knowledge remove /srv/handbook/old.md --collection hr
    bots knowledge scope telegram:chat:-100123 hr it   # that conversation searches hr and it only
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from core.knowledge import DEFAULT_COLLECTION, Embedder, Indexer, KnowledgeStore, OpenAIEmbedder, SQLiteKnowledge

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ("HELP", "KNOWLEDGE_FILE", "add_arguments", "build_embedder", "command", "knowledge_store")

HELP = "add, list, remove, reindex and search the documents the bot answers from"
KNOWLEDGE_FILE = "knowledge.sqlite3"
"""The SQLite file of the knowledge base under ``BOT_DATA_DIR`` (one process)."""


def build_embedder(settings: Settings) -> Embedder | None:
    """The embedding model of ``KNOWLEDGE_EMBED_*``, or None (full-text search alone)."""
    kb = settings.knowledge
    if kb.embed_local:
        from core.knowledge.local_embedder import MINILM, LocalEmbedder

        from .models import weights_folder

        return LocalEmbedder(cache_dir=weights_folder(settings.llm, settings.bot.data_dir, MINILM.gguf[0]))
    base_url = (kb.embed_base_url or "").strip()
    if not base_url:
        return None
    key = kb.embed_api_key.get_secret_value().strip() if kb.embed_api_key is not None else ""
    return OpenAIEmbedder(base_url=base_url, model=kb.embed_model, api_key=key or None, timeout=kb.embed_timeout)


def knowledge_store(settings: Settings, *, vectors: bool | None = None) -> KnowledgeStore:
    """Where the knowledge base lives: PostgreSQL at ``DATABASE_URL`` when set (a fleet shares it), else SQLite
    beside the memory store. ``vectors``: embeddings stored and searched (default: when a model is configured)."""
    if vectors is None:
        vectors = settings.knowledge.embed_local or bool((settings.knowledge.embed_base_url or "").strip())
    url = settings.database.url.get_secret_value().strip() if settings.database.url is not None else ""
    if url:
        from core.knowledge.postgres import PostgresKnowledge

        return PostgresKnowledge(url, vectors=vectors)
    return SQLiteKnowledge(Path(settings.bot.data_dir) / KNOWLEDGE_FILE, vectors=vectors)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``bots knowledge``."""
    sub = parser.add_subparsers(dest="knowledge_command", required=True)
    add = sub.add_parser("add", help="index files, folders or URLs (again: only what changed)")
    add.add_argument("sources", nargs="+", metavar="SOURCE", help="a file, a folder or an http(s) URL")
    listing = sub.add_parser("list", help="the documents, by collection")
    remove = sub.add_parser("remove", help="remove a document, or a whole collection with --all")
    remove.add_argument("sources", nargs="*", metavar="SOURCE", help="the source as listed (path or URL)")
    remove.add_argument("--all", action="store_true", help="remove every document of the collection")
    reindex = sub.add_parser("reindex", help="read every document again; index what changed, drop what is gone")
    search = sub.add_parser("search", help="the passages a question finds")
    search.add_argument("query", help="the question")
    search.add_argument("--limit", type=int, default=3, help="passages to show (default 3)")
    scope = sub.add_parser("scope", help="limit a conversation to some collections (none named: lift the limit)")
    scope.add_argument("conversation", help="the conversation id, as the console shows it (telegram:chat:123)")
    scope.add_argument("collections", nargs="*", metavar="COLLECTION")
    for each in (add, remove):
        each.add_argument("--collection", default=DEFAULT_COLLECTION, help="the collection (default: default)")
    for each in (listing, reindex, search):
        each.add_argument("--collection", default=None, help="only this collection (default: all)")


def command(args: argparse.Namespace, settings: Settings) -> int:
    """Run ``bots knowledge ...``; the exit status."""
    return asyncio.run(_command(args, settings))


async def _command(args: argparse.Namespace, settings: Settings) -> int:
    store = knowledge_store(settings)
    embedder = build_embedder(settings)
    indexer = Indexer(store, embedder=embedder, allow_private=settings.knowledge.allow_private_urls)
    try:
        return await _run(args, store, indexer)
    finally:
        if embedder is not None:
            await embedder.aclose()
        await store.close()


async def _run(args: argparse.Namespace, store: KnowledgeStore, indexer: Indexer) -> int:
    what = args.knowledge_command
    if what in ("add", "reindex"):
        report = await (
            indexer.add(args.sources, collection=args.collection) if what == "add" else indexer.reindex(args.collection)
        )
        for source, why in report.failed:
            print(f"failed: {source}: {why}")
        for source in report.removed:
            print(f"removed (gone): {source}")
        print(report.summary())
        return 1 if report.failed else 0
    if what == "list":
        docs = await store.documents(args.collection)
        for doc in docs:
            when = datetime.fromtimestamp(doc.updated / 1000, tz=UTC).isoformat(timespec="minutes")
            print(f"{doc.collection}\t{doc.passages} passages\t{when}\t{doc.title}\t{doc.source}")
        print(f"{len(docs)} document(s)")
        return 0
    if what == "remove":
        if args.all == bool(args.sources):
            print("bots: name the sources to remove, or --all for the whole collection (not both)")
            return 2
        removed = 0
        for source in args.sources or [None]:
            removed += await store.remove(args.collection, source)
        print(f"{removed} document(s) removed from {args.collection}")
        return 0 if removed else 1
    if what == "search":
        collections = (args.collection,) if args.collection else None
        hits = await indexer.search(args.query, collections=collections, limit=args.limit)
        for number, hit in enumerate(hits, start=1):
            print(f"{number}. [{hit.collection}] {hit.cite}\n   {' '.join(hit.text.split())[:300]}")
        if not hits:
            print("nothing found")
        return 0
    assert what == "scope"
    await store.set_scope(args.conversation, args.collections or None)
    shown = ", ".join(args.collections) if args.collections else "every collection (KNOWLEDGE_COLLECTIONS)"
    print(f"{args.conversation} searches {shown}")
    return 0
