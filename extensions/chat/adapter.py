"""The shape of a chat adapter, written once: receive, decide, run, post. Each platform fills it in.

(Changed since its first commit: ``typing(chat, send)`` is now ``hold_typing(chat, send)``, so a platform keeps
its own ``typing(...)`` with its own arguments.)

A platform package (``extensions.telegram``, ``extensions.discord``) subclasses ``ChatAdapter`` and keeps only
what is its own: its client library, how messages arrive, its filters and commands, how a message is posted. The
path of one message, and what each step finds here:

1. **receive**: the platform's client delivers an event (Telegram's poller or webhook, Discord's gateway shards).
   The subclass starts and stops that source: ``connect`` (at the service's start), ``stop_receiving``.
2. **decide**: filters, dedupe (``seen``), the reply policy (``reply_policy``: the chat's own ``/reply`` over the
   operator's default), commands. Every message is counted (``metrics.received``/``metrics.ignored``). Notices
   are in the chat's language (``language``, then ``extensions.chat.i18n.say``).
3. **run**: the message becomes an ``Incoming`` (``extensions.chat.backpressure``). Embedded, ``run_here`` hands
   it to the agent and waits for the run (a full inbox: the busy notice; a failure: the failure notice); in front
   of a queue, ``backpressure.submit`` stores it, or keeps it waiting for room, or drops it with the busy notice.
   Either runs in a task ``spawn`` gives it, owned by ``tasks``, with the message's correlation id.
4. **post**: the output handler calls ``deliver``: the answer shown while it was written (``live``) gets its
   final text, or, in a queued run, it follows the run's ledger (``record``), or it is posted at once.
   ``hold_typing`` keeps "typing..." alive for as long as a run answers a conversation, in any process.

Lifecycle (the extension's service, ``service(start=adapter.start, stop=adapter.stop)``)::

    start(agent): bind the metrics; readiness check <platform> (``ready``); connect(agent); register the media
                  fetcher <platform> (``fetch_file``) and, when streaming, the live replies' event listener
    unsubscribe(): stop_receiving(timeout) (answer what was already received), then let answers in flight
                   end, both bounded by the agent's ``stop_timeout``
    stop(agent):  stop_receiving(timeout=0); tasks end (bounded, then cancelled); the event listener is
                  removed; live replies cut off are marked as such; disconnect()

A subclass::

    class MyAdapter(ChatAdapter):
        platform = "myplatform"                  # readiness check, media fetcher, metrics label

        def __init__(self, settings):
            super().__init__(log=log, typing_every=settings.typing_interval,
                             live_output=MESSAGE if settings.stream_replies else None)

        @property
        def connected(self) -> bool: ...        # the client is up (start was done)
        async def connect(self, agent) -> None: ...     # log in; raise ConfigError/PlatformError saying what to fix
        async def stop_receiving(self, *, timeout: float) -> None: ...
        async def disconnect(self) -> None: ...
        def ready(self) -> bool | str: ...      # True, or why not
        async def fetch_file(self, attachment) -> bytes: ...
        def start_live(self, event) -> LiveReply | None: ...  # only with live_output

    # in the listener (decide, then run):
    if adapter.seen.add(message_id) is False: ...  # a duplicate
    policy = await adapter.reply_policy(my_chat, args, settings.reply_policy)
    adapter.spawn(adapter.run_here(incoming), name=..., key=incoming.key)

The API is stable: a platform may rely on every public name here.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Hashable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from core.errors import BackpressureError, BotError, ChatGoneError

from .backpressure import Backpressure, Incoming
from .commands import ChatCommands
from .counters import ChatMetrics, Ignored
from .dedupe import RecentIds
from .exactly_once import ReplyRecord, Uncertain
from .policy import ReplyPolicy
from .reminders import drop_conversation
from .stream import LiveReplies, LiveReply, ReplyKey
from .tasks import MessageTasks
from .trust import SlidingCap, TrustRules, TtlCache
from .typing_indicator import SharedTyping

if TYPE_CHECKING:
    from core import Setup
    from core.definitions import Context
    from core.events import RunEvent
    from core.fleet.reply_ledger import ReplyLedger
    from core.media import Attachment

__all__ = ("ChatAdapter",)

H = TypeVar("H")


class ChatAdapter(abc.ABC):
    """What every chat platform's runtime shares; a subclass fills in the platform's own parts."""

    platform: ClassVar[str]
    """The platform's name: the readiness check, the media fetcher's source, the metrics label (``telegram``)."""

    def __init__(self, *, log: logging.Logger, typing_every: float, live_output: str | None) -> None:
        self.log = log
        """The platform's logger (``extensions.<platform>``)."""
        self.metrics = ChatMetrics(self.platform)
        """Messages received and ignored, 429s and uncertain replies, reported to the agent's observers."""
        self.tasks = MessageTasks(log)
        """The tasks messages are answered (or kept waiting for room) in; ended by ``stop``."""
        self.seen = RecentIds()
        """Platform ids of the messages received lately: a redelivery is answered once."""
        self.backpressure = Backpressure(tasks=self.tasks)
        """Messages for a full inbox, waiting for room, and the busy notices (in front of a queue)."""
        self.typing_loops = SharedTyping(every=typing_every)
        """One "typing..." loop per conversation."""
        self.live = LiveReplies(output_type=live_output, start=self.start_live) if live_output is not None else None
        """Answers being shown while they are written (None when the operator turned streaming off)."""
        self.failure: BotError | None = None
        """Why the bot cannot go on, when the platform refused it while running (also given to ``agent.fail``)."""
        self.counts_for_readiness = True
        """``ready`` is registered as the readiness check ``<platform>`` (a platform may leave itself out of
        ``/readyz``: the web chat does until the operator configures it)."""
        self.trust = TrustRules()
        """How authors get their tier and which bots are answered (``TRUST_*``; set with ``set_trust``)."""
        self.chat_admins: TtlCache[frozenset[str]] = TtlCache(self.trust.cache_seconds)
        """What the platform said lately about each chat's administrators."""
        self.bot_exchanges = SlidingCap(self.trust.bot_replies, self.trust.bot_window)
        """Answers to other bots per chat in the window."""
        self._agent: Setup | None = None
        self._undo: list[Callable[[], None]] = []

    def set_trust(self, rules: TrustRules) -> None:
        """Use the operator's ``rules`` (before ``start``)."""
        self.trust = rules
        self.chat_admins = TtlCache(rules.cache_seconds)
        self.bot_exchanges = SlidingCap(rules.bot_replies, rules.bot_window)

    @property
    def agent(self) -> Setup | None:
        """The agent served, from ``start`` on."""
        return self._agent

    # -- what a platform fills in ----------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def connected(self) -> bool:
        """True from a successful ``connect`` until ``stop``."""

    @abc.abstractmethod
    async def connect(self, agent: Setup) -> None:
        """Receive: bring the platform's client up (log in; when listening, get ready to receive). Raise a
        ``ConfigError`` or ``PlatformError`` that says what to fix, after closing what was opened."""

    @abc.abstractmethod
    async def stop_receiving(self, *, timeout: float) -> None:
        """Receive no more; what was already received is decided within ``timeout`` seconds."""

    @abc.abstractmethod
    async def disconnect(self) -> None:
        """Close the platform's client (after ``stop_receiving`` and the tasks ended)."""

    @abc.abstractmethod
    def ready(self) -> bool | str:
        """The readiness check: True, or why not (``failed: ...`` once ``failure`` is set)."""

    @abc.abstractmethod
    async def fetch_file(self, attachment: Attachment) -> bytes:
        """The bytes of an attachment someone sent (a worker reads what the listener only referenced)."""

    def start_live(self, event: RunEvent) -> LiveReply | None:
        """The live reply for an answer that starts streaming, or None (not this platform's conversation). Called
        in the run's task by the event listener; only with ``live_output``."""
        return None

    # -- lifecycle -------------------------------------------------------------------------------------

    async def start(self, agent: Setup) -> None:
        """The service's start: readiness, ``connect``, then the media fetcher and the live replies' listener."""
        if self.connected:
            return
        self._agent = agent
        self.metrics.bind(agent)
        if self.counts_for_readiness:
            agent.add_readiness(self.platform, self.ready)  # stays after stop: it then says "not connected"
        await self.connect(agent)
        self._undo.append(agent.add_media_fetcher(self.platform, self.fetch_file))
        if self.live is not None:
            self._undo.append(agent.add_event_listener(self.live.on_event))

    async def unsubscribe(self) -> None:
        """Receive no more: what was received is still decided, and the answers in flight end, each bounded by
        the agent's ``stop_timeout``."""
        timeout = self._agent.stop_timeout if self._agent is not None else 10.0
        await self.stop_receiving(timeout=timeout)
        await self.tasks.close(timeout=timeout)

    async def stop(self, agent: Setup) -> None:
        """The service's stop (after the agent finished its runs): the stop sequence of every platform."""
        if not self.connected:
            return
        await self.stop_receiving(timeout=0)
        await self.tasks.close(timeout=agent.stop_timeout)
        undo, self._undo = self._undo, []
        for remove in reversed(undo):
            remove()
        if self.live is not None:
            await self.live.aclose()  # answers cut off by the stop are marked as such
        await self.disconnect()

    def fail(self, error: BotError) -> None:
        """The bot cannot go on: keep the first reason, log it and tell the agent (``bots run`` stops)."""
        if self.failure is not None:
            return
        self.failure = error
        self.log.error("%s", error)
        if self._agent is not None:
            self._agent.fail(error)

    # -- decide ----------------------------------------------------------------------------------------

    async def reply_policy(self, context: Context, args: Any, default: ReplyPolicy) -> ReplyPolicy:
        """When the bot answers in the group ``args`` names: its own choice (``/reply``, or its parent's) over the
        operator's ``default``, read from the store at each message (a change applies at once); the store down:
        ``default``."""
        if self._agent is None:
            return default
        commands, cid = ChatCommands.of(self._agent, context, args)
        try:
            return await commands.reply_policy(cid, default)
        except BotError as exc:
            self.log.warning("could not read the settings of %s: %s", cid, exc)
            return default

    async def language(self, context: Context, args: Any) -> str | None:
        """The language of the bot's own messages in the conversation ``args`` names (None when it cannot be read:
        English then)."""
        if self._agent is None:
            return None
        commands, cid = ChatCommands.of(self._agent, context, args)
        try:
            return await commands.language(cid)
        except BotError as exc:
            self.log.warning("could not read the settings of %s: %s", cid, exc)
            return None

    def disabled_commands(self) -> frozenset[str]:
        """The commands the operator turned off (``BOT_DISABLED_COMMANDS``)."""
        return self._agent.chat_policy.disabled_commands if self._agent is not None else frozenset()

    # -- run -------------------------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, None], *, name: str, key: str) -> asyncio.Task[None]:
        """Run ``coro`` in a task the adapter owns, with ``key`` as the correlation id of its log lines."""
        return self.tasks.spawn(coro, name=name, correlation=key)

    async def run_here(self, message: Incoming, *, context: Context, args: Any) -> None:
        """Embedded: hand ``message`` to the agent and wait for its run. A full inbox: counted and the busy notice
        (each time: nothing waits here); any other failure: logged, and ``message.tell_failed`` if given."""
        try:
            await message.store()
        except BackpressureError:
            self.metrics.ignored(context, args, Ignored.BUSY)
            await message.tell_busy()
        except Exception:
            self.log.exception("could not answer %s", message.what)
            if message.tell_failed is not None:
                await message.tell_failed()

    # -- post ------------------------------------------------------------------------------------------

    def hold_typing(
        self, chat: Hashable, send: Callable[[], Awaitable[object]]
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """Keep "typing..." alive in ``chat`` while the block lasts (``send`` shows it once): one loop per chat
        however many hold it (the listener while it hands a message over, the run while it answers)."""
        return self.typing_loops.hold(chat, send)

    def record(
        self, ledger: ReplyLedger | None, output_type: str, *, streamed: bool, uncertain: Uncertain | None = None
    ) -> ReplyRecord | None:
        """A reply's record in a queued run's ledger (None outside one): the intent of each post is recorded, and a
        post left uncertain by a crash is resolved by ``uncertain`` (None: the record's default), and counted."""
        if ledger is None:
            return None
        return ReplyRecord(
            ledger, output_type, streamed=streamed, uncertain=uncertain, on_uncertain=self.metrics.uncertain_reply
        )

    async def deliver_with(
        self,
        key: ReplyKey,
        text: str,
        *,
        ledger: ReplyLedger | None,
        live_reply: Callable[[ReplyLedger], LiveReply],
        post: Callable[[], Awaitable[list[H]]],
    ) -> list[H]:
        """Post: finish the answer's live reply if it was shown while written (``key`` is the output's ``(context
        id, step, index)``); else, in a queued run, a reply following the run's ``ledger`` (``live_reply(ledger)``,
        posted at once: exactly once across attempts at the batch); else ``post()``. Returns the messages. When the
        platform says the bot may no longer post there (``ChatGoneError``), the conversation's schedules are
        dropped (``extensions.chat.reminders``) before the error is raised."""
        reply = self.live.take(key, ledger) if self.live is not None else None
        if reply is None and ledger is not None:
            reply = live_reply(ledger)
        try:
            if reply is None:
                return await post()
            handles: list[H] = await reply.finish(text)
        except ChatGoneError as exc:
            if self._agent is not None:
                await drop_conversation(self._agent, key[0], str(exc))
            raise
        return handles

    async def abandon_replies(self, context_id: str) -> None:
        """A run failed: mark the answers it was writing as cut."""
        if self.live is not None:
            await self.live.abandon_context(context_id)
