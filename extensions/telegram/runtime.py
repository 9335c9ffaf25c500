"""The python-telegram-bot side: the Application's lifecycle, the update listener, and posting.

``agent.start()`` starts the service (build the Application, check the token with ``getMe``, start the
update processor), then subscribes the input (start long polling or the webhook server). ``agent.stop()``
unsubscribes (stop fetching, answer what was already fetched, wait for the answers in flight, bounded by
the agent's ``stop_timeout``), then stops the service (close the HTTP clients).

The listener never blocks PTB's update processing: each message to answer runs in a task this runtime
owns, so one slow chat does not hold up the others; replies in one chat are still ordered by the agent,
which runs one conversation at a time.

With long polling, updates are fetched by ``Poller`` instead of PTB's ``Updater``, and the offset confirmed
to Telegram moves past an update only once it is handled. Embedded, that is once it is answered (the answer
runs in an owned task the poller waits for in the background), so a crash between fetching and answering
loses nothing. In front of a queue (``bots gateway``: the agent's dispatcher is distributed, so
``agent.send`` returns once the message is stored) it is once the message is stored in Redis (retrying
while Redis is down) or deliberately dropped; a message for a full inbox is kept in the background by
``REDIS_INBOX_FULL`` (the chat's later messages behind it) while the other chats go on. A gateway that dies
holding fetched updates loses none.
With a webhook, ``WebhookServer`` replaces PTB's webhook server and feeds the same handler (storing tried
once): Telegram gets its 200 only once the update is stored or dropped on purpose, else a 503 and it
delivers the update again. Embedded, PTB's webhook server answers 200 at once, then the bot processes.

Operations: ``agent.readiness["telegram"]`` is ready while updates arrive (polling running, or the
webhook server listening; with ``listen=False``, once the bot is initialised); messages received and
ignored and every 429 go to the agent's observers; a token Telegram stops accepting while the bot runs
(401) is reported with ``agent.fail``, so ``bots run`` stops with a clear error instead of idling.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from telegram import Bot, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, ReplyParameters, Update
from telegram.constants import ChatAction, ChatMemberStatus
from telegram.error import InvalidToken, NetworkError, TelegramError
from telegram.ext import AIORateLimiter, Application, ApplicationBuilder, ContextTypes, TypeHandler
from telegram.request import BaseRequest, HTTPXRequest, RequestData

from core.entries import InputRef
from core.errors import BackpressureError, BotError, ConfigError, DispatchError, MemoryStoreError, PlatformError
from core.media import Attachment
from core.trace import correlation_id

from ..chat import (
    Allowlist,
    ChatMetrics,
    Ignored,
    LiveReplies,
    LiveReply,
    MessageTasks,
    RecentIds,
    ReplyPolicy,
    SharedTyping,
)
from ..chat.backpressure import Backpressure, Incoming
from ..chat.commands import Caller, ChatCommands
from ..chat.exactly_once import REPLY_LEDGER, ReplyRecord
from ..chat.i18n import localized, say
from ..chat.stream import ReplyKey
from .definitions import MESSAGE, REPLY_TO, ChatArgs, telegram_chat
from .filters import Decision, MessageFacts, decide, ignore_reason
from .live import live_reply
from .poller import Poller, bootstrap_call, until_stored
from .reply import post_reply
from .settings import TelegramMode, TelegramSettings
from .webhook import WEBHOOK_DEADLINE, WebhookServer

if TYPE_CHECKING:
    from core.agent import Agent
    from core.definitions import Send
    from core.events import RunEvent
    from core.fleet.reply_ledger import ReplyLedger

__all__ = ("TelegramRuntime",)

# Opt in to PTB's coming behaviour (time periods as ``timedelta``, read when an error is built): without
# it PTB warns on every 429, since ``RetryAfter.__init__`` reads its own deprecated attribute.
os.environ.setdefault("PTB_TIMEDELTA", "true")

log = logging.getLogger("extensions.telegram")
content_log = logging.getLogger("content.telegram")
"""Message text, silent unless the operator opts in (``LOG_CONTENT``)."""

BUSY = say("busy")
"""The notice of a message refused because the chat's inbox is full (in English; each chat reads its language)."""
RESET_DONE = say("reset_done")
"""The answer to ``/reset``."""
FORGET_DONE = say("forget_done")
"""The answer to ``/forget``."""
RESET_REFUSED = "Only an administrator of this group can make me forget this conversation."
"""The answer to ``/reset`` or ``/forget`` by a group member who is not a chat administrator nor an admin user."""
ALLOWED_UPDATES = ("message", "callback_query")
"""The update types the bot asks Telegram for."""
COMMANDS = (
    ("help", "What I can do"),
    ("reset", "Forget this conversation"),
    ("forget", "Erase this conversation and its history"),
    ("model", "Show or choose the model of this chat"),
    ("persona", "Show, set (/persona set ...) or reset the persona"),
    ("language", "Show or choose the language of my messages"),
    ("reply", "Show or choose when I answer in this group"),
    ("settings", "This chat's settings"),
    ("stats", "Your usage and this chat's"),
)
"""The command menu users see (``/start`` is Telegram's own and needs no entry)."""
CHOICE_PREFIX = "cfg:"
"""Callback data of the inline keyboard buttons of a settings answer (``cfg:model:<name>``)."""

_App = Application[Any, Any, Any, Any, Any, Any]


class _RateLimiter(AIORateLimiter):
    """PTB's limiter, except for chat actions: "typing" must not use up a group's 20 messages a minute."""

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, Any]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> Any:
        if endpoint == "sendChatAction":
            return await callback(*args, **kwargs)
        return await super().process_request(callback, args, kwargs, endpoint, data, rate_limit_args)


class _ObservedRequest(HTTPXRequest):
    """PTB's HTTP client for the Bot API, telling the runtime the status of every answer: a 429 for the
    metrics, a 401 once running (the token was revoked). Only the method name leaves this class: the URL
    holds the token."""

    def __init__(self, on_status: Callable[[int, str], None], **options: Any) -> None:
        super().__init__(**options)
        self._on_status = on_status

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = BaseRequest.DEFAULT_NONE,
        write_timeout: Any = BaseRequest.DEFAULT_NONE,
        connect_timeout: Any = BaseRequest.DEFAULT_NONE,
        pool_timeout: Any = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        code, payload = await super().do_request(
            url,
            method,
            request_data=request_data,
            read_timeout=read_timeout,
            write_timeout=write_timeout,
            connect_timeout=connect_timeout,
            pool_timeout=pool_timeout,
        )
        self._on_status(code, url.rpartition("/")[2])
        return code, payload


class TelegramRuntime:
    """One bot token: the PTB Application, the listener and the posting side."""

    def __init__(self, settings: TelegramSettings, *, listen: bool = True) -> None:
        token = settings.token.get_secret_value().strip() if settings.token is not None else ""
        if not token:
            raise ConfigError(
                "TELEGRAM_TOKEN is empty: set it to the token @BotFather gave you (in the environment or .env), "
                "or leave the Telegram adapter out"
            )
        self.settings = settings
        """The ``TELEGRAM_*`` settings."""
        self.listen = listen
        """Receive updates (False in queue workers: only post)."""
        self.application: _App | None = None
        """The PTB Application, once started."""
        self.failure: BotError | None = None
        """Why the bot cannot go on, when Telegram refused it while running (also given to ``agent.fail``)."""
        self.metrics = ChatMetrics("telegram")
        """Messages received and ignored, and 429s, reported to the agent's observers."""
        self._token = token
        self._agent: Agent | None = None
        self._send: Send | None = None
        self._seen = RecentIds()
        self._allowlist = Allowlist.of(chats=settings.allowed_chats, users=settings.allowed_users)
        self._tasks = MessageTasks(log)
        self._slots = asyncio.Semaphore(settings.max_concurrent)
        self._typing_loops = SharedTyping(every=settings.typing_interval)
        self._bot_id = 0
        self._bot_username = ""
        self._bot_name = ""
        self._queued = False
        self._poller: Poller | None = None
        self.backpressure = Backpressure(tasks=self._tasks)
        """Messages for a full inbox, waiting for room, and the busy notices (in front of a queue)."""
        self._webhook: WebhookServer | None = None
        self.webhook_deadline = WEBHOOK_DEADLINE
        """Seconds the gateway's webhook server may take to store an update before answering 503."""
        self.live = LiveReplies(output_type=MESSAGE, start=self._start_live) if settings.stream_replies else None
        """Answers being shown while they are written (None with TELEGRAM_STREAM_REPLIES=false)."""

    @property
    def bot(self) -> Bot:
        """The bot, for sending; a ``PlatformError`` before the service started."""
        if self.application is None:
            raise PlatformError("the Telegram bot is not started: call await agent.start() first")
        bot: Bot = self.application.bot
        return bot

    # -- lifecycle -------------------------------------------------------------------------------------

    def _build(self) -> _App:
        s = self.settings
        timeout = s.request_timeout

        def request(pool_size: int) -> _ObservedRequest:
            return _ObservedRequest(
                self._on_status,
                connection_pool_size=pool_size,  # PTB's own sizes: 256 for requests, 1 for getUpdates
                connect_timeout=timeout,
                read_timeout=timeout,
                write_timeout=timeout,
                pool_timeout=timeout,
            )

        builder = (
            ApplicationBuilder()
            .token(self._token)
            .base_url(s.base_url)
            .base_file_url(s.base_file_url)
            .rate_limiter(
                _RateLimiter(
                    overall_max_rate=s.rate_limit,
                    group_max_rate=s.group_rate_limit,
                    max_retries=s.max_retries,
                )
            )
            .request(request(256))
            .get_updates_request(request(1))
            .job_queue(None)
        )
        if not self.listen or self._hands_over or self._polls_itself:
            builder = builder.updater(None)
        return builder.build()

    @property
    def _hands_over(self) -> bool:
        """In front of a queue: updates come from ``Poller`` or ``WebhookServer``, not PTB's ``Updater``, and
        the listener returns only once each is stored (so Telegram is told it was received only then)."""
        return self.listen and self._queued

    @property
    def _polls_itself(self) -> bool:
        """Updates come from ``Poller`` (long polling, embedded or in front of a queue): an update is confirmed
        to Telegram only once it is handled (answered, embedded; stored, in front of a queue)."""
        return self.listen and self.settings.mode is TelegramMode.POLLING

    async def start(self, agent: Agent) -> None:
        """Build the Application and check the token (``getMe``); when listening, start processing updates."""
        if self.application is not None:
            return
        _quiet_library_logs()
        self._agent = agent
        self._queued = bool(getattr(agent.dispatcher, "distributed", False))
        self.metrics.bind(agent)
        agent.readiness["telegram"] = self.ready
        app = self._build()
        failure: Exception | None = None
        try:
            await app.initialize()
        except InvalidToken:
            # PTB's message repeats the token, so the error is built here without it (and without chaining)
            failure = ConfigError(
                f"Telegram rejected TELEGRAM_TOKEN (the Bot API at {self.settings.api_url} answered "
                "Unauthorized): set TELEGRAM_TOKEN to the token @BotFather gave you"
            )
        except NetworkError as exc:
            failure = PlatformError(
                f"could not reach the Telegram Bot API at {self.settings.api_url} ({exc.message}); check "
                "TELEGRAM_API_URL and the network"
            )
            failure.__cause__ = exc
        except TelegramError as exc:
            failure = PlatformError(f"Telegram refused to start the bot: {exc.message}")
            failure.__cause__ = exc
        if failure is not None:
            await _close_requests(app)
            raise failure
        me = app.bot.bot
        self._bot_id, self._bot_username, self._bot_name = me.id, me.username or "", me.first_name
        self.application = app
        agent.media.fetchers["telegram"] = self.fetch_file  # a worker reads what the gateway only referenced
        if self.live is not None:
            agent.event_listeners.append(self.live.on_event)
        if self.listen:
            app.add_handler(TypeHandler(Update, self._on_update))
            await app.start()
            try:
                await app.bot.set_my_commands([c for c in COMMANDS if c[0] not in self._disabled()])
            except TelegramError as exc:  # only the command menu is missing: keep going
                log.warning("could not register the bot's commands with Telegram: %s", exc.message)
        log.info("Telegram bot @%s started (%s)", self._bot_username, "listening" if self.listen else "send only")

    async def subscribe(self, send: Send, agent: Agent) -> Callable[[], Coroutine[Any, Any, None]] | None:
        """Start receiving updates (long polling or webhook); returns the unsubscribe coroutine function."""
        if not self.listen or self.application is None:
            return None
        self._send = send
        app = self.application
        updater = app.updater
        s = self.settings
        try:
            if self._polls_itself:
                poller = Poller(
                    app.bot,
                    self._poll_update,
                    timeout=s.poll_timeout,
                    allowed_updates=ALLOWED_UPDATES,
                    on_invalid_token=self._polling_refused,
                )
                await poller.bootstrap(drop_pending_updates=s.drop_pending_updates)
                poller.start()
                self._poller = poller
            elif self._hands_over:
                await self._start_webhook(app.bot, stop_timeout=agent.stop_timeout)
            elif s.mode is TelegramMode.WEBHOOK:
                assert updater is not None
                assert s.webhook_secret is not None
                await updater.start_webhook(
                    listen=s.webhook_listen,
                    port=s.webhook_port,
                    url_path=s.listen_path,
                    webhook_url=s.webhook_url,
                    secret_token=s.webhook_secret.get_secret_value(),
                    allowed_updates=ALLOWED_UPDATES,
                    drop_pending_updates=s.drop_pending_updates,
                    bootstrap_retries=3,
                )
            else:
                assert updater is not None
                await updater.start_polling(
                    timeout=s.poll_timeout,
                    allowed_updates=ALLOWED_UPDATES,
                    drop_pending_updates=s.drop_pending_updates,
                    bootstrap_retries=3,
                )
        except OSError as exc:
            raise ConfigError(
                f"cannot listen for webhooks on {s.webhook_listen}:{s.webhook_port} ({exc.strerror}); "
                "change TELEGRAM_WEBHOOK_LISTEN or TELEGRAM_WEBHOOK_PORT"
            ) from exc
        except TelegramError as exc:
            if self.failure is not None:  # the token was refused on the way (a 401): that says what to fix
                raise self.failure from exc
            setting = "TELEGRAM_WEBHOOK_URL" if s.mode is TelegramMode.WEBHOOK else "TELEGRAM_API_URL"
            raise PlatformError(f"Telegram refused to start receiving updates: {exc.message}; check {setting}") from exc
        return self.unsubscribe

    async def _start_webhook(self, bot: Bot, *, stop_timeout: float) -> None:
        """The gateway's webhook server (``WebhookServer``: 200 only once an update is stored), then
        ``setWebhook`` with the secret, tried like PTB's bootstrap."""
        s = self.settings
        assert s.webhook_secret is not None and s.webhook_url is not None
        secret, url = s.webhook_secret.get_secret_value(), s.webhook_url
        server = WebhookServer(
            bot,
            self._take_webhook_update,
            listen=s.webhook_listen,
            port=s.webhook_port,
            path=s.listen_path,
            secret=secret,
            deadline=self.webhook_deadline,
        )
        await server.start(shutdown_timeout=stop_timeout)
        self._webhook = server
        await bootstrap_call(
            "setWebhook",
            lambda: bot.set_webhook(
                url,
                secret_token=secret,
                allowed_updates=ALLOWED_UPDATES,
                drop_pending_updates=s.drop_pending_updates,
            ),
        )

    def ready(self) -> bool | str:
        """The readiness check (``agent.readiness["telegram"]``): updates arrive (polling runs, or the
        webhook server listens); with ``listen=False``, the bot is initialised."""
        if self.failure is not None:
            return f"failed: {self.failure}"
        app = self.application
        if app is None:
            return "not connected"
        if not self.listen:
            return True
        if self._poller is not None:
            receiving = self._poller.running
        elif self._webhook is not None:
            receiving = self._webhook.running
        else:
            receiving = app.updater is not None and app.updater.running
        if not app.running or not receiving:
            return "not receiving updates yet"
        return True

    def _polling_refused(self, exc: InvalidToken) -> None:
        """Telegram refused the token while ``Poller`` polled: polling has ended (a 401 was already
        reported by ``_on_status``)."""
        self._fail(
            ConfigError(
                f"Telegram refused TELEGRAM_TOKEN while polling ({exc.message}): set TELEGRAM_TOKEN to the "
                "bot's current token from @BotFather and start the bot again"
            )
        )

    def _on_status(self, code: int, method: str) -> None:
        """The status of a Bot API answer (called by ``_ObservedRequest``)."""
        if code == 429:
            self.metrics.rate_limited()
        elif code == 401 and self.application is not None:  # at start, ``start`` explains a 401 itself
            self._fail(
                ConfigError(
                    f"Telegram stopped accepting TELEGRAM_TOKEN (401 Unauthorized on {method}): the token was "
                    "revoked or replaced with @BotFather; set TELEGRAM_TOKEN to the bot's current token and "
                    "start the bot again"
                )
            )

    def _fail(self, error: BotError) -> None:
        """The bot cannot go on: keep the first reason, log it and tell the agent (``bots run`` stops)."""
        if self.failure is not None:
            return
        self.failure = error
        log.error("%s", error)
        if self._agent is not None:
            self._agent.fail(error)

    async def unsubscribe(self) -> None:
        """Stop fetching updates, answer those already fetched, and wait (bounded) for answers in flight."""
        app = self.application
        if app is None:
            return
        timeout = self._agent.stop_timeout if self._agent is not None else 10.0
        await self._stop_poller(timeout=timeout)  # stores the batch in hand (bounded), then confirms it
        await self._stop_webhook()  # answers the requests in progress (bounded by the agent's stop_timeout)
        if app.updater is not None and app.updater.running:
            await self._stop_updater(app)  # confirms the fetched updates to Telegram, so none comes twice
        if app.running:
            await app.stop()  # hands every fetched update to the listener
        await self._tasks.close(timeout=timeout)

    async def _stop_poller(self, *, timeout: float) -> None:
        poller, self._poller = self._poller, None
        if poller is not None:
            await poller.stop(timeout=timeout)

    async def _stop_webhook(self) -> None:
        server, self._webhook = self._webhook, None
        if server is not None:
            await server.stop()

    async def _stop_updater(self, app: _App) -> None:
        """Stop polling or the webhook server. PTB re-raises here what ended its polling on its own (a
        revoked token, already reported through ``_fail``)."""
        assert app.updater is not None
        try:
            await app.updater.stop()
        except TelegramError as exc:
            if self.failure is None:
                log.warning("polling had stopped on its own: %s", exc.message)

    async def wait_idle(self) -> None:
        """Return once every fetched update has been decided and every answer has finished (tests, benchmarks)."""
        app = self.application
        while True:
            if self._poller is not None:
                await self._poller.wait_idle()
            if self._webhook is not None:
                await self._webhook.wait_idle()
            if app is not None and app.running:
                await app.update_queue.join()
            if not self._tasks:
                return
            await self._tasks.wait()

    async def stop(self, agent: Agent) -> None:
        """Close the HTTP clients (after the agent finished its runs)."""
        app, self.application = self.application, None
        if app is None:
            return
        await self._stop_poller(timeout=0)  # agent.start() failed before unsubscribe existed
        await self._stop_webhook()
        if app.updater is not None and app.updater.running:
            await self._stop_updater(app)
        if app.running:
            await app.stop()
        await self._tasks.close(timeout=0)
        if self.live is not None:
            with contextlib.suppress(ValueError):
                agent.event_listeners.remove(self.live.on_event)
            await self.live.aclose()  # answers cut off by the stop are marked as such
        await app.shutdown()

    # -- listening -------------------------------------------------------------------------------------

    async def _on_update(self, update: Update, _: ContextTypes.DEFAULT_TYPE) -> None:
        """PTB's handler (updates from PTB's ``Updater`` or from ``Poller``): see ``_take``. In front of a
        queue, storing is tried again until it succeeds (the poller holds the offset meanwhile)."""
        await self._take(update, retry=True)

    async def _take_webhook_update(self, update: Update) -> None:
        """``WebhookServer``'s handler: see ``_take``. Storing is tried once (the Redis client retries for
        ``REDIS_RETRY_SECONDS``); a failure is raised, and Telegram, answered 503, delivers the update again."""
        await self._take(update, retry=False)

    async def _poll_update(self, update: Update) -> Awaitable[None] | None:
        """``Poller``'s handler: see ``_take``."""
        return await self._take(update, retry=True)

    async def _take(self, update: Update, *, retry: bool) -> Awaitable[None] | None:
        """The one place that decides what gets answered. Embedded: answer in an owned task, returned (the
        poller confirms the update once it ends). In front of a queue (``Poller``, ``WebhookServer``): return
        None only once the update is handled (stored in Redis, answered here, or dropped on purpose): Telegram
        is told it was received then; a message for a full inbox is kept waiting or dropped with the busy
        notice by ``extensions.chat.backpressure`` (``REDIS_INBOX_FULL``), so the other chats go on. Without
        ``retry``, a failure to store (``DispatchError``, ``MemoryStoreError``, a full inbox) is raised."""
        if update.callback_query is not None:
            await self._on_choice(update.callback_query)
            return None
        message = update.message
        if message is None:
            return None
        facts = MessageFacts.of(message, bot_id=self._bot_id, bot_username=self._bot_username)
        args = facts.args
        self.metrics.received(telegram_chat, args)
        update_id = str(update.update_id)
        if update_id in self._seen:
            log.info("update %s was delivered twice; answering it once", update.update_id)
            self.metrics.ignored(telegram_chat, args, Ignored.DUPLICATE)
            return None
        queued = self._hands_over
        if not queued:
            self._seen.add(update_id)
        policy = await self._reply_policy(facts)
        reason = ignore_reason(facts, policy=policy, allowlist=self._allowlist)
        if reason is not None:
            self.metrics.ignored(telegram_chat, args, reason)
            return None
        decision = decide(facts, policy=policy, allowlist=self._allowlist)
        content_log.info("chat %s message %s from %s: %s", facts.chat_id, facts.message_id, facts.user_id, facts.text)
        log.info(
            "chat %s%s: %s from user %s (message %s, %d characters)",
            facts.chat_id,
            f"/{facts.thread_id}" if facts.thread_id is not None else "",
            decision.value,
            facts.user_id,
            facts.message_id,
            len(facts.text),
        )
        key = f"telegram:{update.update_id}"
        if not queued:
            return self._spawn(self._respond(decision, facts, key)(), name=f"{key}:{decision.value}", key=key)
        work = self._respond(decision, facts, key)
        what = f"message {facts.message_id} in chat {facts.chat_id}"
        token = correlation_id.set(key)
        try:
            if retry:
                incoming = Incoming(
                    chat=(facts.chat_id, facts.thread_id),
                    key=key,
                    what=what,
                    store=work,
                    tell_busy=lambda: self._say(facts, "busy"),
                    on_dropped=lambda: self.metrics.ignored(telegram_chat, args, Ignored.BUSY),
                    on_handled=lambda: self._seen.add(update_id),
                )
                await until_stored(lambda: self.backpressure.submit(incoming), what=what, full=False)
                return None  # marked seen once stored or dropped (``on_handled``)
            await work()
        except (DispatchError, MemoryStoreError):
            raise  # not stored (only without ``retry``): Telegram delivers the update again
        except Exception:
            log.exception("could not answer message %s in chat %s", facts.message_id, facts.chat_id)
            await self._say(facts, "run_failed")
        finally:
            correlation_id.reset(token)
        self._seen.add(update_id)  # only now: an update given up half way by a stop is fetched again
        return None

    def _respond(self, decision: Decision, facts: MessageFacts, key: str) -> Callable[[], Coroutine[Any, Any, None]]:
        """What answers ``decision``: the help text, a reset, or the message handed to the agent (stored
        in its chat's inbox, in front of a queue)."""
        if decision is Decision.HELP:

            async def help() -> None:
                text = localized(self.settings.help_text, "telegram.help", await self._language(facts))
                await self._notice(facts, text.replace("{name}", self._bot_name), markdown=True)

            return help
        if facts.command in self._disabled() and decision in (Decision.RESET, Decision.FORGET):
            return lambda: self._say(facts, "disabled", command=facts.command or "")
        if decision is Decision.RESET:
            return lambda: self._reset(facts)
        if decision is Decision.FORGET:
            return lambda: self._reset(facts, erase=True)
        if decision is Decision.SETTINGS:
            return lambda: self._settings_command(facts)
        if not self._hands_over:
            return lambda: self._answer(facts, key)
        assert self._send is not None
        send, args, ref = self._send, facts.args, _input_of(facts)

        async def store() -> None:
            await send(telegram_chat, args, ref, dedupe_key=key)  # returns once stored (or a redelivery dropped)

        return store

    def _spawn(self, coro: Coroutine[Any, Any, None], *, name: str, key: str) -> asyncio.Task[None]:
        """Run ``coro`` in a task this runtime owns, with ``key`` as the correlation id of its log lines."""
        return self._tasks.spawn(coro, name=name, correlation=key)

    async def _answer(self, facts: MessageFacts, key: str) -> None:
        """Hand the message to the agent, with "typing..." shown until the run is over."""
        assert self._send is not None
        args = facts.args
        ref = _input_of(facts)
        typing = self._typing_loops.hold((facts.chat_id, facts.thread_id), lambda: self._typing(facts))
        async with self._slots, typing:
            try:
                await self._send(telegram_chat, args, ref, dedupe_key=key)
            except BackpressureError:
                self.metrics.ignored(telegram_chat, args, Ignored.BUSY)
                await self._say(facts, "busy")
            except Exception:
                log.exception("could not answer message %s in chat %s", facts.message_id, facts.chat_id)
                await self._say(facts, "run_failed")

    async def _typing(self, facts: MessageFacts) -> None:
        await self.bot.send_chat_action(
            chat_id=facts.chat_id, action=ChatAction.TYPING, message_thread_id=facts.thread_id
        )

    async def _reset(self, facts: MessageFacts, *, erase: bool = False) -> None:
        """``/reset`` (``/forget`` with ``erase``): anyone in a private chat; in a group, a chat administrator or
        an admin user (``BOT_ADMIN_USERS``)."""
        assert self._agent is not None
        command = "/forget" if erase else "/reset"
        if not await self._administers(facts.chat_id, facts.user_id, private=facts.private, doing=command):
            log.info("chat %s: %s by user %s refused (not an administrator)", facts.chat_id, command, facts.user_id)
            await self._notice(facts, RESET_REFUSED)
            return
        args = facts.args
        if erase:
            await self._agent.forget(telegram_chat, args)
            await self._say(facts, "forget_done")
            return
        await self._agent.reset(telegram_chat, args)
        await self._say(facts, "reset_done")

    # -- settings from the chat ------------------------------------------------------------------------

    async def _administers(self, chat_id: int, user_id: int | None, *, private: bool, doing: str) -> bool:
        """True when the user may ``/reset`` the chat or change its settings (``doing`` names the command, for the
        log): a private chat's own user, an admin user (``BOT_ADMIN_USERS``, known without asking Telegram), or
        one of a group's administrators, asked with getChatMember (a failure or no answer in
        ``TELEGRAM_REQUEST_TIMEOUT`` counts as no)."""
        assert self._agent is not None
        if private:
            return True
        if user_id is None:
            return False
        if self._agent.is_admin(f"telegram:{user_id}"):
            return True
        try:
            async with asyncio.timeout(self.settings.request_timeout):
                member = await self.bot.get_chat_member(chat_id=chat_id, user_id=user_id)
        except (TelegramError, TimeoutError) as exc:
            log.warning(
                "chat %s: could not ask whether user %s administers it (%s); %s refused",
                chat_id,
                user_id,
                exc,
                doing,
            )
            return False
        return member.status in (ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR)

    async def _settings_command(self, facts: MessageFacts) -> None:
        """``/model``, ``/persona``, ``/language``, ``/settings``, ``/stats``: the answer, with an inline keyboard
        when there is something to choose."""
        assert self._agent is not None and facts.command is not None and facts.user_id is not None
        commands, cid = ChatCommands.of(self._agent, telegram_chat, facts.args)
        parts = facts.text.split(maxsplit=1)
        arg = parts[1] if len(parts) > 1 else None
        changes = arg is not None and not (facts.command == "persona" and arg.strip().lower() == "show")
        manages = changes and await self._administers(
            facts.chat_id, facts.user_id, private=facts.private, doing=f"/{facts.command}"
        )
        caller = Caller(user=f"telegram:{facts.user_id}", manages_chat=manages)
        answer = await commands.run(facts.command, cid, caller, arg)
        buttons = [
            [InlineKeyboardButton(label, callback_data=CHOICE_PREFIX + value)]
            for label, value in answer.choices
            if len((CHOICE_PREFIX + value).encode()) <= 64  # Telegram's limit on callback data
        ]
        if not buttons:
            await self._notice(facts, answer.text)
            return
        try:
            await self.bot.send_message(
                chat_id=facts.chat_id,
                message_thread_id=facts.thread_id,
                text=answer.text,
                reply_parameters=ReplyParameters(message_id=facts.message_id, allow_sending_without_reply=True),
                reply_markup=InlineKeyboardMarkup(buttons),
            )
        except TelegramError as exc:
            log.warning("could not answer /%s in chat %s: %s", facts.command, facts.chat_id, exc.message)

    async def _on_choice(self, query: CallbackQuery) -> None:
        """A button of a settings answer was pressed: make the choice (if the user may) and show the result in
        place of the keyboard."""
        data, message, agent = query.data or "", query.message, self._agent
        if not data.startswith(CHOICE_PREFIX) or message is None or agent is None:
            return
        chat = message.chat
        thread_id = getattr(message, "message_thread_id", None) if getattr(chat, "is_forum", False) else None
        user_id = query.from_user.id
        if not self._allowlist.allows(chat_ids=[chat.id], user_id=user_id):
            return
        commands, cid = ChatCommands.of(agent, telegram_chat, ChatArgs(chat_id=chat.id, thread_id=thread_id))
        manages = await self._administers(chat.id, user_id, private=chat.type == "private", doing="a settings button")
        caller = Caller(user=f"telegram:{user_id}", manages_chat=manages)
        answer = await commands.choose(cid, caller, data.removeprefix(CHOICE_PREFIX))
        try:
            await query.answer(text=answer.text[:200])
            if answer.changed:
                await self.bot.edit_message_text(chat_id=chat.id, message_id=message.message_id, text=answer.text)
        except TelegramError as exc:
            log.warning("could not answer a button in chat %s: %s", chat.id, exc.message)

    async def _reply_policy(self, facts: MessageFacts) -> ReplyPolicy:
        """When the bot answers in the group of ``facts``: its own choice (``/reply``) over
        ``TELEGRAM_REPLY_POLICY`` (read from the store at each message, so a change applies at once)."""
        default = self.settings.reply_policy
        if facts.private or self._agent is None or facts.from_bot:
            return default
        try:
            commands, cid = ChatCommands.of(self._agent, telegram_chat, facts.args)
            return await commands.reply_policy(cid, default)
        except BotError as exc:  # the store is down: the operator's policy
            log.warning("could not read the settings of chat %s: %s", facts.chat_id, exc)
            return default

    async def _language(self, facts: MessageFacts) -> str | None:
        """The language of the bot's messages in the chat of ``facts`` (None when it cannot be read)."""
        if self._agent is None:
            return None
        try:
            commands, cid = ChatCommands.of(self._agent, telegram_chat, facts.args)
            return await commands.language(cid)
        except BotError as exc:  # the store is down: English it is
            log.warning("could not read the settings of chat %s: %s", facts.chat_id, exc)
            return None

    async def _say(self, facts: MessageFacts, key: str, **values: object) -> None:
        """Post the notice ``key`` (``extensions.chat.i18n``) in the chat's language."""
        await self._notice(facts, say(key, await self._language(facts), **values))

    def _disabled(self) -> frozenset[str]:
        """The commands the operator turned off (``BOT_DISABLED_COMMANDS``)."""
        return self._agent.chat_policy.disabled_commands if self._agent is not None else frozenset()

    async def _notice(self, facts: MessageFacts, text: str, *, markdown: bool = False) -> None:
        try:
            await self.post_reply(
                chat_id=facts.chat_id,
                thread_id=facts.thread_id,
                text=text,
                reply_to=facts.message_id,
                markdown=markdown,
            )
        except PlatformError as exc:
            log.warning("could not answer in chat %s: %s", facts.chat_id, exc)

    # -- posting ---------------------------------------------------------------------------------------

    def _start_live(self, event: RunEvent) -> LiveReply | None:
        """The live reply for an answer that starts streaming (an event listener: runs in the run's task)."""
        state = self._agent.state_of(event.context_id) if self._agent is not None else None
        if state is None or state.context is not telegram_chat or self.application is None:
            return None
        args: ChatArgs = state.args
        return live_reply(
            self.application.bot,
            chat_id=args.chat_id,
            thread_id=args.thread_id,
            reply_to=state.options.get(REPLY_TO),
            interval=self.settings.stream_interval,
            drafts=self.settings.stream_drafts,
            record=self._record(state.options.get(REPLY_LEDGER), streamed=True),
        )

    def _record(self, ledger: ReplyLedger | None, *, streamed: bool) -> ReplyRecord | None:
        """A reply's record in a queued run's ledger (None outside one): the intent of each post is recorded,
        and one left uncertain by a crash is resolved by ``TELEGRAM_UNCERTAIN_REPLIES``."""
        if ledger is None:
            return None
        return ReplyRecord(
            ledger,
            MESSAGE,
            streamed=streamed,
            uncertain=self.settings.uncertain_replies,
            on_uncertain=self.metrics.uncertain_reply,
        )

    async def deliver(
        self,
        *,
        key: ReplyKey,
        chat_id: int,
        thread_id: int | None,
        text: str,
        reply_to: int | None,
        ledger: ReplyLedger | None = None,
    ) -> list[int]:
        """Deliver an answer: finish its live reply if it was shown while written (``key`` is the output's
        ``(context id, step, index)``), else post it. With a queued run's ``ledger`` the answer is posted
        exactly once across attempts at the batch (``extensions.chat.exactly_once``). Returns its messages' ids."""
        reply = self.live.take(key) if self.live is not None else None
        if reply is None and ledger is not None:  # posted at once, following the ledger as a live reply does
            reply = live_reply(
                self.bot,
                chat_id=chat_id,
                thread_id=thread_id,
                reply_to=reply_to,
                interval=self.settings.stream_interval,
                drafts=False,
                record=self._record(ledger, streamed=self.live is not None),
            )
        if reply is None:
            return await self.post_reply(chat_id=chat_id, thread_id=thread_id, text=text, reply_to=reply_to)
        content_log.info("chat %s reply: %s", chat_id, text)
        ids: list[int] = await reply.finish(text)
        return ids

    async def fetch_file(self, attachment: Attachment) -> bytes:
        """The bytes of a file someone sent (``getFile``, then the download through PTB)."""
        try:
            file = await self.bot.get_file(attachment.ref)
            return bytes(await file.download_as_bytearray())
        except TelegramError as exc:
            raise PlatformError(f"Telegram could not hand over {attachment.name or 'a file'}: {exc.message}") from exc

    def typing(self, chat_id: int, thread_id: int | None) -> contextlib.AbstractAsyncContextManager[None]:
        """Keep "typing..." alive in the chat while the block lasts: one loop per chat however many hold it
        (the listener while it hands a message over, the run while it answers, here or in a worker)."""
        return self._typing_loops.hold((chat_id, thread_id), lambda: self._send_typing(chat_id, thread_id))

    async def _send_typing(self, chat_id: int, thread_id: int | None) -> None:
        await self.bot.send_chat_action(chat_id=chat_id, action=ChatAction.TYPING, message_thread_id=thread_id)

    async def abandon_replies(self, context_id: str) -> None:
        """A run failed: mark the answers it was writing as cut."""
        if self.live is not None:
            await self.live.abandon_context(context_id)

    async def post_reply(
        self, *, chat_id: int, thread_id: int | None, text: str, reply_to: int | None, markdown: bool = True
    ) -> list[int]:
        """Post ``text`` (Markdown unless ``markdown=False``) to the chat; the one way this bot writes."""
        return await post_reply(
            self.bot, chat_id=chat_id, thread_id=thread_id, text=text, reply_to=reply_to, markdown=markdown
        )


def _input_of(facts: MessageFacts) -> InputRef:
    """The agent's input for a user's message."""
    params = {"user": facts.user_name, "user_id": str(facts.user_id), "message_id": str(facts.message_id)}
    if facts.username:
        params["username"] = facts.username
    return InputRef(type=MESSAGE, data=facts.text, params=params, attachments=list(facts.attachments))


class _ReportedInvalidToken(logging.Filter):
    """Drops PTB's traceback for a token Telegram refused: the runtime reports that itself, as one line
    that names TELEGRAM_TOKEN (at start, or through ``_fail`` while running)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], InvalidToken))


def _quiet_library_logs() -> None:
    """httpx logs every request URL at INFO, and Bot API URLs contain the token: keep those out of logs.
    PTB's polling loop logs a traceback when the token is refused: the runtime says it better."""
    httpx_log = logging.getLogger("httpx")
    if httpx_log.getEffectiveLevel() < logging.WARNING:
        httpx_log.setLevel(logging.WARNING)
    ptb_log = logging.getLogger("telegram.ext")
    if not any(isinstance(f, _ReportedInvalidToken) for f in ptb_log.filters):
        ptb_log.addFilter(_ReportedInvalidToken())


async def _close_requests(app: _App) -> None:
    """Close the HTTP clients of an Application whose ``initialize`` failed (PTB leaves them open)."""
    with contextlib.suppress(Exception):
        await app.bot.shutdown()
