"""One Telegram bot, composed: the chat layer's adapter skeleton (``extensions.chat.adapter``) filled in with the
Telegram modules, each with one job.

- ``application``: python-telegram-bot's Application (the Bot API client, rate limiter, token check);
- ``update_source``: where updates come from (``Poller``, ``WebhookServer`` or PTB's ``Updater``) and how they stop;
- ``listener``: every update routed by what it is (a membership change, a button pressed, a message), and a
  message decided on (dedupe, then its verdict: ``filters``);
- ``handover``: a message handed to the agent or to the commands (embedded or queued, with full-inbox holding);
- ``bot_commands``: the commands and who may use them;
- ``approvals``: approval requests posted with buttons, and the presses on them;
- ``members``: the tier of whoever writes or presses, and a group's administrators;
- ``posting``: what the bot writes (answers, live replies, notices, "typing...").

This module alone imports them all; none of them imports it back.

``agent.start()`` starts the service (build the Application, check the token with ``getMe``, start the update
processor), then subscribes the input (start long polling or the webhook server). ``agent.stop()`` unsubscribes
(stop fetching, answer what was already fetched, wait for the answers in flight, bounded by the agent's
``stop_timeout``), then stops the service (close the HTTP clients).

With long polling, updates are fetched by ``Poller`` instead of PTB's ``Updater``, and the offset confirmed to
Telegram moves past an update only once it is handled. Embedded, that is once it is answered, so a crash between
fetching and answering loses nothing. In front of a queue (``bots gateway``: the agent's dispatcher is distributed,
so ``agent.send`` returns once the message is stored) it is once the message is stored in Redis (retrying while
Redis is down) or deliberately dropped; a message for a full inbox is kept in the background by
``REDIS_INBOX_FULL`` (the chat's later messages behind it) while the other chats go on. A gateway that dies
holding fetched updates loses none. With a webhook, ``WebhookServer`` replaces PTB's webhook server and feeds the
same listener (storing tried once): Telegram gets its 200 only once the update is stored or dropped on purpose,
else a 503 and it delivers the update again. Embedded, PTB's webhook server answers 200 at once.

Operations: the readiness check ``telegram`` is ready while updates arrive (polling running, or the webhook server
listening; with ``listen=False``, once the bot is initialised); messages received and ignored and every 429 go to
the agent's observers; a token Telegram stops accepting while the bot runs (401) is reported with ``agent.fail``,
so ``bots run`` stops with a clear error instead of idling.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from telegram import Bot, Update
from telegram.error import InvalidToken, TelegramError
from telegram.ext import TypeHandler

from core.errors import BotError, ConfigError, PlatformError

from ..chat.adapter import ChatAdapter
from ..chat.answer_book import AnswerBook, Ephemeral
from ..chat.i18n import say
from ..chat.policy import Allowlist
from ..chat.stream import LiveReply, ReplyKey
from .application import App, build_application, initialize, quiet_library_logs
from .approvals import TelegramApprovals
from .bot_commands import COMMANDS, FORGET_DONE, RESET_DONE, RESET_REFUSED, BotCommands
from .business import BusinessConnections
from .definitions import MESSAGE, ChatArgs, telegram_chat
from .filters import Judge
from .guest_answer import answer_guest
from .handover import Handover
from .listener import BotIdentity, Listener
from .members import ChatMembers
from .posting import Posting
from .settings import WEBHOOK_DEADLINE, TelegramSettings
from .update_source import ALLOWED_UPDATES, UpdateSource, uses_ptb_updater

if TYPE_CHECKING:
    from core import Setup
    from core.definitions import Send
    from core.events import RunEvent
    from core.fleet.reply_ledger import ReplyLedger
    from core.media import Attachment

__all__ = (
    "ALLOWED_UPDATES",
    "BUSY",
    "COMMANDS",
    "FORGET_DONE",
    "RESET_DONE",
    "RESET_REFUSED",
    "TelegramRuntime",
)

log = logging.getLogger("extensions.telegram")

BUSY = say("busy")
"""The notice of a message refused because the chat's inbox is full (in English; each chat reads its language)."""


class TelegramRuntime(ChatAdapter):
    """One bot token: the PTB Application, the listener and the posting side."""

    platform = "telegram"

    def __init__(self, settings: TelegramSettings, *, listen: bool = True, answers: AnswerBook | None = None) -> None:
        token = settings.token.get_secret_value().strip() if settings.token is not None else ""
        if not token:
            raise ConfigError(
                "TELEGRAM_TOKEN is empty: set it to the token @BotFather gave you (in the environment or .env), "
                "or leave the Telegram adapter out"
            )
        super().__init__(
            log=log, typing_every=settings.typing_interval, live_output=MESSAGE if settings.stream_replies else None
        )
        self.settings = settings
        """The ``TELEGRAM_*`` settings."""
        self.listen = listen
        """Receive updates (False in queue workers: only post)."""
        self.application: App | None = None
        """The PTB Application, once started."""
        self.webhook_deadline = WEBHOOK_DEADLINE
        """Seconds the gateway's webhook server may take to store an update before answering 503."""
        self.ephemeral: Ephemeral | None = None
        """A fleet's expiry of the queue's keys of a guest request once answered (``expire_keys``)."""
        self.posting = Posting(self, settings, bot=lambda: self.bot, answers=answers)
        """What the bot writes (``answers``: where its answers are noted for feedback; a fleet's are in Redis)."""
        self.members = ChatMembers(self, bot=lambda: self.bot, timeout=settings.request_timeout)
        """The tiers of message authors and approval pressers (``TRUST_*``)."""
        self.approvals = TelegramApprovals(
            bot=lambda: self.bot,
            rules=lambda: self.trust,
            members=self.members,
            timeout=settings.request_timeout,
            language=lambda approval: self.language(telegram_chat, ChatArgs.model_validate(approval.args)),
        )
        """Approval requests posted with buttons, and the presses on them (``core.approvals``), in the language of
        the conversation that asked."""
        self._token = token
        self._allowlist = Allowlist.of(chats=settings.allowed_chats, users=settings.allowed_users)
        self._source: UpdateSource | None = None
        self._listener: Listener | None = None

    @property
    def bot(self) -> Bot:
        """The bot, for sending; a ``PlatformError`` before the service started."""
        if self.application is None:
            raise PlatformError("the Telegram bot is not started: call await agent.start() first")
        bot: Bot = self.application.bot
        return bot

    # -- receive: the service and the input ------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self.application is not None

    async def connect(self, agent: Setup) -> None:
        """Build the Application and check the token (``getMe``); when listening, start processing updates."""
        quiet_library_logs()
        queued = self.listen and agent.distributed
        app = build_application(
            self.settings,
            self._token,
            on_status=self._on_status,
            updater=uses_ptb_updater(self.settings, listen=self.listen, queued=queued),
        )
        await initialize(app, self.settings)
        me = app.bot.bot
        self.application = app
        self.approvals.attach(agent)
        if not self.listen:
            log.info("Telegram bot @%s started (send only)", me.username or "")
            return
        commands = BotCommands(self, self.settings, self.posting, bot=lambda: self.bot, allowlist=self._allowlist)
        judge = Judge(self, default_policy=self.settings.reply_policy, allowlist=self._allowlist, members=self.members)
        handover = Handover(
            self,
            queued=queued,
            max_concurrent=self.settings.max_concurrent,
            commands=commands,
            posting=self.posting,
            bot_name=me.first_name,
        )
        listener = self._listener = Listener(
            self,
            me=BotIdentity(id=me.id, username=me.username or ""),
            queued=queued,
            judge=judge,
            handover=handover,
            approvals=self.approvals,
            commands=commands,
            business=BusinessConnections(bot=lambda: self.bot),
            guest_mode=self.settings.guest_mode,
        )
        self._source = UpdateSource(
            app,
            self.settings,
            listener,
            queued=queued,
            on_invalid_token=self._polling_refused,
            failure=lambda: self.failure,
        )
        app.add_handler(TypeHandler(Update, listener.on_update))
        await app.start()
        await commands.register_menu()
        log.info("Telegram bot @%s started (listening)", me.username or "")

    async def subscribe(self, send: Send, agent: Setup) -> Callable[[], Coroutine[Any, Any, None]] | None:
        """Start receiving updates (long polling or webhook); returns the unsubscribe coroutine function."""
        if self._listener is None or self._source is None or self.application is None:
            return None
        self._listener.open(send)
        self._source.webhook_deadline = self.webhook_deadline
        await self._source.start(stop_timeout=agent.stop_timeout)
        return self.unsubscribe

    def ready(self) -> bool | str:
        """The readiness check ``telegram``: updates arrive (polling runs, or the webhook server listens); with
        ``listen=False``, the bot is initialised."""
        if self.failure is not None:
            return f"failed: {self.failure}"
        app = self.application
        if app is None:
            return "not connected"
        if not self.listen:
            return True
        if not app.running or self._source is None or not self._source.receiving:
            return "not receiving updates yet"
        return True

    def _polling_refused(self, exc: InvalidToken) -> None:
        """Telegram refused the token while ``Poller`` polled: polling has ended (a 401 was already
        reported by ``_on_status``)."""
        self.fail(
            ConfigError(
                f"Telegram refused TELEGRAM_TOKEN while polling ({exc.message}): set TELEGRAM_TOKEN to the "
                "bot's current token from @BotFather and start the bot again"
            )
        )

    def _on_status(self, code: int, method: str) -> None:
        """The status of a Bot API answer (called by ``ObservedRequest``)."""
        if code == 429:
            self.metrics.rate_limited()
        elif code == 401 and self.application is not None:  # at start, ``initialize`` explains a 401 itself
            self.fail(
                ConfigError(
                    f"Telegram stopped accepting TELEGRAM_TOKEN (401 Unauthorized on {method}): the token was "
                    "revoked or replaced with @BotFather; set TELEGRAM_TOKEN to the bot's current token and "
                    "start the bot again"
                )
            )

    async def stop_receiving(self, *, timeout: float) -> None:
        """Stop fetching updates and hand those already fetched to the listener (bounded by ``timeout``)."""
        if self._source is not None:
            await self._source.stop(timeout=timeout)

    async def disconnect(self) -> None:
        """Close the HTTP clients."""
        self.approvals.detach()
        app, self.application = self.application, None
        self._source = self._listener = None
        if app is not None:
            await app.shutdown()

    async def wait_idle(self) -> None:
        """Return once every fetched update has been decided and every answer has finished (tests, benchmarks)."""
        while True:
            if self._source is not None:
                await self._source.wait_idle()
            if not self.tasks:
                return
            await self.tasks.wait()

    async def fetch_file(self, attachment: Attachment) -> bytes:
        """The bytes of a file someone sent (``getFile``, then the download through PTB)."""
        try:
            file = await self.bot.get_file(attachment.ref)
            return bytes(await file.download_as_bytearray())
        except TelegramError as exc:
            raise PlatformError(f"Telegram could not hand over {attachment.name or 'a file'}: {exc.message}") from exc

    # -- post: what ``definitions.Runtime`` asks for ---------------------------------------------------

    def start_live(self, event: RunEvent) -> LiveReply | None:
        return self.posting.start_live(event)

    async def deliver(
        self,
        *,
        key: ReplyKey,
        chat_id: int,
        thread_id: int | None,
        text: str,
        reply_to: int | None,
        ledger: ReplyLedger | None = None,
        business: str | None = None,
    ) -> list[int]:
        """Deliver an answer (``Posting.deliver``): finished if it was shown while written, else posted; exactly
        once in a queued run. Returns its messages' ids."""
        return await self.posting.deliver(
            key=key,
            chat_id=chat_id,
            thread_id=thread_id,
            text=text,
            reply_to=reply_to,
            ledger=ledger,
            business=business,
        )

    def typing(
        self, chat_id: int, thread_id: int | None, *, business: str | None = None
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """Keep "typing..." alive in the chat while the block lasts (one loop per chat)."""
        return self.posting.typing(chat_id, thread_id, business=business)

    async def expire_keys(self, context_id: str) -> None:
        """In a fleet, let the queue's keys of a guest request expire once it is answered (a failure is logged: the
        keys hold no text, only the request's dedupe key)."""
        if self.ephemeral is None:
            return
        try:
            await self.ephemeral.expire(context_id)
        except BotError as exc:
            log.warning("the queue's keys of %s stay: %s", context_id, exc)

    async def answer_guest(self, *, query_id: str, text: str) -> None:
        """Answer a guest request (``guest_answer.answer_guest``)."""
        await answer_guest(self.bot, query_id=query_id, text=text)

    async def post_poll(
        self, *, args: ChatArgs, question: str, options: list[str], multiple: bool, reply_to: int | None
    ) -> list[int]:
        """Post a poll (``Posting.post_poll``); returns its message's id."""
        return await self.posting.post_poll(
            args=args, question=question, options=options, multiple=multiple, reply_to=reply_to
        )

    async def post_checklist(
        self, *, args: ChatArgs, title: str, tasks: list[str], reply_to: int | None, replace: int | None
    ) -> list[int]:
        """Post or change a checklist (``Posting.post_checklist``); returns its message's id."""
        return await self.posting.post_checklist(
            args=args, title=title, tasks=tasks, reply_to=reply_to, replace=replace
        )

    async def post_reply(
        self,
        *,
        chat_id: int,
        thread_id: int | None,
        text: str,
        reply_to: int | None,
        markdown: bool = True,
        business: str | None = None,
    ) -> list[int]:
        """Post ``text`` (Markdown unless ``markdown=False``) to the chat (through the business connection
        ``business``, when given); the one way this bot writes."""
        return await self.posting.post_reply(
            chat_id=chat_id, thread_id=thread_id, text=text, reply_to=reply_to, markdown=markdown, business=business
        )
