"""Adding documents to the knowledge base and keeping them up to date: ``Indexer``.

A source is a file, a folder (every file in it of a kind read, ``documents.KINDS``, its subfolders too) or an
``http(s)`` URL reachable from this machine. Documents stay where the operator put them: a file of a folder is read
only when it resolves inside that folder (a link out of it is refused), and read again (``reindex``) only while it
is still the file it resolved to; a URL's redirect is followed only to ``http(s)``, and never to a loopback,
link-local or private address unless the operator allows it (``allow_private``).

Each document is stored with the SHA-256 of its bytes: adding it again, or ``reindex``, reads it again and splits,
embeds and stores it only when those bytes changed; a file gone from its place (or a URL that answers 404 or 410)
is removed.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BotError, RunError
from .documents import KINDS, kind_of, parse_document
from .embeddings import Embedder
from .model import Hit
from .store import KnowledgeStore

__all__ = ("DEFAULT_COLLECTION", "MAX_BYTES", "MAX_REDIRECTS", "Indexer", "Report", "is_url")

log = logging.getLogger("core.knowledge")

DEFAULT_COLLECTION = "default"
"""The collection a document goes to when none is named."""
MAX_BYTES = 20_000_000
"""A document larger than this is refused."""
MAX_REDIRECTS = 5
"""Redirects one URL's fetch follows at most."""


def is_url(source: str) -> bool:
    """``source`` is an http(s) URL (else a path)."""
    return source.startswith(("http://", "https://"))


class _Gone(Exception):
    """The source is no longer there."""


@dataclass(kw_only=True)
class Report:
    """What adding or reindexing did, by source."""

    added: list[str] = field(default_factory=list)
    """Documents new to their collection."""
    changed: list[str] = field(default_factory=list)
    """Documents whose bytes changed: indexed again."""
    unchanged: list[str] = field(default_factory=list)
    """Documents read again and found the same: left as they were."""
    removed: list[str] = field(default_factory=list)
    """Documents gone from their source: taken out."""
    failed: list[tuple[str, str]] = field(default_factory=list)
    """Sources that could not be read, and why."""

    def summary(self) -> str:
        """One line: ``2 added, 1 changed, 3 unchanged, 0 removed, 0 failed``."""
        return (
            f"{len(self.added)} added, {len(self.changed)} changed, {len(self.unchanged)} unchanged, "
            f"{len(self.removed)} removed, {len(self.failed)} failed"
        )


class Indexer:
    """Reads sources into ``store`` (embedding their passages with ``embedder`` when there is one)."""

    def __init__(
        self,
        store: KnowledgeStore,
        *,
        embedder: Embedder | None = None,
        timeout: float = 30.0,
        max_bytes: int = MAX_BYTES,
        allow_private: bool = False,
    ) -> None:
        self.store = store
        """Where the passages go."""
        self.embedder = embedder
        """What makes their vectors (None: full-text only)."""
        self.timeout = timeout
        """Seconds fetching one URL may take."""
        self.max_bytes = max_bytes
        """A larger document is refused."""
        self.allow_private = allow_private
        """A URL's redirect may lead to a loopback, link-local or private address (``KNOWLEDGE_ALLOW_PRIVATE_URLS``:
        an intranet's documents); by default such a redirect is refused."""

    async def add(self, sources: Sequence[str], *, collection: str = DEFAULT_COLLECTION) -> Report:
        """Index ``sources`` (files, folders, URLs) into ``collection``; only what changed is indexed again."""
        report = Report()
        for source in sources:
            try:
                found, outside = await asyncio.to_thread(_expand, source)
            except RunError as exc:
                report.failed.append((source, str(exc)))
                continue
            for link in outside:
                report.failed.append((link, f"leads out of {source}: not indexed"))
            for one in found:
                await self._one(collection, one, report)
        return report

    async def reindex(self, collection: str | None = None) -> Report:
        """Read every document (of ``collection``) again; index what changed, remove what is gone."""
        report = Report()
        for doc in await self.store.documents(collection):
            await self._one(doc.collection, doc.source, report, known=doc.digest)
        return report

    async def search(self, query: str, *, collections: Sequence[str] | None = None, limit: int = 3) -> list[Hit]:
        """The passages that best answer ``query``; with an embedding model that fails, full-text alone."""
        vector = None
        if self.embedder is not None and self.store.vectors:
            try:
                vector = (await self.embedder.embed([query]))[0]
            except BotError as exc:
                log.warning("knowledge: the question could not be embedded (%s); searching its words only", exc)
        return await self.store.search(query, collections=collections, limit=limit, vector=vector)

    async def _one(self, collection: str, source: str, report: Report, *, known: str | None = None) -> None:
        try:
            data, name, content_type = await self._read(source)
        except _Gone:
            if await self.store.remove(collection, source):
                report.removed.append(source)
            else:
                report.failed.append((source, "not found"))
            return
        except (RunError, OSError) as exc:
            report.failed.append((source, str(exc)))
            return
        digest = hashlib.sha256(data).hexdigest()
        if known is None:
            known = await self.store.digest(collection, source)
        if known == digest:
            report.unchanged.append(source)
            return
        kind = kind_of(name, content_type)
        if kind is None:
            report.failed.append((source, f"not a document read here (one of {', '.join(sorted(KINDS))})"))
            return
        try:
            parsed = await asyncio.to_thread(parse_document, data, name=name, kind=kind)
            vectors = None
            if self.embedder is not None and self.store.vectors and parsed.passages:
                vectors = await self.embedder.embed([f"{p.section}\n{p.text}" for p in parsed.passages])
        except BotError as exc:
            report.failed.append((source, str(exc)))
            return
        await self.store.put(
            collection=collection,
            source=source,
            title=parsed.title,
            digest=digest,
            passages=parsed.passages,
            vectors=vectors,
        )
        (report.added if known is None else report.changed).append(source)
        log.info("knowledge: %s indexed in %s (%d passages)", source, collection, len(parsed.passages))

    async def _read(self, source: str) -> tuple[bytes, str, str | None]:
        if is_url(source):
            return await self._fetch(source)
        path = Path(source)

        def read() -> bytes:
            if not path.is_file():
                raise _Gone()
            if path.resolve() != path.absolute():  # (it was stored resolved: now a link, to anywhere)
                raise RunError(f"{source} is now a link to another file: not read; add that file itself")
            if path.stat().st_size > self.max_bytes:
                raise RunError(f"{source} is larger than {self.max_bytes} bytes")
            return path.read_bytes()

        return await asyncio.to_thread(read), path.name, None

    async def _fetch(self, url: str) -> tuple[bytes, str, str | None]:
        import httpx

        try:
            async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False, trust_env=True) as client:
                for _ in range(MAX_REDIRECTS + 1):
                    async with client.stream("GET", url) as response:
                        if response.is_redirect:
                            url = await self._redirect(str(response.url), response.headers.get("location", ""))
                            continue
                        if response.status_code in (404, 410):
                            raise _Gone()
                        if response.status_code >= 400:
                            raise RunError(f"{url} answered {response.status_code}")
                        chunks: list[bytes] = []
                        size = 0
                        async for chunk in response.aiter_bytes():
                            size += len(chunk)
                            if size > self.max_bytes:
                                raise RunError(f"{url} is larger than {self.max_bytes} bytes")
                            chunks.append(chunk)
                        return b"".join(chunks), response.url.path or url, response.headers.get("content-type")
                raise RunError(f"{url}: more than {MAX_REDIRECTS} redirects")
        except httpx.HTTPError as exc:
            raise RunError(f"cannot fetch {url}: {type(exc).__name__}") from exc

    async def _redirect(self, url: str, location: str) -> str:
        """Where a redirect from ``url`` to ``location`` leads, when it may be followed: http(s) only, and (unless
        ``allow_private``) to a host none of whose addresses is loopback, link-local or private."""
        import httpx

        target = httpx.URL(url).join(location)
        if target.scheme not in ("http", "https") or not target.host:
            raise RunError(f"{url} redirects to a {target.scheme or 'relative'} address: only http(s) is followed")
        if not self.allow_private:
            for address in await _addresses(target.host, target.port or (443 if target.scheme == "https" else 80)):
                if not address.is_global or address.is_multicast:
                    raise RunError(
                        f"{url} redirects to {target.host}, a loopback, link-local or private address: not followed "
                        "(set KNOWLEDGE_ALLOW_PRIVATE_URLS=true to index an intranet's documents)"
                    )
        return str(target)


async def _addresses(host: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses ``host`` stands for (itself when it is one)."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise RunError(f"cannot resolve {host}: {exc}") from exc
    addresses = []
    for *_, sockaddr in found:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        addresses.append(mapped or address)
    return addresses


def _expand(source: str) -> tuple[list[str], list[str]]:
    """The documents of ``source`` (itself: a file, a URL; or the files of a folder, sorted, each resolved), and
    the files of a folder that resolve outside it (a link out: not read)."""
    if is_url(source):
        return [source], []
    path = Path(source).expanduser()
    if path.is_dir():
        folder = path.resolve()
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in KINDS)
        if not files:
            raise RunError(f"{source}: no document in it (files ending in {', '.join(sorted(KINDS))})")
        inside = [p.resolve() for p in files if p.resolve().is_relative_to(folder)]
        outside = [str(p) for p in files if not p.resolve().is_relative_to(folder)]
        return [str(p) for p in dict.fromkeys(inside)], outside
    if path.is_file():
        return [str(path.resolve())], []
    raise RunError(f"{source}: no such file or folder")
