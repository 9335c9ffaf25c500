"""The console's knowledge page: the collections and their documents, a form to add files, folders or URLs (or to
read them all again), a button to remove a document, and a form limiting a conversation to some collections. The
forms are posted with the session's CSRF token, like the console's other changes."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from aiohttp import web

from core.errors import BotError
from core.knowledge import DEFAULT_COLLECTION, KNOWLEDGE, Knowledge
from extensions.web import refused

from .data import when

if TYPE_CHECKING:
    from .views import Views

__all__ = ("KnowledgePages",)

log = logging.getLogger("bots.console")

PATH = "/knowledge"
MAX_SOURCES = 50
"""Sources one form adds at most."""


def _collection(text: str) -> str | None:
    name = text.strip() or DEFAULT_COLLECTION
    return name if len(name) <= 64 and all(c.isalnum() or c in "-_." for c in name) else None


class KnowledgePages:
    """The handlers of the knowledge page, on the console's ``Views``."""

    def __init__(self, views: Views) -> None:
        self.views = views

    def _knowledge(self) -> Knowledge | None:
        return self.views.console.agent.provided(KNOWLEDGE)

    def routes(self, app: web.Application) -> None:
        """Serve the page and its forms on ``app``."""
        app.router.add_get(PATH, self.page)
        app.router.add_post(PATH + "/add", self.add)
        app.router.add_post(PATH + "/remove", self.remove)
        app.router.add_post(PATH + "/scope", self.scope)

    async def page(self, request: web.Request) -> web.Response:
        session = await self.views.session(request)
        if session is None:
            raise web.HTTPSeeOther("/login")
        knowledge = self._knowledge()
        collections: dict[str, list[dict[str, object]]] = {}
        error = ""
        if knowledge is not None:
            try:
                for doc in await knowledge.store.documents():
                    collections.setdefault(doc.collection, []).append(
                        {
                            "source": doc.source,
                            "title": doc.title,
                            "passages": doc.passages,
                            "updated": when(doc.updated),
                        }
                    )
            except BotError as exc:
                error = str(exc)
        return self.views.page(
            request,
            "knowledge",
            session,
            enabled=knowledge is not None,
            collections=collections,
            default=", ".join(knowledge.collections or ()) if knowledge is not None else "",
            error=error,
        )

    async def add(self, request: web.Request) -> web.Response:
        checked = await self.views.change(request)
        if isinstance(checked, web.Response):
            return checked
        _, form = checked
        knowledge = self._knowledge()
        collection = _collection(str(form.get("collection", "")))
        if knowledge is None or collection is None:
            return refused(400)
        sources = [line.strip() for line in str(form.get("sources", "")).splitlines() if line.strip()][:MAX_SOURCES]
        try:
            if sources:
                report = await knowledge.indexer.add(sources, collection=collection)
            else:
                report = await knowledge.indexer.reindex(collection)
        except BotError as exc:
            raise self.views.done(PATH, f"could not index: {exc}") from exc
        failed = "; ".join(f"{source}: {why}" for source, why in report.failed[:3])
        log.info("console: knowledge %s: %s", collection, report.summary())
        raise self.views.done(PATH, f"{collection}: {report.summary()}" + (f" ({failed})" if failed else ""))

    async def remove(self, request: web.Request) -> web.Response:
        checked = await self.views.change(request)
        if isinstance(checked, web.Response):
            return checked
        _, form = checked
        knowledge = self._knowledge()
        collection, source = str(form.get("collection", "")), str(form.get("source", ""))
        if knowledge is None or not collection or not source:
            return refused(400)
        try:
            removed = await knowledge.store.remove(collection, source)
        except BotError as exc:
            raise self.views.done(PATH, f"could not remove: {exc}") from exc
        raise self.views.done(PATH, f"{source} removed from {collection}" if removed else f"{source} was not there")

    async def scope(self, request: web.Request) -> web.Response:
        checked = await self.views.change(request)
        if isinstance(checked, web.Response):
            return checked
        _, form = checked
        knowledge = self._knowledge()
        cid = str(form.get("cid", "")).strip()
        names = [n.strip() for n in str(form.get("collections", "")).split(",") if n.strip()]
        if knowledge is None or not cid or len(cid) > 200 or any(_collection(n) is None for n in names):
            return refused(400)
        try:
            await knowledge.store.set_scope(cid, names or None)
        except BotError as exc:
            raise self.views.done(PATH, f"could not limit {cid}: {exc}") from exc
        raise self.views.done(PATH, f"{cid} searches {', '.join(names) if names else 'the default collections'}")
