"""The web chat, composed: the chat layer's adapter skeleton (``extensions.chat.adapter``) filled in with an HTTP
server, the pages (``routes``), the open pages by visitor (``hub``) and the signed visitor ids (``visitors``).

Receive: ``POST /chat/send`` hands a message over (``take``): embedded, ``run_here`` runs it (a full inbox: the
busy notice); in front of a queue, ``backpressure.submit`` stores it. Post: the reply is a ``LiveReply`` whose
"messages" are events on the visitor's open pages (``post``, ``edit``, ``delete``), so the answer streams as it is
written and a queued run's ledger is followed like on any platform; once complete a ``done`` event lays it out
(its Markdown rendered, ``rich``). In a fleet the worker's events go to the
gateway holding the page through ``relay``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from core.errors import BotError, ConfigError, PlatformError, address_in_use, cannot_listen
from core.memory.history import HISTORY
from core.trust import TIER_PARAM, Tier

from ..chat.adapter import ChatAdapter
from ..chat.backpressure import Incoming
from ..chat.counters import Ignored
from ..chat.http_server import HttpLimits, start_site
from ..chat.i18n import say
from ..chat.stream import LiveReply, ReplyKey
from .definitions import GATEWAY, MESSAGE, web_chat
from .hub import Hub
from .idle import IdleVisitors
from .media import MediaShelf, checked_mime, relay_event
from .rich import rendered
from .routes import chat_application
from .settings import DEFAULT_PORT, WebSettings
from .visitor_book import VISITORS_FILE, LocalVisitorBook, VisitorBook
from .visitors import Signer, load_secret, visitor_tier

if TYPE_CHECKING:
    from core import Setup
    from core.definitions import ContextState, Send
    from core.events import RunEvent
    from core.fleet.reply_ledger import ReplyLedger
    from core.media import Attachment, Outgoing

    from .relay import Relay

__all__ = ("HISTORY_SHOWN", "PageSink", "WebRuntime")

log = logging.getLogger("extensions.web")

HISTORY_SHOWN = 100
"""Messages of the conversation a page shows when it opens."""

Publish = Callable[[str, dict[str, Any]], Coroutine[Any, Any, None]]
"""``await publish(visitor, event)``: to the visitor's pages here, or to the gateway holding them."""


def _whole(text: str) -> list[str]:
    """A web page has no length limit: one message per answer."""
    return [text] if text.strip() else []


class PageSink:
    """The "messages" of one reply on a visitor's pages: each post, edit and delete is an event."""

    def __init__(self, publish: Publish, visitor: str) -> None:
        self._publish = publish
        self._visitor = visitor

    async def post(self, text: str, *, index: int) -> str:
        handle = secrets.token_hex(6)
        await self._publish(self._visitor, {"op": "post", "id": handle, "text": text})
        return handle

    async def edit(self, handle: Any, text: str) -> None:
        await self._publish(self._visitor, {"op": "edit", "id": str(handle), "text": text})

    async def delete(self, handle: Any) -> None:
        await self._publish(self._visitor, {"op": "delete", "id": str(handle)})


class WebRuntime(ChatAdapter):
    """The web chat of one process: its HTTP server (when it listens) and what the agent posts to its pages."""

    platform = "web"

    def __init__(
        self,
        settings: WebSettings,
        *,
        listen: bool = True,
        secret_file: Path | None = None,
        title: str = "",
        gateway_id: str = "",
        relay: Relay | None = None,
        visitors: VisitorBook | None = None,
    ) -> None:
        super().__init__(log=log, typing_every=2.0, live_output=MESSAGE)
        self.settings = settings
        """The ``WEB_*`` settings."""
        self.listen = listen
        """Serve the pages (False in a queue worker: only post to them, through the relay)."""
        self.title = settings.title or title or "Chat"
        """The page's title."""
        self.hub = Hub()
        """The pages open in this process."""
        self.media = MediaShelf()
        """The pictures and voice messages shown on the pages open in this process (``extensions.web.media``)."""
        if visitors is None:  # one process: in the data folder (beside the signing key), or in memory
            visitors = LocalVisitorBook(secret_file.with_name(VISITORS_FILE) if secret_file is not None else None)
        self.visitors = IdleVisitors(
            visitors, idle_days=settings.visitor_idle_days, new_per_hour=settings.new_visitors_per_hour
        )
        """The visits and new visitors (``WEB_VISITOR_IDLE_DAYS``, ``WEB_NEW_VISITORS_PER_HOUR``; in Redis in a
        fleet), and the sweep of the idle visitors where the page is served."""
        self.gateway_id = gateway_id
        """This process's id in a fleet (the channel its pages' events come through); empty in one process."""
        self.relay = relay
        """Carries events between workers and gateways (None in one process)."""
        self.address: str | None = None
        """``http://host:port/`` once serving (None when not serving)."""
        self.mounts: list[tuple[str, web.Application]] = []
        """Other applications served on the same server, by path prefix (``mount``)."""
        self.counts_for_readiness = settings.configured
        # (the web chat beside the terminal chat of ``bots run`` is a convenience: it counts in /readyz once the
        # operator configured it with WEB_CHAT_ENABLED, WEB_HOST or WEB_PORT)
        self._secret_file = secret_file
        self._signer: Signer | None = None
        self._runner: web.AppRunner | None = None
        self._send: Send | None = None
        self._connected = False

    # -- receive ---------------------------------------------------------------------------------------

    @property
    def signer(self) -> Signer:
        """Signs the visitors' cookies and the pages' CSRF tokens."""
        if self._signer is None:
            self._signer = Signer(self._key())
        return self._signer

    def _key(self) -> bytes:
        if self.settings.secret is not None and self.settings.secret.get_secret_value().strip():
            key = self.settings.secret.get_secret_value().strip().encode()
            if len(key) < 32:
                raise ConfigError("WEB_SECRET is too short: give it 32 characters or more (or leave it empty)")
            return key
        if self._secret_file is None:
            return secrets.token_hex(32).encode()  # visitors are new after a restart
        return load_secret(self._secret_file)

    def mount(self, prefix: str, app: web.Application) -> None:
        """Serve ``app`` under ``prefix`` on this server too (before ``agent.start()``)."""
        self.mounts.append((prefix, app))

    @property
    def connected(self) -> bool:
        return self._connected

    async def connect(self, agent: Setup) -> None:
        if self._signer is None:  # a bad WEB_SECRET stops the start; a generated key is read from its file
            self._signer = Signer(await asyncio.to_thread(self._key))
        if self.listen and self.settings.port:
            await self._serve()
            if self._runner is not None and self.settings.chat_enabled:
                self.visitors.start(agent)
        try:
            if self.relay is not None:
                await self.relay.start(self)
        except BaseException:
            await self.disconnect()
            raise
        self._connected = True

    async def _serve(self) -> None:
        """The HTTP server of the pages (a busy default port only turns the web chat off, with a warning)."""
        app = chat_application(self)
        for prefix, sub in self.mounts:
            app.add_subapp(prefix, sub)
        limits = HttpLimits(
            header_timeout=self.settings.header_timeout,
            max_connections=self.settings.max_connections,
            max_per_address=self.settings.max_per_address,
            trusted_proxies=self.settings.trusted_proxies,
        )
        try:
            runner, port = await start_site(app, self.settings.host, self.settings.port, limits=limits)
        except OSError as exc:
            if address_in_use(exc) and "port" not in self.settings.model_fields_set:
                log.warning("the web chat is off: port %d is busy; set WEB_PORT to a free port", DEFAULT_PORT)
                return
            settings = self.settings
            raise cannot_listen(
                exc, host_var="WEB_HOST", host=settings.host, port_var="WEB_PORT", port=settings.port
            ) from exc
        self._runner = runner
        shown = self.settings.host if ":" not in self.settings.host else f"[{self.settings.host}]"
        self.address = f"http://{shown}:{port}/"
        log.info("web chat on %s", self.address)

    async def subscribe(self, send: Send, agent: Setup) -> Callable[[], Coroutine[Any, Any, None]] | None:
        """Take messages from the pages from now on; returns the unsubscribe coroutine function."""
        self._send = send
        return self.unsubscribe

    async def stop_receiving(self, *, timeout: float) -> None:
        self._send = None

    async def disconnect(self) -> None:
        self.hub.close()
        await self.visitors.stop()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        if self.relay is not None:
            await self.relay.stop()
        self.address = None
        self._connected = False

    def ready(self) -> bool | str:
        if self.failure is not None:
            return f"failed: {self.failure}"
        if not self._connected:
            return "not connected"
        if self.listen and self.settings.port and self._runner is None:
            return "not serving (the port was busy)"
        return True

    async def fetch_file(self, attachment: Attachment) -> bytes:
        raise ConfigError("the web chat takes no attachments")

    # -- decide and run --------------------------------------------------------------------------------

    def take(self, visitor: str, text: str, *, message_id: str) -> bool:
        """Hand a visitor's message to the agent in a task of its own; False when not taking messages."""
        send, agent = self._send, self.agent
        if send is None or agent is None:
            return False
        self.metrics.received(web_chat, visitor)
        key = f"web:{message_id}"
        tier = visitor_tier(self.trust, visitor, default=Tier(self.settings.visitor_tier))
        ref = {
            "type": MESSAGE,
            "data": text,
            "params": {
                "user": "visitor",
                "user_id": visitor,
                "message_id": message_id,
                "gateway": self.gateway_id,
                TIER_PARAM: tier.value,  # (a stranger: WEB_VISITOR_TIER, guest unless the operator raises it)
            },
            # what goes without saying, left out of the prompt: the chat is one visitor's (the context says so; its
            # key is their id, "visitor" names nobody), the gateway is routing, and the tier every visitor has tells
            # nothing (one the operator raised is shown)
            "hidden": [
                "user",
                "user_id",
                "gateway",
                *((TIER_PARAM,) if tier.value == self.settings.visitor_tier else ()),
            ],
            "correlation_id": key,
        }

        async def store() -> None:
            await send(web_chat, visitor, ref, dedupe_key=key)

        async def tell(notice: str) -> None:
            language = await self.language(web_chat, visitor)
            await self.hub_publish(visitor, {"op": "notice", "text": say(notice, language)})

        async def tell_busy() -> None:
            await tell("busy")

        async def tell_failed() -> None:
            await tell("run_failed")

        incoming = Incoming(
            chat=visitor,
            key=key,
            what=f"web message {message_id}",
            store=store,
            tell_busy=tell_busy,
            tell_failed=tell_failed,
            on_dropped=lambda: self.metrics.ignored(web_chat, visitor, Ignored.BUSY),
        )
        if agent.distributed:
            self.spawn(self._submit(incoming), name=f"web-{message_id}", key=key)
        else:
            self.spawn(self.run_here(incoming, context=web_chat, args=visitor), name=f"web-{message_id}", key=key)
        return True

    async def _submit(self, incoming: Incoming) -> None:
        """In front of a queue: store the message (or keep it waiting for room); the queue unreachable, the page
        is told the answer failed (nothing was stored: the visitor sends it again)."""
        try:
            await self.backpressure.submit(incoming)
        except BotError as exc:
            self.log.warning("could not store %s: %s", incoming.what, exc)
            if incoming.tell_failed is not None:
                await incoming.tell_failed()

    async def history_of(self, visitor: str) -> list[dict[str, Any]]:
        """The visitor's conversation, oldest first (empty when the bot keeps no history)."""
        agent = self.agent
        history = agent.provided(HISTORY) if agent is not None else None
        if agent is None or history is None:
            return []
        cid = agent.context_id(web_chat, visitor)
        entries = await history.search(cid, limit=HISTORY_SHOWN)
        return [{"role": e.role, "text": e.text, "ts": e.ts} for e in reversed(entries)]

    # -- post ------------------------------------------------------------------------------------------

    async def hub_publish(self, visitor: str, event: dict[str, Any]) -> None:
        """Show ``event`` on the visitor's pages open in this process, and let their streams write it before the
        caller goes on: as a Telegram or Discord post returns once the platform has the message, not before the
        run's next work (the model call's usage, the memory saved: SQLite writes, each a worker thread taking the
        GIL in turn) delays the answer's bytes (docs/explanation/benchmarks.md, "A lone message's answer")."""
        self.show(visitor, event)
        await asyncio.sleep(0)  # (one loop turn: each page's task, woken by its queue, writes the event now)

    def show(self, visitor: str, event: dict[str, Any]) -> None:
        """Show ``event`` on the visitor's pages open in this process; a picture or voice message (its bytes in the
        event) is shelved and the pages get its address (``MediaShelf.page_event``)."""
        if event.get("op") == "media":
            shown = self.media.page_event(visitor, event)
            if shown is None:
                log.warning("a %s for a web page was dropped: its bytes are not one", str(event.get("kind"))[:20])
                return
            event = shown
        elif event.get("op") == "done":  # the answer complete: laid out here, from its Markdown (``rich``)
            event = {"op": "done", "id": str(event.get("id", "")), "html": rendered(str(event.get("text", "")))}
        self.hub.publish(visitor, event)

    def _publisher(self, gateway: str) -> Publish:
        """Where the events for a page held by ``gateway`` go: here, or through the relay."""
        if self.relay is None or not gateway or gateway == self.gateway_id:
            return self.hub_publish
        relay = self.relay

        async def publish(visitor: str, event: dict[str, Any]) -> None:
            await relay.publish(gateway, visitor, event)

        return publish

    def _live(self, visitor: str, gateway: str, *, ledger: ReplyLedger | None, streamed: bool) -> LiveReply:
        return LiveReply(
            sink=PageSink(self._publisher(gateway), visitor),
            split=_whole,
            interval=self.settings.stream_interval,
            record=self.record(ledger, MESSAGE, streamed=streamed),
            parse_handle=str,
        )

    def start_live(self, event: RunEvent) -> LiveReply | None:
        agent = self.agent
        state = agent.state_of(event.context_id) if agent is not None else None
        if state is None or not state.context.includes(web_chat) or not self._connected:
            return None
        return self._live(state.platform_args, state.values.get(GATEWAY) or "", ledger=state.ledger, streamed=True)

    async def deliver(
        self, *, key: ReplyKey, visitor: str, gateway: str, text: str, ledger: ReplyLedger | None = None
    ) -> list[str]:
        """Deliver an answer: finish its live reply, or show it at once (exactly once in a queued run); then the
        page lays it out (a ``done`` event: its Markdown rendered where the page is held, ``show``)."""

        async def post() -> list[str]:
            return list(await self._live(visitor, gateway, ledger=None, streamed=False).finish(text))

        handles = await self.deliver_with(
            key,
            text,
            ledger=ledger,
            live_reply=lambda led: self._live(visitor, gateway, ledger=led, streamed=False),
            post=post,
        )
        for handle in filter(None, handles):
            await self._publisher(gateway)(visitor, {"op": "done", "id": handle, "text": text})
        return handles

    async def post_media(self, state: ContextState[Any], item: Outgoing) -> str:
        """Show a picture (``<img>``) or a spoken reply (``<audio>``) on the visitor's pages
        (``core.media.MediaPoster``): through the relay to the gateway holding them in a fleet. ``PlatformError``
        when its bytes are not what it claims to be."""
        if checked_mime(item.kind.value, item.data) is None:
            raise PlatformError(f"the web chat shows no {item.kind.value} of type {item.mime!r}: its bytes are not one")
        visitor = state.platform_args
        await self._publisher(state.values.get(GATEWAY) or "")(visitor, relay_event(item))
        log.info("web: showed a %s of %d bytes", item.kind.value, len(item.data))
        return f"the visitor's page ({item.kind.value})"

    async def notify(self, *, visitor: str, gateway: str, text: str) -> None:
        """Show a notice of the bot (a failure, a limit) on the visitor's pages."""
        await self._publisher(gateway)(visitor, {"op": "notice", "text": text})

    def typing(self, visitor: str, gateway: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Show "typing..." on the visitor's pages while the block lasts."""
        publish = self._publisher(gateway)
        return self.hold_typing(("web", visitor), lambda: publish(visitor, {"op": "typing"}))
