"""The Slack side of one agent: ``extensions.chat.adapter.ChatAdapter`` (the start and stop sequence, dedupe,
metrics, owned tasks, full inboxes, languages, live replies and the reply ledger) filled in with slack-bolt.

- receive: a bolt ``AsyncApp`` takes the events, from a Socket Mode websocket (``SLACK_MODE=socket``: one
  process, or each of a fleet's gateways, Slack handing each event to one connection) or from the Events API
  (``SLACK_MODE=events``: Slack POSTs them to ``SLACK_EVENTS_PATH``, checked with the signing secret);
- decide: direct messages are answered; in a channel, a message that mentions the bot, or any message of a thread
  it was addressed in (``SLACK_REPLY_POLICY``, a channel's own ``/reply``); every thread is a conversation;
- approvals: a call an admin approves first is asked with Approve and Deny buttons (``approvals``);
- commands: Slack's slash commands (``/reset``, ``/forget``, ``/help``, ``/stop`` and the settings commands),
  answered to the caller alone (the command's response);
- post: ``chat.postMessage`` in the thread, split at 3,500 characters, streamed by ``chat.update`` edits; pictures
  and spoken replies by ``files_upload_v2``; files people share are fetched with the bot token.

Nothing imports this module but the package's ``__init__`` (``slack_runtime``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import re
import urllib.parse
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from core.entries import InputRef
from core.errors import BotError, ConfigError, PlatformError
from core.facts import facts_of
from core.media import Attachment
from core.media.attachment import kind_of
from core.trust import TIER_PARAM

from ..chat.adapter import ChatAdapter
from ..chat.approvals import PREFIX as APPROVAL_PREFIX
from ..chat.backpressure import Incoming
from ..chat.commands import COMMANDS, Caller, ChatCommands
from ..chat.counters import Ignored
from ..chat.i18n import say
from ..chat.policy import Allowlist, ReplyPolicy, should_reply
from ..chat.split import split_message
from ..chat.stream import LiveReply, ReplyKey
from .approvals import SlackApprovals
from .definitions import MESSAGE, ConversationArgs, slack_conversation
from .settings import SlackMode, SlackSettings

if TYPE_CHECKING:
    from core import Host, Setup
    from core.definitions import ContextState, Send
    from core.events import RunEvent
    from core.fleet.reply_ledger import ReplyLedger
    from core.media import Outgoing

    from ..chat.exactly_once import ReplyRecord

__all__ = ("MESSAGE_LIMIT", "SlackRuntime", "escape")

log = logging.getLogger("extensions.slack")
content_log = logging.getLogger("content.slack")

MESSAGE_LIMIT = 3500
"""Characters of one message at most (Slack truncates past 40,000 and advises 4,000)."""
THREADS_KEPT = 10_000
"""Threads remembered as ones the bot was addressed in (the oldest forgotten first)."""
ANSWERED_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})
"""Message subtypes that are someone's message (the others: edits, joins, bots' messages, deletions)."""


def escape(text: str) -> str:
    """``text`` as Slack shows it literally: ``&``, ``<`` and ``>`` escaped, so no ``<@U1>``, ``<!channel>`` or
    ``<url|label>`` written by the model (or quoted from someone) pings anyone or hides a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _split(text: str) -> list[str]:
    return split_message(text, MESSAGE_LIMIT, measure=lambda piece: len(escape(piece)))


class _Sink:
    """Posts, updates and deletes the messages of one answer in one conversation."""

    def __init__(self, runtime: SlackRuntime, args: ConversationArgs) -> None:
        self.runtime = runtime
        self.args = args

    async def post(self, text: str, *, index: int) -> str:
        return await self.runtime.post_message(self.args, text)

    async def edit(self, handle: Any, text: str) -> None:
        client = self.runtime.require_client()
        await self.runtime.call(client.chat_update, channel=self.args.channel, ts=str(handle), text=escape(text))

    async def delete(self, handle: Any) -> None:
        client = self.runtime.require_client()
        await self.runtime.call(client.chat_delete, channel=self.args.channel, ts=str(handle))


class SlackRuntime(ChatAdapter):
    """Owns the slack-bolt side of one agent. ``listen=False`` (a fleet's worker) only posts."""

    platform = "slack"

    def __init__(self, settings: SlackSettings, *, listen: bool = True) -> None:
        super().__init__(log=log, typing_every=30.0, live_output=MESSAGE if settings.stream_replies else None)
        self.settings = settings
        """The ``SLACK_*`` settings."""
        self.listen = listen
        """Take events (False: only post, for queue workers)."""
        self.client: AsyncWebClient | None = None
        """The Web API client, from ``start`` to ``stop``."""
        self.me = ""
        """The bot's user id (``auth.test``)."""
        self.app: AsyncApp | None = None
        self._socket: AsyncSocketModeHandler | None = None
        self._events: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._send: Send | None = None
        self._open = asyncio.Event()
        self._threads: collections.OrderedDict[tuple[str, str], None] = collections.OrderedDict()
        self._running: dict[str, ConversationArgs] = {}
        """The conversation each channel's latest message went to (``/stop`` in a channel stops that one)."""
        self.events_address: tuple[str, int] | None = None
        """Where the Events API endpoint listens, once started (``SLACK_MODE=events``)."""
        self.approvals = SlackApprovals(
            self,
            rules=lambda: self.trust,
            timeout=settings.request_timeout,
            language=lambda approval: self.language(slack_conversation, ConversationArgs.model_validate(approval.args)),
        )
        """Approval requests posted with buttons, and the presses on them (``core.approvals``)."""

    # -- receive (``ChatAdapter``) ---------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self.client is not None

    def require_client(self) -> AsyncWebClient:
        """The Web API client; ``PlatformError`` before ``start`` or after ``stop``."""
        if self.client is None:
            raise PlatformError("the Slack client is not connected")
        return self.client

    async def connect(self, agent: Setup) -> None:
        """Check the bot token (``auth.test``) and, when listening, open the websocket or serve the Events API."""
        settings = self.settings
        client = AsyncWebClient(
            token=settings.token.get_secret_value(), base_url=settings.api_url, timeout=int(settings.request_timeout)
        )
        try:
            auth = await self.call(client.auth_test)
        except PlatformError as exc:
            raise ConfigError(
                f"SLACK_BOT_TOKEN was refused by Slack ({exc}): copy the app's Bot User OAuth Token"
            ) from None
        self.me = str(auth.get("user_id") or "")
        self.client = client
        self.approvals.attach(agent)
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=settings.request_timeout))
        try:
            if self.listen:
                await self._listen(client)
        except BaseException:
            await self.disconnect()
            raise
        log.info("slack: logged in as %s%s", self.me, f", {settings.mode.value}" if self.listen else ", posting only")

    async def _listen(self, client: AsyncWebClient) -> None:
        settings = self.settings
        problem = settings.problem()
        if problem is not None:
            raise ConfigError(problem)
        secret = settings.signing_secret.get_secret_value() if settings.signing_secret is not None else None
        app = AsyncApp(
            client=client,
            signing_secret=secret,
            request_verification_enabled=settings.mode is SlackMode.EVENTS,
            logger=logging.getLogger("extensions.slack.bolt"),
        )
        app.event("message")(self._on_message_event)
        app.event("app_mention")(self._on_mention)  # (the message event carries it; acknowledged, nothing more)
        app.command(re.compile(r"^/.+"))(self._on_command)
        app.action(re.compile(f"^{re.escape(APPROVAL_PREFIX)}"))(self.approvals.on_action)
        self.app = app
        if settings.mode is SlackMode.SOCKET:
            assert settings.app_token is not None
            web_client = AsyncWebClient(base_url=settings.api_url, timeout=int(settings.request_timeout))
            self._socket = AsyncSocketModeHandler(app, settings.app_token.get_secret_value(), web_client=web_client)
            try:
                async with asyncio.timeout(settings.request_timeout):
                    await self._socket.connect_async()  # type: ignore[no-untyped-call]
            except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
                raise PlatformError(f"could not open Slack's Socket Mode connection: {exc}") from None
            return
        server = web.Application(client_max_size=1024 * 1024)
        server.router.add_post(settings.events_path, self._on_request)
        runner = web.AppRunner(server, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, settings.events_host, settings.events_port)
        await site.start()
        self._events = runner
        bound = runner.addresses[0]
        self.events_address = (str(bound[0]), int(bound[1]))

    async def _on_request(self, request: web.Request) -> web.Response:
        assert self.app is not None
        response = await self.app.async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(response)

    def subscribe(self, send: Send, agent: Setup) -> Callable[[], Coroutine[Any, Any, None]]:
        """Start handing messages to ``send`` (``agent.send``); returns the unsubscribe."""
        self._send = send
        self._open.set()
        return self.unsubscribe

    async def stop_receiving(self, *, timeout: float) -> None:
        self._send = None
        self._open.set()

    async def disconnect(self) -> None:
        """Close the websocket or the Events API endpoint, then the clients."""
        self.approvals.detach()
        if self._socket is not None:
            with contextlib.suppress(Exception):
                await self._socket.close_async()  # type: ignore[no-untyped-call]
            self._socket = None
        if self._events is not None:
            await self._events.cleanup()
            self._events = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        self.client = None
        self.app = None

    def ready(self) -> bool | str:
        """The readiness check ``slack``: logged in and, when listening, the websocket connected."""
        if self.failure is not None:
            return f"failed: {self.failure}"
        if self.client is None:
            return "not connected"
        if self._socket is not None and not self._socket.client.is_connected():
            return "the Socket Mode connection is down (reconnecting)"
        return True

    # -- decide ----------------------------------------------------------------------------------------

    async def _on_mention(self, event: dict[str, Any]) -> None:
        return None

    async def _on_message_event(self, event: dict[str, Any]) -> None:
        subtype = event.get("subtype")
        if subtype == "message_deleted":
            await self._on_deleted(event)
            return
        if subtype not in ANSWERED_SUBTYPES:
            return
        channel = str(event.get("channel", ""))
        user = str(event.get("user", ""))
        ts = str(event.get("ts", ""))
        private = event.get("channel_type") == "im"
        thread = event.get("thread_ts")
        args = (
            ConversationArgs(channel=channel) if private else ConversationArgs(channel=channel, thread_ts=thread or ts)
        )
        self.metrics.received(slack_conversation, args)
        if event.get("bot_id") or user == self.me or not user:
            self.metrics.ignored(slack_conversation, args, Ignored.BOT if user != self.me else Ignored.OWN)
            return
        if not self.seen.add(f"{channel}:{ts}"):
            self.metrics.ignored(slack_conversation, args, Ignored.DUPLICATE)
            return
        allow = Allowlist.of(chats=self.settings.allowed_channels, users=self.settings.allowed_users)
        if not allow.allows(chat_ids=(channel,), user_id=user):
            self.metrics.ignored(slack_conversation, args, Ignored.ALLOWLIST)
            return
        raw = str(event.get("text") or "")
        mention = f"<@{self.me}>"
        mentioned = bool(self.me) and mention in raw
        text = _unescape(raw.replace(mention, "").strip())
        files = [f for f in event.get("files") or [] if isinstance(f, dict)]
        if not text and not files:
            self.metrics.ignored(slack_conversation, args, Ignored.EMPTY)
            return
        key = f"slack:{channel}:{ts}"
        self.spawn(self._decide(args, event, text, files, private=private, mentioned=mentioned), name=key, key=key)

    async def _decide(
        self,
        args: ConversationArgs,
        event: dict[str, Any],
        text: str,
        files: list[dict[str, Any]],
        *,
        private: bool,
        mentioned: bool,
    ) -> None:
        if not private:
            thread = (args.channel, args.thread_ts or "")
            policy = await self.reply_policy(slack_conversation, args, self.settings.reply_policy)
            followed = thread in self._threads
            if policy is ReplyPolicy.MENTION and not (mentioned or followed) and args.thread_ts != event.get("ts"):
                followed = await self._bot_in_thread(args)  # (answered there by another process, or before a restart)
            if not should_reply(policy, private=False, mentioned=mentioned, replied_to_bot=followed):
                self.metrics.ignored(slack_conversation, args, Ignored.POLICY)
                return
            self._threads[thread] = None
            self._threads.move_to_end(thread)
            while len(self._threads) > THREADS_KEPT:
                self._threads.popitem(last=False)
        await self._hand(args, event, text, files)

    async def _bot_in_thread(self, args: ConversationArgs) -> bool:
        """The bot posted in the thread of ``args`` (``conversations.replies``, its first page): a thread it takes
        part in, whichever process of a fleet answered there; False when Slack cannot say."""
        client = self.client
        if client is None or args.thread_ts is None:
            return False
        try:
            found = await self.call(client.conversations_replies, channel=args.channel, ts=args.thread_ts, limit=200)
        except PlatformError as exc:
            log.warning("slack: could not read the thread %s of %s: %s", args.thread_ts, args.channel, exc)
            return False
        return any(isinstance(m, dict) and m.get("user") == self.me for m in found.get("messages") or [])

    async def _hand(
        self, args: ConversationArgs, event: dict[str, Any], text: str, files: list[dict[str, Any]]
    ) -> None:
        """Hand the message to the agent: embedded, wait for its run; in front of a queue, store it (or keep it
        waiting for room, or drop it with the busy notice)."""
        user, ts = str(event.get("user", "")), str(event.get("ts", ""))
        content_log.info("channel %s message %s from %s: %s", args.channel, ts, user, text)
        await self._open.wait()
        send, agent = self._send, self.agent
        if send is None or agent is None:
            self.metrics.ignored(slack_conversation, args, Ignored.STOPPING)
            return
        params = {
            "author": user,
            "author_id": user,
            "message_id": ts,
            TIER_PARAM: self.trust.tier("slack", user).value,
        }
        hidden = ["author_id"]  # (the author's id is their name here: the prompt shows it once, as author)
        ref = InputRef(type=MESSAGE, data=text, params=params, hidden=hidden, attachments=self._attachments(files))
        key = f"slack:{args.channel}:{ts}"
        self._running[args.channel] = args

        async def store() -> None:
            await send(slack_conversation, args, ref, dedupe_key=key)

        async def tell(what: str) -> None:
            await self.post_notice(args, say(what, await self.language(slack_conversation, args)))

        incoming = Incoming(
            chat=(args.channel, args.thread_ts),
            key=key,
            what=f"message {ts} in channel {args.channel}",
            store=store,
            tell_busy=lambda: tell("busy"),
            tell_failed=lambda: tell("run_failed"),
            on_dropped=lambda: self.metrics.ignored(slack_conversation, args, Ignored.BUSY),
        )
        if not agent.distributed:
            await self.run_here(incoming, context=slack_conversation, args=args)
            return
        try:
            await self.backpressure.submit(incoming)
        except BotError as exc:  # the queue could not be reached
            log.warning("slack: message %s in %s was not stored: %s", ts, args.channel, exc)
            await tell("run_failed")

    def _attachments(self, files: list[dict[str, Any]]) -> list[Attachment]:
        found = []
        for item in files:
            url = str(item.get("url_private_download") or item.get("url_private") or "")
            name = str(item.get("name") or "file")
            mime = str(item.get("mimetype") or "").split(";")[0].strip()
            size = item.get("size")
            note = None
            if isinstance(size, int) and size > self.settings.max_file_bytes:
                note = f"a file of {size // 1_000_000} MB was not read"
            found.append(
                Attachment(
                    kind=kind_of(name=name, mime=mime),
                    name=name,
                    mime=mime,
                    size=size if isinstance(size, int) else None,
                    source="slack",
                    ref=url,
                    note=note,
                )
            )
        return found

    async def _on_deleted(self, event: dict[str, Any]) -> None:
        """A message was deleted: it leaves the working memory, the run in progress and the history, and the facts
        that came from it are dropped (``core.facts``)."""
        agent = self.agent
        deleted = str(event.get("deleted_ts") or "")
        if agent is None or not deleted:
            return
        channel = str(event.get("channel", ""))
        previous = event.get("previous_message") or {}
        thread = event.get("thread_ts") or previous.get("thread_ts") or deleted
        private = event.get("channel_type") == "im"
        args = ConversationArgs(channel=channel, thread_ts=None if private else thread)
        cid = agent.context_id(slack_conversation, args)
        try:
            await agent.forget_messages(slack_conversation, args, [deleted])
        except BotError as exc:
            log.warning("slack: deleted message %s of %s stays in its memory: %s", deleted, cid, exc)
        facts = facts_of(agent)
        if facts is not None:
            try:
                await facts.store.drop_message(cid, deleted)
            except BotError as exc:
                log.warning("slack: the facts of deleted message %s in %s stay: %s", deleted, cid, exc)

    # -- commands --------------------------------------------------------------------------------------

    async def _on_command(self, ack: Callable[..., Any], command: dict[str, Any]) -> None:
        """A slash command: answered to the caller alone, in the command's response."""
        agent = self.agent
        name = str(command.get("command", "")).lstrip("/").lower()
        channel = str(command.get("channel_id", ""))
        user = str(command.get("user_id", ""))
        if agent is None or not channel:
            await ack()
            return
        args = ConversationArgs(channel=channel)
        if name == "stop":
            args = self._running.get(channel, args)
        commands, cid = ChatCommands.of(agent, slack_conversation, args, quote=escape)
        caller = Caller(user=f"slack:{user}", manages_chat=channel.startswith("D"))
        try:
            text = await self._command(agent, commands, cid, caller, name, str(command.get("text") or ""), args)
        except BotError as exc:
            log.warning("slack: /%s in %s failed: %s", name, channel, exc)
            text = say("run_failed", await self.language(slack_conversation, args))
        await ack(text=text)

    async def _command(
        self,
        agent: Host,
        commands: ChatCommands,
        cid: str,
        caller: Caller,
        name: str,
        arg: str,
        args: ConversationArgs,
    ) -> str:
        lang = await commands.language(cid)
        if name in ("reset", "forget"):
            if name in agent.chat_policy.disabled_commands:
                return say("disabled", lang, command=name)
            if not commands.may_change(caller):
                return say("not_allowed", lang, setting=f"/{name}")
            if name == "forget":
                await agent.forget(slack_conversation, args)
                return say("forget_done", lang)
            await agent.reset(slack_conversation, args)
            return say("reset_done", lang)
        if name == "help":
            return (
                "Write to me in a direct message, or mention me in a channel: each thread is its own conversation. "
                "/stop stops the answer I am writing; /reset makes me forget this conversation; /settings shows its "
                "settings."
            )
        if name not in COMMANDS:
            return f"/{escape(name)} is not one of my commands: try /help"
        answer = await commands.run(name, cid, caller, arg or None)
        return answer.text

    # -- post ------------------------------------------------------------------------------------------

    async def call(self, method: Callable[..., Any], /, **params: Any) -> Any:
        """One Web API call, bounded by ``SLACK_REQUEST_TIMEOUT``, its errors as ``PlatformError`` (a channel the
        bot was removed from: ``ChatGoneError``)."""
        from core.errors import ChatGoneError

        try:
            async with asyncio.timeout(self.settings.request_timeout):
                return await method(**params)
        except SlackApiError as exc:
            data = exc.response.data if exc.response is not None else None
            error = str(data.get("error", "")) if isinstance(data, dict) else ""
            if error in ("channel_not_found", "not_in_channel", "is_archived", "account_inactive"):
                raise ChatGoneError(f"Slack says {error}") from None
            raise PlatformError(f"Slack refused {getattr(method, '__name__', 'a call')}: {error or exc}") from None
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            raise PlatformError(f"Slack could not be reached: {exc or type(exc).__name__}") from None

    async def post_message(self, args: ConversationArgs, text: str) -> str:
        """Post one message in the conversation (in its thread); returns its ``ts``."""
        client = self.require_client()
        response = await self.call(
            client.chat_postMessage,
            channel=args.channel,
            text=escape(text),
            thread_ts=args.thread_ts,
            unfurl_links=False,
            unfurl_media=False,
        )
        return str(response.get("ts", ""))

    async def post_notice(self, args: ConversationArgs, text: str) -> None:
        """The bot's own words in the conversation (busy, failed)."""
        await self.post_message(args, text)

    def _live_reply(self, args: ConversationArgs, record: ReplyRecord | None) -> LiveReply:
        return LiveReply(sink=_Sink(self, args), split=_split, interval=self.settings.stream_interval, record=record)

    def start_live(self, event: RunEvent) -> LiveReply | None:
        agent = self.agent
        if agent is None or self.client is None:
            return None
        state = agent.state_of(event.context_id)
        if state is None or not state.context.includes(slack_conversation):
            return None
        record = self.record(state.ledger, MESSAGE, streamed=True)
        return self._live_reply(state.platform_args, record)

    async def deliver(
        self,
        *,
        key: ReplyKey,
        args: ConversationArgs,
        text: str,
        idempotency_key: str,
        ledger: ReplyLedger | None = None,
    ) -> list[str]:
        """Deliver an answer: finish its live reply, or follow a queued run's ledger, or post it."""
        streamed = self.live is not None

        def following(ledger: ReplyLedger) -> LiveReply:
            return self._live_reply(args, self.record(ledger, MESSAGE, streamed=streamed))

        async def post() -> list[str]:
            return [await self.post_message(args, piece) for piece in _split(text)]

        content_log.info("channel %s reply: %s", args.channel, text)
        handles = await self.deliver_with(key, text, ledger=ledger, live_reply=following, post=post)
        log.info("slack: channel %s: replied (%d characters in %d messages)", args.channel, len(text), len(handles))
        return [str(h) for h in handles]

    def typing(self, args: ConversationArgs) -> AbstractAsyncContextManager[None]:
        """Slack shows no "typing..." for a bot's messages: nothing."""
        return contextlib.nullcontext()

    async def post_media(self, state: ContextState[Any], item: Outgoing) -> str:
        """Post a picture or a spoken reply in the conversation (``files_upload_v2``); returns the file's id."""
        client = self.require_client()
        args: ConversationArgs = state.platform_args
        params: dict[str, Any] = {
            "channel": args.channel,
            "content": item.data,
            "filename": item.name,
            "title": item.name,
        }
        if args.thread_ts:
            params["thread_ts"] = args.thread_ts
        if item.caption:
            params["initial_comment"] = escape(item.caption)
        response = await self.call(client.files_upload_v2, **params)
        shared = response.get("files") or [response.get("file") or {}]
        return str(shared[0].get("id", "")) if shared else ""

    async def fetch_file(self, attachment: Attachment) -> bytes:
        """The bytes of a file someone shared, with the bot token, from Slack's own host only."""
        if attachment.note is not None:
            raise PlatformError(attachment.note)
        if self._session is None:
            raise PlatformError("the Slack client is not connected")
        url = urllib.parse.urlsplit(attachment.ref)
        api = urllib.parse.urlsplit(self.settings.api_url)
        if url.scheme not in ("https", "http") or not (
            url.hostname == api.hostname or (url.hostname or "").endswith(".slack.com")
        ):
            raise PlatformError("a Slack file that is not on Slack's host was not fetched")
        headers = {"Authorization": f"Bearer {self.settings.token.get_secret_value()}"}
        try:
            async with self._session.get(attachment.ref, headers=headers, allow_redirects=False) as response:
                if response.status != 200:
                    raise PlatformError(f"Slack answered {response.status} for a shared file")
                return await response.content.read(self.settings.max_file_bytes + 1)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise PlatformError(f"a Slack file could not be fetched: {exc or type(exc).__name__}") from None
