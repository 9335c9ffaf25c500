"""Where updates come from, chosen once per process, and how they stop coming.

- Long polling (``TELEGRAM_MODE=polling``, embedded or in front of a queue): ``Poller``, which confirms an update to
  Telegram only once it is handled (answered, embedded; stored, in front of a queue).
- A webhook in front of a queue (``bots gateway``): ``WebhookServer``, which answers Telegram 200 only once the update
  is stored (else 503, and Telegram delivers it again), then ``setWebhook`` with the secret.
- A webhook, embedded: PTB's own ``Updater`` and webhook server (200 at once, then the bot processes).
- Not listening (``listen=False``, queue workers): nothing; the bot only posts.

Every update goes to one ``UpdateHandler`` (``Listener.take``). Stopping: no new update is fetched, those already
fetched are handled within the given time, and what was handled is confirmed to Telegram, so a restart fetches
nothing twice.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from telegram import Update
from telegram.error import InvalidToken, TelegramError

from core.errors import BotError, ConfigError, PlatformError

from .application import App
from .poller import Poller, bootstrap_call
from .settings import WEBHOOK_DEADLINE, TelegramMode, TelegramSettings

if TYPE_CHECKING:
    from .webhook import WebhookServer

__all__ = ("ALLOWED_UPDATES", "UpdateHandler", "UpdateSource", "uses_ptb_updater")

log = logging.getLogger("extensions.telegram")

ALLOWED_UPDATES = (
    "message",
    "callback_query",
    "my_chat_member",
    "stopped_message_generation",
    "message_reaction",
    "poll_answer",
    "guest_message",
    "business_connection",
    "business_message",
)
"""The update types the bot asks Telegram for (``stopped_message_generation``: Stop pressed on a draft;
``message_reaction``: feedback on an answer; ``poll_answer``: a vote in one of the bot's polls;
``business_connection``, ``business_message``: a Telegram Business account connected to the bot, and the messages of
its chats)."""


class UpdateHandler(Protocol):
    """What receives the updates (``Listener``)."""

    async def take(self, update: Update, *, retry: bool) -> Awaitable[None] | None:
        """Decide on ``update``; see ``Listener.take``."""
        ...


def uses_ptb_updater(settings: TelegramSettings, *, listen: bool, queued: bool) -> bool:
    """True when PTB's ``Updater`` receives the updates: listening, embedded, with a webhook."""
    return listen and not queued and settings.mode is TelegramMode.WEBHOOK


class UpdateSource:
    """The update source of one Application: ``start`` once the agent takes inputs, ``stop`` to end it."""

    def __init__(
        self,
        app: App,
        settings: TelegramSettings,
        handler: UpdateHandler,
        *,
        queued: bool,
        on_invalid_token: Callable[[InvalidToken], None],
        failure: Callable[[], BotError | None],
    ) -> None:
        self.app = app
        self.settings = settings
        self.handler = handler
        self.queued = queued
        """In front of a queue: updates are handled once stored (``Poller`` or ``WebhookServer``)."""
        self.webhook_deadline = WEBHOOK_DEADLINE
        """Seconds the gateway's webhook server may take to store an update before answering 503."""
        self._on_invalid_token = on_invalid_token
        self._failure = failure
        self._poller: Poller | None = None
        self._webhook: WebhookServer | None = None

    @property
    def receiving(self) -> bool:
        """Updates arrive: polling runs, or a webhook server listens."""
        if self._poller is not None:
            return self._poller.running
        if self._webhook is not None:
            return self._webhook.running
        updater = self.app.updater
        return updater is not None and updater.running

    async def start(self, *, stop_timeout: float) -> None:
        """Start receiving; raise a ``ConfigError`` or ``PlatformError`` that says what to fix."""
        s, app = self.settings, self.app
        try:
            if s.mode is TelegramMode.POLLING:
                poller = Poller(
                    app.bot,
                    self._poll_update,
                    timeout=s.poll_timeout,
                    allowed_updates=ALLOWED_UPDATES,
                    on_invalid_token=self._on_invalid_token,
                )
                await poller.bootstrap(drop_pending_updates=s.drop_pending_updates)
                poller.start()
                self._poller = poller
            else:  # our webhook server in both deployments: its header timeout and connection cap hold everywhere
                await self._start_webhook(stop_timeout=stop_timeout)
        except OSError as exc:
            raise ConfigError(
                f"cannot listen for webhooks on {s.webhook_listen}:{s.webhook_port} ({exc.strerror}); "
                "change TELEGRAM_WEBHOOK_LISTEN or TELEGRAM_WEBHOOK_PORT"
            ) from exc
        except TelegramError as exc:
            failure = self._failure()
            if failure is not None:  # the token was refused on the way (a 401): that says what to fix
                raise failure from exc
            setting = "TELEGRAM_WEBHOOK_URL" if s.mode is TelegramMode.WEBHOOK else "TELEGRAM_API_URL"
            raise PlatformError(f"Telegram refused to start receiving updates: {exc.message}; check {setting}") from exc

    async def _poll_update(self, update: Update) -> Awaitable[None] | None:
        return await self.handler.take(update, retry=True)

    async def _webhook_update(self, update: Update) -> None:
        """In front of a queue, storing is tried once (the Redis client retries for ``REDIS_RETRY_SECONDS``); a
        failure is raised, and Telegram, answered 503, delivers the update again. In one process the update is
        answered in a task of its own, and Telegram told at once that it arrived (as PTB's own server did)."""
        await self.handler.take(update, retry=False)

    async def _start_webhook(self, *, stop_timeout: float) -> None:
        """The webhook server (``WebhookServer``: in front of a queue, 200 only once an update is stored), then
        ``setWebhook`` with the secret, tried like PTB's bootstrap."""
        from .webhook import WebhookServer  # (aiohttp's server: loaded by a webhook gateway only)

        s, bot = self.settings, self.app.bot
        assert s.webhook_secret is not None and s.webhook_url is not None
        secret, url = s.webhook_secret.get_secret_value(), s.webhook_url
        server = WebhookServer(
            bot,
            self._webhook_update,
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

    async def stop(self, *, timeout: float) -> None:
        """Fetch no more; the updates in hand are handled within ``timeout`` (the webhook server's requests within
        the agent's ``stop_timeout``) and confirmed to Telegram; then PTB hands the updates it fetched to the
        listener and stops processing."""
        poller, self._poller = self._poller, None
        if poller is not None:
            await poller.stop(timeout=timeout)  # stores the batch in hand (bounded), then confirms it
        server, self._webhook = self._webhook, None
        if server is not None:
            await server.stop()  # answers the requests in progress
        app = self.app
        if app.updater is not None and app.updater.running:
            try:  # confirms the fetched updates to Telegram, so none comes twice
                await app.updater.stop()
            except TelegramError as exc:  # what ended its polling on its own (reported through ``fail``)
                if self._failure() is None:
                    log.warning("polling had stopped on its own: %s", exc.message)
        if app.running:
            await app.stop()  # hands every fetched update to the listener

    async def wait_idle(self) -> None:
        """Return once every update fetched so far was handed to the handler and decided."""
        if self._poller is not None:
            await self._poller.wait_idle()
        if self._webhook is not None:
            await self._webhook.wait_idle()
        if self.app.running:
            await self.app.update_queue.join()
