"""The Discord side of one agent: the discord.py client's lifecycle, the message listener, and posting.

``start``/``stop`` are the extension's service; ``subscribe`` is called by the ``discord:message`` input
when the agent is ready to take inputs. Every post carries an idempotency key that becomes the message
nonce (``enforce_nonce``), so a retried post is not shown twice. In a queued run (``bots worker``) a reply
follows the run's ledger (``extensions.chat.exactly_once``) and its nonces come from the ledger's stable keys, the
same in every attempt at the batch: a batch run again after a crash posts nothing that was posted, and
"typing..." is shown by the worker for as long as it runs the channel. With ``DISCORD_STREAM_REPLIES`` an answer
is shown while it is written: posted when its first words arrive, edited at most once per
``DISCORD_STREAM_INTERVAL``, continued in a new message past 2,000 characters, and finished by the output
handler with the exact final text (``deliver``); the platform-independent part is ``extensions.chat.stream``.

Operations: ``agent.readiness["discord"]`` is ready while the gateway is connected and ready (with
``listen=False``, once logged in for REST); messages received and ignored and every 429 go to the agent's
observers; each message is handled with ``discord:<message id>`` as its correlation id; a gateway that
ends for good (4014, a reset token, another fatal close) is reported with ``agent.fail``, so ``bots run``
stops with a clear error instead of idling.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import aiohttp
import yarl

from core.entries import InputRef
from core.errors import BackpressureError, BotError, ConfigError, PlatformError
from core.media import Attachment

from ..chat.commands import Answer, Caller, ChatCommands
from ..chat.counters import ChatMetrics, Ignored
from ..chat.dedupe import RecentIds
from ..chat.exactly_once import ReplyRecord
from ..chat.i18n import say
from ..chat.policy import ReplyPolicy, should_reply
from ..chat.split import split_message
from ..chat.stream import LiveReplies, LiveReply, ReplyKey
from ..chat.tasks import MessageTasks
from ..chat.typing_indicator import SharedTyping
from ._lib import discord
from .client import BotClient, attachments_of, facts_of, message_params, message_text, platform_error
from .definitions import REPLY_TO, ChannelArgs, discord_channel
from .filters import BotHops, MessageFacts, Verdict, decide
from .settings import DiscordSettings
from .shards import ShardClients, open_shards

if TYPE_CHECKING:
    from core.agent import Agent
    from core.definitions import Send
    from core.events import RunEvent
    from core.fleet.reply_ledger import ReplyLedger

__all__ = ("MESSAGE_LIMIT", "DiscordRuntime", "nonce_for")

log = logging.getLogger("extensions.discord")
content_log = logging.getLogger("content.discord")
"""Message text, silent unless the operator opts in (``LOG_CONTENT``)."""
FORGET_DONE = "Done: I erased this channel's conversation: its history, summary, facts and state are deleted."
"""What ``/forget`` answers."""

RESET_REFUSED = "Only members who may manage messages here can make me forget this conversation."
"""The answer to a /reset by a server member without Manage Messages (and not in ``BOT_ADMIN_USERS``)."""

MESSAGE_LIMIT = 2000
"""Characters Discord accepts in one message."""

_NETWORK_ERRORS = (discord.DiscordException, aiohttp.ClientError, OSError, TimeoutError)


def nonce_for(idempotency_key: str, index: int) -> str:
    """The message nonce of chunk ``index`` of the reply keyed ``idempotency_key`` (Discord allows 25 chars)."""
    return hashlib.blake2b(f"{idempotency_key}#{index}".encode(), digest_size=12).hexdigest()


def _split(text: str) -> list[str]:
    return split_message(text, MESSAGE_LIMIT)


class _Sink:
    """Posts, edits and deletes the messages of one answer being written in one channel."""

    def __init__(
        self,
        runtime: DiscordRuntime,
        *,
        channel_id: int,
        reply_to: int | None,
        key: str,
        record: ReplyRecord | None = None,
    ) -> None:
        self.runtime = runtime
        self.channel_id = channel_id
        self.reply_to = reply_to
        self.key = key
        self.record = record
        self.posts = 0

    async def post(self, text: str, *, index: int) -> int:
        self.posts += 1  # every post its own nonce (a repost after a failed edit is a new message)
        if self.record is None:
            return await self.runtime.send_message(
                channel_id=self.channel_id,
                text=text,
                reply_to=self.reply_to if index == 0 else None,
                nonce=nonce_for(self.key, self.posts - 1),
            )
        message = await self.runtime.send(
            channel_id=self.channel_id,
            text=text,
            reply_to=self.reply_to if index == 0 else None,
            nonce=self.record.next_key(),  # the same in every attempt at the batch
        )
        if message.content.strip() != text.strip():  # the nonce's message, posted by an earlier attempt
            await self.edit(message.id, text)
        return message.id

    async def edit(self, handle: int, text: str) -> None:
        await self.runtime.edit_message(channel_id=self.channel_id, message_id=handle, text=text)

    async def delete(self, handle: int) -> None:
        await self.runtime.delete_message(channel_id=self.channel_id, message_id=handle)


class DiscordRuntime:
    """Owns the discord.py client of one agent. ``listen=False`` only prepares REST (no gateway)."""

    def __init__(self, settings: DiscordSettings, *, listen: bool = True) -> None:
        self.settings = settings
        """The ``DISCORD_*`` settings."""
        self.listen = listen
        """Connect to the gateway and answer messages (False: only post, for queue workers)."""
        self.client: BotClient | None = None
        """The discord.py client, from ``start`` to ``stop``."""
        self.hops = BotHops()
        """Bot messages answered in a row, per channel."""
        self.verdicts: collections.Counter[Verdict] = collections.Counter()
        """How many messages got each verdict (for metrics and tests)."""
        self.failure: BotError | None = None
        """Why the gateway stopped, if it stopped on its own (also reported with ``agent.fail``)."""
        self.metrics = ChatMetrics("discord")
        """Messages received and ignored, and 429s, reported to the agent's observers."""
        self._agent: Agent | None = None
        self._send: Send | None = None
        self._open = asyncio.Event()
        self._tasks = MessageTasks(log)
        self._seen = RecentIds()
        self._channel_turns: dict[int, tuple[asyncio.Lock, int]] = {}
        """Per server channel, a lock held while a message's reply policy is read and the message handed over,
        with the number of messages holding or waiting for it: messages keep their order."""
        self._gateway: asyncio.Task[None] | None = None
        self._managed = False
        self._identify: Callable[[int], Awaitable[None]] | None = None
        self.shards: ShardClients | None = None
        """The shard connections (``DISCORD_SHARD_COUNT`` above 1 or ``auto``, or ``manage_shards``)."""
        self.shard_count = 1
        """Shards in all, once started (Discord's recommendation with ``auto``)."""
        self.max_concurrency = 1
        """IDENTIFYs Discord allows at the same time (``session_start_limit.max_concurrency``)."""
        self._typing = SharedTyping(every=settings.typing_interval)
        self.live = (
            LiveReplies(output_type="discord:message", start=self._start_live) if settings.stream_replies else None
        )
        """Answers being shown while they are written (None with DISCORD_STREAM_REPLIES=false)."""

    @property
    def error_message(self) -> str:
        """What users read when a run fails."""
        return self.settings.error_message

    # -- lifecycle -------------------------------------------------------------------------------------

    async def start(self, agent: Agent) -> None:
        """Log in (REST) and, when listening, connect to the gateway and wait until it is ready. With
        ``DISCORD_SHARD_COUNT`` above 1 (or ``auto``) every shard is connected (``shards``); with
        ``manage_shards()`` none: whoever called it adds and removes them (``bots gateway``)."""
        if self.client is not None:
            return
        token = self.settings.token.get_secret_value().strip() if self.settings.token is not None else ""
        if not token:
            raise ConfigError(
                "DISCORD_TOKEN is empty: set it in the environment or .env to the bot token from the developer "
                "portal (your application, Bot, Reset Token), or run the bot without the Discord extension"
            )
        self._agent = agent
        self.metrics.bind(agent)
        agent.readiness["discord"] = self.ready
        discord.http.Route.BASE = self.settings.api_url.rstrip("/")
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.settings.gateway_url)
        client = self.client = self.new_client()
        deadline = self.settings.connect_timeout
        try:
            try:
                async with asyncio.timeout(deadline):
                    await client.login(token)
            except _NETWORK_ERRORS as exc:
                raise platform_error(exc, f"log in at {self.settings.api_url}") from exc
            if self.listen and (self._managed or self.settings.shard_count != 1):
                await self._start_shards(client, token, deadline)
            elif self.listen:
                await self._connect(client, deadline)
        except BaseException:
            await self._close_client()
            raise
        if self.live is not None:
            agent.event_listeners.append(self.live.on_event)
        agent.media.fetchers["discord"] = self.fetch_attachment  # a worker reads what the gateway only referenced
        log.info(
            "discord: logged in as %s (%s)%s", client.user, client.application_id, "" if self.listen else ", REST only"
        )

    def new_client(self, **options: Any) -> BotClient:
        """A discord.py client of this runtime (``shard_id``/``shard_count`` for one shard's connection)."""
        return BotClient(
            self,
            guild_ready_timeout=self.settings.guild_ready_timeout,
            chunk_guilds_at_startup=False,
            http_trace=self._http_trace(),
            **options,
        )

    def manage_shards(self, *, identify: Callable[[int], Awaitable[None]] | None = None) -> None:
        """Before ``start``: connect no shard at start; the caller adds and removes them with ``shards``
        (``bots gateway`` does, as it takes and gives back shard leases). ``identify`` is awaited before each
        IDENTIFY (a Redis-held slot shared by every process)."""
        self._managed = True
        self._identify = identify

    async def _start_shards(self, client: BotClient, token: str, deadline: float) -> None:
        """The shard connections (``extensions.discord.shards.open_shards``): all of them, or, managed, none yet."""
        self.shards = await open_shards(self, client, token, identify=self._identify, connect=not self._managed)
        self.shard_count, self.max_concurrency = self.shards.count, self.shards.max_concurrency

    async def before_identify(self, shard_id: int | None, *, initial: bool) -> bool:
        """Wait for this shard's identify slot; False when this runtime does not space IDENTIFYs itself
        (one unsharded connection: discord.py's own wait applies)."""
        if self.shards is None or shard_id is None:
            return False
        await self.shards.identify(shard_id)
        return True

    def gateway_failed(self, error: BotError) -> None:
        """A gateway connection ended for good: the bot cannot go on (``agent.fail``)."""
        if self.client is None:  # stopping
            return
        if self.failure is None:
            self.failure = error
            log.error("discord: the gateway stopped: %s", error)
        if self._agent is not None:
            self._agent.fail(error)

    async def _connect(self, client: BotClient, deadline: float) -> None:
        gateway = self._gateway = asyncio.create_task(self._run_gateway(client), name="discord:gateway")
        ready = asyncio.create_task(client.wait_until_ready(), name="discord:ready")
        try:
            done, _ = await asyncio.wait({gateway, ready}, timeout=deadline, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
        if gateway in done:
            exc = gateway.exception()
            raise exc if exc is not None else PlatformError("the Discord gateway closed before it was ready")
        if ready not in done:
            raise PlatformError(
                f"the Discord gateway at {self.settings.gateway_url} was not ready within {deadline:g}s; "
                "check the network and DISCORD_GATEWAY_URL, or raise DISCORD_CONNECT_TIMEOUT"
            )
        gateway.add_done_callback(self._gateway_done)

    async def _run_gateway(self, client: BotClient) -> None:
        try:
            await client.connect(reconnect=True)
        except (discord.PrivilegedIntentsRequired, discord.ConnectionClosed, *_NETWORK_ERRORS) as exc:
            raise platform_error(exc, "stay connected to the gateway") from exc

    def _gateway_done(self, task: asyncio.Task[None]) -> None:
        """The gateway ended: unless ``stop`` ended it, the bot cannot go on, so the agent is told
        (``agent.fail``; ``bots run`` then stops with the error)."""
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, BotError):
            self.failure = exc
            log.error("discord: the gateway stopped: %s", exc)
        elif exc is not None:
            self.failure = PlatformError(f"the Discord gateway crashed: {type(exc).__name__}: {exc}")
            log.error("discord: the gateway crashed", exc_info=exc)
        elif self.client is not None:  # discord.py gave up without an error, and not because we stopped
            self.failure = PlatformError("the Discord gateway connection ended and discord.py did not reconnect")
            log.error("discord: %s", self.failure)
        if self.failure is not None and self._agent is not None:
            self._agent.fail(self.failure)

    def ready(self) -> bool | str:
        """The readiness check (``agent.readiness["discord"]``): the gateway is connected and ready; with
        ``listen=False``, logged in for REST."""
        if self.failure is not None:
            return f"failed: {self.failure}"
        client = self.client
        if client is None:
            return "not connected"
        if not self.listen:
            return True if client.user is not None else "logging in"
        if self.shards is not None:
            return self.shards.ready()
        if not client.is_ready():
            return "gateway connecting"
        ws = client.ws
        if ws is None or not ws.open:
            return "gateway disconnected, reconnecting"
        return True

    def _http_trace(self) -> aiohttp.TraceConfig:
        """discord.py's ``http_trace`` hook: every REST answer of 429 is counted (discord.py waits and
        retries by itself)."""

        async def on_request_end(
            session: aiohttp.ClientSession, context: Any, params: aiohttp.TraceRequestEndParams
        ) -> None:
            if params.response.status == 429:
                self.metrics.rate_limited()

        trace = aiohttp.TraceConfig()
        trace.on_request_end.append(on_request_end)
        return trace

    async def wait_closed(self) -> None:
        """Return when the gateway connection ends; raise the reason (``ConfigError``/``PlatformError``)
        when it ended on its own rather than through ``stop``."""
        if self._gateway is not None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(self._gateway)
        if self.failure is not None:
            raise self.failure

    async def wait_idle(self) -> None:
        """Return once every message handed to the agent so far has been fully handled (run finished,
        memory saved)."""
        await self._tasks.wait()

    def subscribe(self, send: Send, agent: Agent) -> Callable[[], None]:
        """Start handing answered messages to ``send`` (``agent.send``); returns the unsubscribe."""
        self._send = send
        self._open.set()

        def unsubscribe() -> None:
            self._send = None
            self._open.set()  # waiters see that nobody takes inputs any more

        return unsubscribe

    async def stop(self, agent: Agent) -> None:
        """Stop listening, let message handlers end (they are cancelled after ``stop_timeout``), close."""
        self._send = None
        self._open.set()
        await self._tasks.close(timeout=agent.stop_timeout)
        if self.live is not None:
            with contextlib.suppress(ValueError):
                agent.event_listeners.remove(self.live.on_event)
            await self.live.aclose()  # answers cut off by the stop are marked as such
        await self._close_client()

    async def _close_client(self) -> None:
        client, self.client = self.client, None
        shards, self.shards = self.shards, None
        if shards is not None:
            await shards.close()
        if client is not None:
            with contextlib.suppress(*_NETWORK_ERRORS):
                await client.close()
        gateway = self._gateway
        if gateway is not None and not gateway.done():
            gateway.cancel()
        if gateway is not None:
            with contextlib.suppress(BaseException):
                await gateway

    # -- incoming --------------------------------------------------------------------------------------

    def on_message(self, message: discord.Message) -> None:
        """Decide at once whether ``message`` is answered; answer in a task this runtime owns, with
        ``discord:<message id>`` as the correlation id of everything down to the reply."""
        client = self.client
        if client is None or client.user is None or message.is_system():
            return
        facts = facts_of(message, client.user)
        args = ChannelArgs(channel_id=facts.channel_id, guild_id=facts.guild_id, parent_id=facts.parent_id)
        self.metrics.received(discord_channel, args)
        if not self._seen.add(str(message.id)):
            log.info("discord: message %s was delivered twice; answering it once", message.id)
            self.metrics.ignored(discord_channel, args, Ignored.DUPLICATE)
            return
        verdict = decide(facts, self.settings, self.hops)
        chosen = self._agent is not None and facts.guild_id is not None and not facts.author_is_bot
        if chosen and verdict in (Verdict.ANSWER, Verdict.POLICY):  # the channel may have its own (``/reply``)
            self._tasks.spawn(
                self._answer_if_chosen(
                    message, facts, args, message_text(message, client.user), attachments_of(message)
                ),
                name=f"discord:message:{message.id}",
                correlation=f"discord:{message.id}",
            )
            return
        self.verdicts[verdict] += 1
        if verdict.ignored is not None:
            log.debug("discord: not answering message %s in %s: %s", message.id, facts.channel_id, verdict.value)
            self.metrics.ignored(discord_channel, args, verdict.ignored)
            return
        text = message_text(message, client.user)
        attachments = attachments_of(message)
        if not text and not attachments:
            self.metrics.ignored(discord_channel, args, Ignored.EMPTY)
            return
        self._tasks.spawn(
            self._answer(message, facts, args, text, attachments),
            name=f"discord:message:{message.id}",
            correlation=f"discord:{message.id}",
        )

    async def _answer(
        self, message: discord.Message, facts: MessageFacts, args: ChannelArgs, text: str, attachments: list[Attachment]
    ) -> None:
        content_log.info("channel %s message %s from %s: %s", facts.channel_id, message.id, facts.author_id, text)
        log.info(
            "discord: channel %s: answering user %s (message %s, %d characters)",
            facts.channel_id,
            facts.author_id,
            message.id,
            len(text),
        )
        await self._open.wait()
        send = self._send
        if send is None:
            log.warning("discord: message %s arrived while the bot is stopping; not answered", message.id)
            self.metrics.ignored(discord_channel, args, Ignored.STOPPING)
            return
        ref = InputRef(type="discord:message", data=text, params=message_params(message), attachments=attachments)
        async with self.typing(facts.channel_id):
            try:
                await send(discord_channel, args, ref, dedupe_key=f"discord:{message.id}")
            except BotError as exc:
                log.warning("discord: message %s in %s was not taken: %s", message.id, facts.channel_id, exc)
                if isinstance(exc, BackpressureError):
                    self.metrics.ignored(discord_channel, args, Ignored.BUSY)

    async def _answer_if_chosen(
        self, message: discord.Message, facts: MessageFacts, args: ChannelArgs, text: str, attachments: list[Attachment]
    ) -> None:
        """A person's message in a server channel: answer it if the channel's reply policy (its own choice,
        ``/reply``, over the operator's) says so. The channel's policy reads are taken in turn, and each message goes
        on to be handed over before the next read ends, so the messages keep their order."""
        lock, holders = self._channel_turns.get(facts.channel_id, (asyncio.Lock(), 0))
        self._channel_turns[facts.channel_id] = (lock, holders + 1)
        try:
            async with lock:
                policy = await self._reply_policy(facts, args)
        finally:
            lock, holders = self._channel_turns[facts.channel_id]
            if holders <= 1:
                del self._channel_turns[facts.channel_id]
            else:
                self._channel_turns[facts.channel_id] = (lock, holders - 1)
        addressed = should_reply(policy, private=False, mentioned=facts.mentioned, replied_to_bot=facts.replied_to_bot)
        verdict = Verdict.ANSWER if addressed else Verdict.POLICY
        self.verdicts[verdict] += 1
        if verdict.ignored is not None:
            self.metrics.ignored(discord_channel, args, verdict.ignored)
        elif not text and not attachments:
            self.metrics.ignored(discord_channel, args, Ignored.EMPTY)
        else:
            await self._answer(message, facts, args, text, attachments)

    async def _reply_policy(self, facts: MessageFacts, args: ChannelArgs) -> ReplyPolicy:
        """When the bot answers in the server channel of ``facts``: its own choice (``/reply``; a thread's channel's
        where the thread chose nothing) over ``DISCORD_CHANNEL_POLICIES`` and ``DISCORD_REPLY_POLICY`` (read from the
        store at each message, so a change applies at once)."""
        agent = self._agent
        default = self.settings.policy_for(facts.channel_id, facts.parent_id)
        if agent is None:
            return default
        try:
            commands, cid = ChatCommands.of(agent, discord_channel, args)
            return await commands.reply_policy(cid, default)
        except BotError as exc:  # the store is down: the operator's policy
            log.warning("discord: could not read the settings of channel %s: %s", facts.channel_id, exc)
            return default

    def _serves(self, interaction: discord.Interaction) -> bool:
        """True when the bot talks in the interaction's channel (filters and allowlists, any reply policy)."""
        channel, channel_id = interaction.channel, interaction.channel_id
        assert channel_id is not None
        facts = MessageFacts(
            author_id=interaction.user.id,
            author_is_bot=False,
            own=False,
            channel_id=channel_id,
            parent_id=getattr(channel, "parent_id", None) if isinstance(channel, discord.Thread) else None,
            guild_id=interaction.guild_id,
            mentioned=True,
        )
        verdict = decide(facts, self.settings, self.hops)
        return verdict is Verdict.ANSWER or verdict is Verdict.POLICY

    async def reset_channel(self, interaction: discord.Interaction, *, erase: bool = False) -> str:
        """``/reset``: forget the conversation of the interaction's channel, if the bot serves it; with
        ``erase`` (``/forget``), delete its full history and summary too."""
        agent, client, channel_id = self._agent, self.client, interaction.channel_id
        if agent is None or client is None or client.user is None or channel_id is None:
            return say("not_ready")
        if not self._serves(interaction):
            return "I don't talk in this channel, so there is nothing to forget."
        if not (
            interaction.guild_id is None  # a DM
            or agent.is_admin(f"discord:{interaction.user.id}")
            or interaction.permissions.manage_messages
        ):
            log.info(
                "discord: /%s by user %s in %s refused", "forget" if erase else "reset", interaction.user.id, channel_id
            )
            return RESET_REFUSED
        args = {"channel_id": channel_id, "guild_id": interaction.guild_id}
        if erase:
            await agent.forget(discord_channel, args)
            return FORGET_DONE
        await agent.reset(discord_channel, args)
        return "Done: I forgot our conversation in this channel."

    async def language_of(self, interaction: discord.Interaction) -> str | None:
        """The language of the bot's messages in the interaction's channel."""
        agent, channel_id = self._agent, interaction.channel_id
        if agent is None or channel_id is None:
            return None
        commands, cid = ChatCommands.of(agent, discord_channel, self._args_of(interaction))
        return await commands.language(cid)

    @staticmethod
    def _args_of(interaction: discord.Interaction) -> ChannelArgs:
        """The conversation of an interaction's channel (a thread's with its channel)."""
        channel, channel_id = interaction.channel, interaction.channel_id
        assert channel_id is not None
        parent = channel.parent_id if isinstance(channel, discord.Thread) else None
        return ChannelArgs(channel_id=channel_id, guild_id=interaction.guild_id, parent_id=parent)

    def disabled_commands(self) -> frozenset[str]:
        """The commands the operator turned off (``BOT_DISABLED_COMMANDS``)."""
        return self._agent.chat_policy.disabled_commands if self._agent is not None else frozenset()

    def model_choices(self, typed: str) -> list[str]:
        """The models of ``LLM_ALLOWED_MODELS`` that contain what the user typed so far (autocomplete)."""
        allowed = self._agent.chat_policy.allowed_models if self._agent is not None else ()
        return [m for m in allowed if typed.lower() in m.lower()]

    async def settings_command(self, interaction: discord.Interaction, command: str, arg: str | None) -> Answer:
        """``/model``, ``/persona``, ``/language``, ``/settings``, ``/stats`` in the interaction's channel. Server
        members with Manage Server or Manage Channels (or ``BOT_ADMIN_USERS``) may change settings; in a DM,
        its user."""
        agent, channel_id = self._agent, interaction.channel_id
        if agent is None or self.client is None or channel_id is None:
            return Answer(text=say("not_ready"))
        commands, cid = ChatCommands.of(agent, discord_channel, self._args_of(interaction))
        if not self._serves(interaction):
            return Answer(text=say("not_served", await commands.language(cid)))
        permissions = interaction.permissions
        manages = interaction.guild_id is None or permissions.manage_guild or permissions.manage_channels
        caller = Caller(user=f"discord:{interaction.user.id}", manages_chat=manages)
        return await commands.run(command, cid, caller, arg)

    async def fetch_attachment(self, attachment: Attachment) -> bytes:
        """The bytes of a file someone posted, from its attachment URL (Discord's CDN)."""
        client = self._require_client()
        try:
            return await client.http.get_from_cdn(attachment.ref)
        except _NETWORK_ERRORS as exc:
            raise platform_error(exc, f"download the attachment {attachment.name!r}") from exc

    # -- outgoing --------------------------------------------------------------------------------------

    def _require_client(self) -> BotClient:
        if self.client is None:
            raise PlatformError("the Discord client is not running: call await agent.start() first")
        return self.client

    async def post_reply(self, *, channel_id: int, text: str, reply_to: int | None, idempotency_key: str) -> list[int]:
        """Post ``text`` to the channel, split at 2,000 characters (code fences re-opened), the first chunk
        as a reply to ``reply_to``; no mention pings. Chunk ``i`` carries the nonce ``nonce_for(key, i)``
        with ``enforce_nonce``, so posting again with the same key does not duplicate. Returns the ids."""
        ids: list[int] = []
        for index, chunk in enumerate(split_message(text, MESSAGE_LIMIT)):
            ids.append(
                await self.send_message(
                    channel_id=channel_id,
                    text=chunk,
                    reply_to=reply_to if index == 0 else None,
                    nonce=nonce_for(idempotency_key, index),
                )
            )
        return ids

    async def send_message(self, *, channel_id: int, text: str, reply_to: int | None, nonce: str) -> int:
        """Post one message (at most 2,000 characters) with ``nonce`` enforced, as a reply to ``reply_to``
        if given; no mention pings. Returns its id."""
        message = await self.send(channel_id=channel_id, text=text, reply_to=reply_to, nonce=nonce)
        return message.id

    async def send(self, *, channel_id: int, text: str, reply_to: int | None, nonce: str) -> discord.Message:
        """``send_message``, returning the message Discord answered with: with a nonce Discord saw before
        (``enforce_nonce``), the message posted then, whatever it shows."""
        client = self._require_client()
        channel = client.get_partial_messageable(channel_id)
        reference = None
        if reply_to is not None:
            reference = channel.get_partial_message(reply_to).to_reference(fail_if_not_exists=False)
        try:
            async with asyncio.timeout(self.settings.request_timeout):
                sent = await channel.send(
                    text,
                    nonce=nonce,
                    reference=reference,  # type: ignore[arg-type]
                    allowed_mentions=discord.AllowedMentions.none(),
                )
        except _NETWORK_ERRORS as exc:
            raise platform_error(exc, f"post a message in channel {channel_id}") from exc
        return sent

    async def edit_message(self, *, channel_id: int, message_id: int, text: str) -> None:
        """Replace the text of one of the bot's messages; no mention pings."""
        message = self._require_client().get_partial_messageable(channel_id).get_partial_message(message_id)
        try:
            async with asyncio.timeout(self.settings.request_timeout):
                await message.edit(content=text, allowed_mentions=discord.AllowedMentions.none())
        except _NETWORK_ERRORS as exc:
            raise platform_error(exc, f"edit message {message_id} in channel {channel_id}") from exc

    async def delete_message(self, *, channel_id: int, message_id: int) -> None:
        """Delete one of the bot's messages."""
        message = self._require_client().get_partial_messageable(channel_id).get_partial_message(message_id)
        try:
            async with asyncio.timeout(self.settings.request_timeout):
                await message.delete()
        except _NETWORK_ERRORS as exc:
            raise platform_error(exc, f"delete message {message_id} in channel {channel_id}") from exc

    # -- answers shown while they are written ----------------------------------------------------------

    def _start_live(self, event: RunEvent) -> LiveReply | None:
        """The live reply for an answer that starts streaming (an event listener: runs in the run's task)."""
        state = self._agent.state_of(event.context_id) if self._agent is not None else None
        if state is None or state.context is not discord_channel or self.client is None:
            return None
        reply_to = state.options.get(REPLY_TO)
        # stable for one answer to one message (in a queued run the ledger's keys are used instead)
        key = f"live:{event.context_id}:{reply_to or uuid.uuid4().hex}:{event.step}:{event.output_index}"
        record = ReplyRecord.of(state, "discord:message", streamed=True)
        return self._live_reply(channel_id=state.args.channel_id, reply_to=reply_to, key=key, record=record)

    def _live_reply(self, *, channel_id: int, reply_to: int | None, key: str, record: ReplyRecord | None) -> LiveReply:
        sink = _Sink(self, channel_id=channel_id, reply_to=reply_to, key=key, record=record)
        return LiveReply(sink=sink, split=_split, interval=self.settings.stream_interval, record=record)

    async def deliver(
        self,
        *,
        key: ReplyKey,
        channel_id: int,
        text: str,
        reply_to: int | None,
        idempotency_key: str,
        ledger: ReplyLedger | None = None,
    ) -> list[int]:
        """Deliver an answer: finish its live reply if it was shown while written (``key`` is the output's
        ``(context id, step, index)``), else post it. With a queued run's ``ledger`` the answer is posted
        exactly once across attempts at the batch (``extensions.chat.exactly_once``). Returns its messages' ids."""
        reply = self.live.take(key) if self.live is not None else None
        content_log.info("channel %s reply: %s", channel_id, text)
        if reply is None and ledger is not None:  # posted at once, following the ledger as a live reply does
            record = ReplyRecord(ledger, "discord:message", streamed=self.live is not None)
            reply = self._live_reply(channel_id=channel_id, reply_to=reply_to, key=idempotency_key, record=record)
        if reply is None:
            ids = await self.post_reply(
                channel_id=channel_id, text=text, reply_to=reply_to, idempotency_key=idempotency_key
            )
        else:
            ids = await reply.finish(text)
        log.info(
            "discord: channel %s: replied to message %s (%d characters in %d messages)",
            channel_id,
            reply_to,
            len(text),
            len(ids),
        )
        return ids

    def typing(self, channel_id: int) -> AbstractAsyncContextManager[None]:
        """Keep "typing..." alive in the channel while the block lasts: one loop per channel however many hold
        it (the listener while it hands a message over, the run while it answers, here or in a worker)."""
        return self._typing.hold(channel_id, lambda: self._send_typing(channel_id))

    async def _send_typing(self, channel_id: int) -> None:
        await self._require_client().get_partial_messageable(channel_id).typing()

    async def abandon_replies(self, context_id: str) -> None:
        """A run failed: mark the answers it was writing as cut."""
        if self.live is not None:
            await self.live.abandon_context(context_id)

    async def add_reaction(self, *, channel_id: int, message_id: int, emoji: str) -> None:
        """React to a message with ``emoji`` (unicode, or ``<:name:id>`` for a server emoji)."""
        client = self._require_client()
        message = client.get_partial_messageable(channel_id).get_partial_message(message_id)
        try:
            async with asyncio.timeout(self.settings.request_timeout):
                await message.add_reaction(emoji)
        except _NETWORK_ERRORS as exc:
            raise platform_error(exc, f"react with {emoji!r} to message {message_id}") from exc
