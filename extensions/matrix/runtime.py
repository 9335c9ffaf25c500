"""One Matrix bot account, composed: the chat layer's adapter skeleton (``extensions.chat.adapter``) filled in with
matrix-nio's ``AsyncClient`` and the Matrix modules, each with one job (``sync``: where events come from;
``listener``: what is done with them; ``commands``; ``posting``: what the bot writes).

``agent.start()`` starts the service (log in with the access token: ``whoami`` checks it), then subscribes the
input (start syncing). ``agent.stop()`` unsubscribes (the sync ends, what it brought is decided, the answers in
flight end within the agent's ``stop_timeout``), then stops the service (close the HTTP session).

Encrypted rooms: without matrix-nio's end-to-end extra (``pip install 'matrix-nio[e2e]'``) the bot reads no
encrypted room; one with ``m.room.encryption`` in its state gets one clear message saying so, and the log names
the extra. With the extra installed the room is not refused (the bot does not set up its keys: that is left to a
later version).

Operations: the readiness check ``matrix`` is ready while syncing (with ``listen=False``, once logged in); an
access token the homeserver stops accepting (``M_UNKNOWN_TOKEN``) is reported with ``agent.fail``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from nio import AsyncClient, AsyncClientConfig, MatrixRoom, WhoamiResponse
from nio.crypto import ENCRYPTION_ENABLED

from core.errors import BackpressureError, ConfigError, DispatchError, MemoryStoreError, PlatformError

from ..chat.adapter import ChatAdapter
from ..chat.dedupe import RecentIds
from ..chat.policy import Allowlist
from ..chat.stream import LiveReply, ReplyKey
from .approvals import MatrixApprovals
from .commands import Commands
from .definitions import MESSAGE, REPLY_TO, RoomArgs, matrix_room
from .listener import Listener
from .posting import MatrixSink, Poster, pieces
from .settings import MatrixSettings
from .sync import Sync

if TYPE_CHECKING:
    from core import Setup
    from core.definitions import ContextState, Send
    from core.events import RunEvent
    from core.fleet.reply_ledger import ReplyLedger
    from core.media import Attachment, Outgoing

__all__ = ("E2E_EXTRA", "ENCRYPTED_REFUSAL", "MatrixRuntime")

log = logging.getLogger("extensions.matrix")

E2E_EXTRA = "matrix-nio[e2e]"
"""What to install for encrypted rooms."""
ENCRYPTED_REFUSAL = (
    "This room is end-to-end encrypted, and this bot reads only unencrypted rooms: I cannot see what is written "
    "here. Talk to me in an unencrypted room (or ask my operator to install the end-to-end support)."
)
"""The one message an encrypted room gets from a bot without the end-to-end extra."""
STORE_FIRST_BACKOFF = 0.1
STORE_MAX_BACKOFF = 5.0


class MatrixRuntime(ChatAdapter):
    """One bot account: matrix-nio's client, the sync, the listener and the posting side."""

    platform = "matrix"

    def __init__(self, settings: MatrixSettings, *, listen: bool = True) -> None:
        if not settings.configured:
            raise ConfigError(
                "Matrix needs MATRIX_HOMESERVER, MATRIX_USER_ID and MATRIX_ACCESS_TOKEN: set all three (see "
                "docs/how-to/matrix.md), or leave MATRIX_ACCESS_TOKEN unset"
            )
        super().__init__(
            log=log, typing_every=settings.typing_interval, live_output=MESSAGE if settings.stream_replies else None
        )
        self.settings = settings
        """The ``MATRIX_*`` settings."""
        self.listen = listen
        """Sync (False in queue workers: only post)."""
        self.e2e = ENCRYPTION_ENABLED
        """matrix-nio's end-to-end extra is installed: encrypted rooms are not refused."""
        self.client: AsyncClient | None = None
        """matrix-nio's client, once connected."""
        self.mine = RecentIds(size=50_000, ttl=7 * 24 * 3600.0)
        """Event ids of the bot's own messages lately (a reply to one is addressed to the bot)."""
        self.refused: set[str] = set()
        """Encrypted rooms already told they are refused."""
        self.approvals = MatrixApprovals(
            poster=lambda: self.poster,
            me=settings.user_id,
            rules=lambda: self.trust,
            timeout=settings.request_timeout,
            language=lambda approval: self.language(matrix_room, RoomArgs.model_validate(approval.args)),
        )
        """Approval requests posted with ✅ and ❌ under them, and the reactions to them (``core.approvals``), in
        the language of the conversation that asked."""
        self._poster: Poster | None = None
        self._listener: Listener | None = None
        self._sync: Sync | None = None

    @property
    def poster(self) -> Poster:
        """What the bot writes with; a ``PlatformError`` before the service started."""
        if self._poster is None:
            raise PlatformError("the Matrix client is not started: call await agent.start() first")
        return self._poster

    # -- receive ---------------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self.client is not None

    async def connect(self, agent: Setup) -> None:
        """Log in with the access token (``whoami``); when listening, get the listener and the sync ready."""
        settings = self.settings
        config = AsyncClientConfig(
            request_timeout=settings.request_timeout,
            max_limit_exceeded=5,
            max_timeouts=3,
            encryption_enabled=False,
            store_sync_tokens=False,
        )
        client = AsyncClient(settings.homeserver, settings.user_id, device_id=settings.device_id or None, config=config)
        client.access_token = settings.token.get_secret_value().strip()
        client.user_id = settings.user_id
        try:
            who = await client.whoami()
        except Exception as exc:  # (aiohttp's errors: the homeserver cannot be reached)
            await client.close()
            raise PlatformError(
                f"could not reach the Matrix homeserver at {settings.homeserver} ({type(exc).__name__}): check "
                "MATRIX_HOMESERVER and the network"
            ) from exc
        if not isinstance(who, WhoamiResponse):
            await client.close()
            raise ConfigError(
                f"the Matrix homeserver refused MATRIX_ACCESS_TOKEN ({getattr(who, 'status_code', None) or 'error'}):"
                " set it to the bot account's current access token (docs/how-to/matrix.md)"
            )
        if who.user_id != settings.user_id:
            await client.close()
            raise ConfigError(
                f"MATRIX_ACCESS_TOKEN belongs to {who.user_id}, not to MATRIX_USER_ID={settings.user_id}: set "
                "MATRIX_USER_ID to the account the token was made for"
            )
        if who.device_id and not client.device_id:
            client.device_id = who.device_id
        self.client = client
        self._poster = Poster(client)
        self.approvals.attach(agent)
        if not self.listen:
            log.info("Matrix account %s logged in (send only)", settings.user_id)
            return
        commands = Commands(self, self._poster)
        self._listener = Listener(
            self,
            me=settings.user_id,
            queued=agent.distributed,
            poster=self._poster,
            commands=commands,
            allowlist=Allowlist.of(chats=settings.allowed_rooms, users=settings.allowed_users),
            default_policy=settings.reply_policy,
            mine=lambda event_id: event_id in self.mine,
            typing=self.typing,
            until_stored=until_stored,
            on_reaction=self.approvals.on_reaction,
        )
        self._sync = Sync(
            client,
            timeout=settings.sync_timeout,
            on_event=self._listener.on_event,
            on_room=self._on_room,
            allowed_rooms=settings.allowed_rooms,
            on_refused_token=self._token_refused,
        )
        log.info("Matrix account %s logged in (listening)", settings.user_id)

    async def subscribe(self, send: Send, agent: Setup) -> Callable[[], Coroutine[Any, Any, None]] | None:
        """Start syncing; returns the unsubscribe coroutine function."""
        if self._listener is None or self._sync is None:
            return None
        self._listener.open(send)
        await self._sync.start()
        return self.unsubscribe

    def ready(self) -> bool | str:
        if self.failure is not None:
            return f"failed: {self.failure}"
        if self.client is None:
            return "not connected"
        if not self.listen:
            return True
        if self._sync is None or not self._sync.receiving:
            return "not syncing yet"
        return True

    def _token_refused(self, code: str) -> None:
        self.fail(
            ConfigError(
                f"the Matrix homeserver stopped accepting MATRIX_ACCESS_TOKEN ({code}): the token was logged out or "
                "replaced; set MATRIX_ACCESS_TOKEN to the bot account's current token and start the bot again"
            )
        )

    async def _on_room(self, room: MatrixRoom) -> None:
        """A room the sync brought (joined, or its state changed): an encrypted one is refused once, unless the
        end-to-end extra is installed."""
        if not room.encrypted or room.room_id in self.refused:
            return
        self.refused.add(room.room_id)
        if self.e2e:
            log.info("matrix: room %s is encrypted; %s is installed, so it is not refused", room.room_id, E2E_EXTRA)
            return
        log.warning(
            "matrix: room %s is end-to-end encrypted: refused (its messages are not read); install matrix-nio's "
            "end-to-end extra (pip install '%s') for encrypted rooms",
            room.room_id,
            E2E_EXTRA,
        )
        try:
            await self.poster.post(RoomArgs(room_id=room.room_id), ENCRYPTED_REFUSAL, reply_to=None, notice=True)
        except PlatformError as exc:
            log.warning("could not tell room %s that it is refused: %s", room.room_id, exc)

    async def stop_receiving(self, *, timeout: float) -> None:
        """Stop syncing; what the last sync brought is decided within ``timeout``."""
        if self._sync is not None:
            await self._sync.stop(timeout=timeout)

    async def disconnect(self) -> None:
        """Close the HTTP session."""
        self.approvals.detach()
        client, self.client = self.client, None
        self._poster = self._listener = self._sync = None
        if client is not None:
            await client.close()

    async def fetch_file(self, attachment: Attachment) -> bytes:
        """The bytes of a picture someone posted (``mxc://``, from the homeserver's media repository)."""
        return await self.poster.download(attachment.ref)

    # -- post ------------------------------------------------------------------------------------------

    def _live(self, args: RoomArgs, *, reply_to: str | None, ledger: ReplyLedger | None, streamed: bool) -> LiveReply:
        return LiveReply(
            sink=_Remembered(MatrixSink(self.poster, args, reply_to=reply_to), self.mine),
            split=pieces,
            interval=self.settings.stream_interval,
            record=self.record(ledger, MESSAGE, streamed=streamed),
            parse_handle=str,
        )

    def start_live(self, event: RunEvent) -> LiveReply | None:
        agent = self.agent
        state = agent.state_of(event.context_id) if agent is not None else None
        if state is None or not state.context.includes(matrix_room) or self.client is None:
            return None
        return self._live(state.platform_args, reply_to=state.values.get(REPLY_TO), ledger=state.ledger, streamed=True)

    async def deliver(
        self, *, key: ReplyKey, args: RoomArgs, text: str, reply_to: str | None, ledger: ReplyLedger | None
    ) -> list[str]:
        """Deliver an answer: finish its live reply, or post it at once (exactly once in a queued run)."""

        async def post() -> list[str]:
            sent = await self.poster.post_all(args, text, reply_to=reply_to)
            for event_id in sent:
                self.mine.add(event_id)
            return sent

        return await self.deliver_with(
            key,
            text,
            ledger=ledger,
            live_reply=lambda led: self._live(args, reply_to=reply_to, ledger=led, streamed=False),
            post=post,
        )

    async def notify(self, args: RoomArgs, text: str, *, reply_to: str | None) -> None:
        """Post a notice of the bot (a failure, a limit) in the conversation."""
        await self.poster.post_all(args, text, reply_to=reply_to, notice=True)

    async def post_media(self, state: ContextState[Any], item: Outgoing) -> str:
        """Post a picture (``m.image``) or a spoken reply (``m.audio``), uploaded first, in the conversation of
        ``state``, quoting the message the run answers (``core.media.MediaPoster``); returns its event id."""
        from core.media import OutgoingKind

        args: RoomArgs = state.platform_args
        event_id = await self.poster.post_file(
            args,
            item.data,
            mime=item.mime,
            name=item.name,
            msgtype="m.audio" if item.kind is OutgoingKind.VOICE else "m.image",
            caption=item.caption,
            reply_to=state.values.get(REPLY_TO),
        )
        self.mine.add(event_id)
        log.info("room %s: posted a %s of %d bytes", args.room_id, item.kind.value, len(item.data))
        return f"event {event_id}"

    def typing(self, args: RoomArgs) -> contextlib.AbstractAsyncContextManager[None]:
        """Keep "typing..." alive in the room while the block lasts (one loop per room)."""
        seconds = self.settings.typing_interval + 5

        async def show() -> None:
            if self._poster is not None:
                await self._poster.typing(args.room_id, seconds=seconds)

        return self.hold_typing(("matrix", args.room_id), show)


class _Remembered:
    """A sink that remembers the event ids it posted (replies to them are addressed to the bot)."""

    def __init__(self, sink: MatrixSink, mine: RecentIds) -> None:
        self._sink = sink
        self._mine = mine

    async def post(self, text: str, *, index: int) -> str:
        event_id = await self._sink.post(text, index=index)
        self._mine.add(event_id)
        return event_id

    async def edit(self, handle: Any, text: str) -> None:
        await self._sink.edit(handle, text)

    async def delete(self, handle: Any) -> None:
        await self._sink.delete(handle)


async def until_stored(work: Callable[[], Awaitable[None]], what: str) -> None:
    """``await work()`` until it succeeds, trying again with backoff while the queue cannot take it (Redis cannot
    be reached, the inbox is full); the sync token stays where it was meanwhile, so should this process die the
    next gateway syncs the event again. Any other error is raised."""
    failing_since: float | None = None
    delay = STORE_FIRST_BACKOFF
    while True:
        try:
            await work()
        except (BackpressureError, DispatchError, MemoryStoreError) as exc:
            if failing_since is None:
                failing_since = time.monotonic()
                log.warning("%s is kept (with the events after it) until it is stored: %s", what, exc)
        else:
            if failing_since is not None:
                log.warning("%s stored after %.1fs", what, time.monotonic() - failing_since)
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, STORE_MAX_BACKOFF)
