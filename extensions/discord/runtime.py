"""The Discord side of one agent: ``extensions.chat.adapter.ChatAdapter`` (what every platform shares: the start and
stop sequence, dedupe, metrics, owned tasks, full inboxes, languages, live replies and the reply ledger) filled in
with modules named for their jobs:

- ``gateway`` (and ``shards``): logging in, the gateway connection or the shards' connections, readiness;
- ``client``: the discord.py client and its events, handed on through ``ClientHooks``;
- ``listener``: deciding what to answer and handing it to the agent;
- ``slash_commands``: ``/reset``, ``/forget``, ``/help`` and the settings commands, and who may use them;
- ``posting``: replies, live edits, "typing...", reactions, attachments; ``notices``: the bot's own words in the
  channel's language.

Nothing imports this module but the package's ``__init__`` (``discord_runtime``): the modules below know each other
only through the adapter and the callbacks given here. ``start``/``stop`` are the extension's service;
``subscribe`` is called by the ``discord:message`` input when the agent is ready to take inputs.

Operations: the ``discord`` readiness check is ready while the gateway is connected and ready (with
``listen=False``, once logged in for REST); messages received and ignored and every 429 go to the agent's observers;
each message is handled with ``discord:<message id>`` as its correlation id; a gateway that ends for good (4014, a
reset token, another fatal close) is reported with ``agent.fail``, so ``bots run`` stops with a clear error instead of
idling.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from core.entries import InputRef
from core.errors import BotError
from core.facts import facts_of
from core.usage.feedback import record_feedback

from ..chat.adapter import ChatAdapter
from ..chat.counters import Ignored
from ..chat.policy import Allowlist
from ..chat.polls import vote_text
from ..chat.reminders import drop_conversation
from ..chat.stream import LiveReply, ReplyKey
from ._lib import discord
from .approvals import DiscordApprovals
from .client import BotClient, ClientHooks, rate_limit_trace
from .definitions import POLL_ANSWER, ChannelArgs, PollArgs, discord_channel
from .filters import BotHops, Verdict
from .gateway import Gateway, token_of
from .listener import Listener
from .notices import Notices
from .posting import MESSAGE, Poster
from .settings import DiscordSettings
from .shards import ShardClients
from .slash_commands import SlashCommands

if TYPE_CHECKING:
    from core import Host
    from core.definitions import Send
    from core.events import RunEvent
    from core.fleet.reply_ledger import ReplyLedger
    from core.media import Attachment

__all__ = ("DiscordRuntime",)

log = logging.getLogger("extensions.discord")


class DiscordRuntime(ChatAdapter):
    """Owns the discord.py side of one agent. ``listen=False`` only prepares REST (no gateway)."""

    platform = "discord"

    def __init__(self, settings: DiscordSettings, *, listen: bool = True) -> None:
        super().__init__(
            log=log, typing_every=settings.typing_interval, live_output=MESSAGE if settings.stream_replies else None
        )
        self.settings = settings
        """The ``DISCORD_*`` settings."""
        self.listen = listen
        """Connect to the gateway and answer messages (False: only post, for queue workers)."""
        self.hops = BotHops()
        """Bot messages answered in a row, per channel."""
        self.gateway = Gateway(
            settings, listen=listen, new_client=self.new_client, failed=self.fail, failure=lambda: self.failure
        )
        """The connections to Discord."""
        self.poster = Poster(self, settings, client=lambda: self.gateway.client)
        """Everything the bot writes."""
        self.notices = Notices(self, self.poster)
        """The bot's own words, in each channel's language."""
        self.listener = Listener(self, settings, poster=self.poster, notices=self.notices, hops=self.hops, me=self._me)
        """Decides what to answer and hands it to the agent."""
        self.commands = SlashCommands(self, settings, hops=self.hops, client=lambda: self.gateway.client)
        """The slash commands."""
        self.approvals = DiscordApprovals(
            client=lambda: self.gateway.client,
            rules=lambda: self.trust,
            timeout=settings.request_timeout,
            language=lambda approval: self.language(discord_channel, ChannelArgs.model_validate(approval.args)),
        )
        """Approval requests posted with buttons, and the presses on them (``core.approvals``), in the language of
        the conversation that asked."""

    # -- what the others read ----------------------------------------------------------------------------

    @property
    def client(self) -> discord.Client | None:
        """The main discord.py client, from ``start`` to ``stop``."""
        return self.gateway.client

    @property
    def shards(self) -> ShardClients | None:
        """The shard connections (``DISCORD_SHARD_COUNT`` above 1 or ``auto``, or ``manage_shards``)."""
        return self.gateway.shards

    @property
    def shard_count(self) -> int:
        """Shards in all, once started (Discord's recommendation with ``auto``)."""
        return self.gateway.shard_count

    @property
    def max_concurrency(self) -> int:
        """IDENTIFYs Discord allows at the same time (``session_start_limit.max_concurrency``)."""
        return self.gateway.max_concurrency

    @property
    def verdicts(self) -> collections.Counter[Verdict]:
        """How many messages got each verdict (for metrics and tests)."""
        return self.listener.verdicts

    @property
    def error_message(self) -> str:
        """What users read when a run fails."""
        return self.settings.error_message

    # -- receive (``ChatAdapter``) ---------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self.gateway.client is not None

    async def connect(self, agent: Host) -> None:
        """Log in (REST) and, when listening, connect to the gateway (or the shards) and wait until it is ready."""
        client = await self.gateway.open(token_of(self.settings))
        self.approvals.attach(agent)
        log.info(
            "discord: logged in as %s (%s)%s", client.user, client.application_id, "" if self.listen else ", REST only"
        )

    def new_client(self, **options: Any) -> BotClient:
        """A discord.py client of this bot (``shard_id``/``shard_count`` for one shard's connection)."""
        hooks = ClientHooks(
            on_message=self.listener.on_message,
            before_identify=self.gateway.before_identify,
            commands=self.commands.build(),
            command_failed=self.commands.command_failed,
            sync_commands=self.listen and self.settings.sync_commands,
            request_timeout=self.settings.request_timeout,
            on_component=self.on_component if self.listen else None,
            on_removed=self.on_removed if self.listen else None,
            on_deleted=self.on_deleted if self.listen else None,
            on_reaction=self.on_reaction if self.listen else None,
            on_poll_vote=self.on_poll_vote if self.listen else None,
        )
        return BotClient(
            hooks,
            guild_ready_timeout=self.settings.guild_ready_timeout,
            chunk_guilds_at_startup=False,
            http_trace=rate_limit_trace(self.metrics.rate_limited),
            **options,
        )

    def manage_shards(self, *, identify: Callable[[int], Awaitable[None]] | None = None) -> None:
        """Before ``start``: connect no shard at start; the caller adds and removes them with ``shards``
        (``bots gateway`` does, as it takes and gives back shard leases). ``identify`` is awaited before each
        IDENTIFY (a Redis-held slot shared by every process)."""
        self.gateway.manage_shards(identify=identify)

    def subscribe(self, send: Send, agent: Host) -> Callable[[], Coroutine[Any, Any, None]]:
        """Start handing answered messages to ``send`` (``agent.send``); returns the unsubscribe."""
        self.listener.open(send)
        return self.unsubscribe

    async def stop_receiving(self, *, timeout: float) -> None:
        """Hand no more messages over (the gateway stays connected until ``disconnect``: a message arriving
        meanwhile is counted as ``stopping``)."""
        self.listener.close()

    async def on_component(self, interaction: discord.Interaction) -> None:
        """A button was pressed: Stop under an answer being written, or a command answer's (``/reminders``' Cancel),
        goes to the slash commands, any other to the approvals."""
        if await self.commands.on_stop_button(interaction):
            return
        if not await self.commands.on_button(interaction):
            await self.approvals.on_component(interaction)

    async def on_removed(self, guild_id: int, channels: list[int]) -> None:
        """The bot was removed from a server: the schedules of its channels and threads are dropped (Discord said
        the bot may no longer post there)."""
        agent = self.agent
        if agent is None:
            return
        log.info("discord: removed from server %s; dropping the schedules of its %d channels", guild_id, len(channels))
        for channel_id in channels:
            cid = agent.context_id(discord_channel, ChannelArgs(channel_id=channel_id, guild_id=guild_id))
            await drop_conversation(agent, cid, f"the bot was removed from Discord server {guild_id}")

    async def on_reaction(self, payload: discord.RawReactionActionEvent) -> None:
        """A reaction on one of the bot's own messages (Discord names the message's author) is feedback on that
        answer (``core.usage.feedback``): recorded, never answered. Custom emoji, and reactions on anyone else's
        messages, are left."""
        agent, client = self.agent, self.gateway.client
        me = client.user if client is not None else None
        if agent is None or me is None or payload.message_author_id != me.id or payload.user_id == me.id:
            return
        if payload.emoji.id is not None:  # a server's own emoji: says nothing we can read
            return
        args = ChannelArgs(channel_id=payload.channel_id, guild_id=payload.guild_id)
        score = await record_feedback(
            agent,
            context_id=agent.context_id(discord_channel, args),
            user=f"discord:{payload.user_id}",
            message=str(payload.message_id),
            emoji=payload.emoji.name or "",
        )
        if score is not None:
            log.info("discord: a %s reaction on answer %s", score.value, payload.message_id)

    async def on_poll_vote(self, payload: discord.RawPollVoteActionEvent) -> None:
        """A vote in one of the bot's polls (noted when posted: ``extensions.chat.polls``) becomes a
        ``discord:poll_answer`` input of the poll's conversation; any other vote is left."""
        try:
            record = await self.poster.polls.get(str(payload.message_id))
        except Exception as exc:
            log.warning("discord: a vote in poll %s is left: %s", payload.message_id, exc)
            return
        client = self.gateway.client
        if record is None or client is None:
            return
        if not Allowlist.of(users=self.settings.allowed_users).allows(chat_ids=(), user_id=payload.user_id):
            self.metrics.ignored(discord_channel, record.args, Ignored.ALLOWLIST)  # (DISCORD_ALLOWED_USERS)
            return
        user = client.get_user(payload.user_id)
        name = user.display_name if user is not None else str(payload.user_id)
        ref = InputRef(
            type=POLL_ANSWER,
            data=vote_text(name, record, [payload.answer_id - 1]),  # (Discord numbers the answers from 1)
            params={
                "author": name,
                "author_id": str(payload.user_id),
                "message_id": str(payload.message_id),
                "answer": str(payload.answer_id),
            },
        )
        key = f"discord:vote:{payload.message_id}:{payload.user_id}:{payload.answer_id}"
        self.listener.hand(record.args, ref, key=key)

    async def post_poll(
        self, *, args: ChannelArgs, poll: PollArgs, reply_to: int | None, idempotency_key: str
    ) -> list[int]:
        """Post a poll (``Poster.post_poll``); returns its message's id."""
        return await self.poster.post_poll(args=args, poll=poll, reply_to=reply_to, idempotency_key=idempotency_key)

    async def on_deleted(self, channel_id: int, guild_id: int | None, message_ids: list[int]) -> None:
        """Messages were deleted: they leave the working memory, the run in progress and the history
        (``Host.forget_messages``), and the facts that came from them are dropped (``core.facts``). A store that
        fails is logged (the facts stay until ``/memory delete``)."""
        agent = self.agent
        if agent is None:
            return
        args = ChannelArgs(channel_id=channel_id, guild_id=guild_id)
        cid = agent.context_id(discord_channel, args)
        try:
            await agent.forget_messages(discord_channel, args, [str(m) for m in message_ids])
        except BotError as exc:
            log.warning("discord: deleted messages %s of %s stay in its memory: %s", message_ids, cid, exc)
        facts = facts_of(agent)
        if facts is None:
            return
        for message_id in message_ids:
            try:
                dropped = await facts.store.drop_message(cid, str(message_id))
            except BotError as exc:
                log.warning("discord: the facts of deleted message %s in %s stay: %s", message_id, cid, exc)
                continue
            if dropped:
                log.info("discord: message %s in %s was deleted; dropped %d fact(s)", message_id, cid, len(dropped))

    async def disconnect(self) -> None:
        """Close the shards, the client and the gateway connection."""
        self.approvals.detach()
        await self.gateway.close()

    def ready(self) -> bool | str:
        """The readiness check ``discord``: the gateway is connected and ready; with ``listen=False``, logged
        in for REST."""
        return self.gateway.ready()

    async def fetch_file(self, attachment: Attachment) -> bytes:
        """The bytes of a file someone posted (a worker reads what the gateway only referenced)."""
        return await self.poster.fetch_attachment(attachment)

    def start_live(self, event: RunEvent) -> LiveReply | None:
        return self.poster.start_live(event)

    async def wait_closed(self) -> None:
        """Return when the gateway connection ends; raise the reason (``ConfigError``/``PlatformError``)
        when it ended on its own rather than through ``stop``."""
        await self.gateway.wait_closed()

    async def wait_idle(self) -> None:
        """Return once every message handed to the agent so far has been fully handled (run finished,
        memory saved)."""
        await self.tasks.wait()

    def _me(self) -> discord.ClientUser | None:
        client = self.gateway.client
        return client.user if client is not None else None

    # -- post: what the definitions use (``definitions.Runtime``) ---------------------------------------

    async def post_reply(self, *, channel_id: int, text: str, reply_to: int | None, idempotency_key: str) -> list[int]:
        """Post ``text`` split at 2,000 characters, idempotently (``Poster.post_reply``)."""
        return await self.poster.post_reply(
            channel_id=channel_id, text=text, reply_to=reply_to, idempotency_key=idempotency_key
        )

    async def send_message(self, *, channel_id: int, text: str, reply_to: int | None, nonce: str) -> int:
        """Post one message with ``nonce`` enforced (``Poster.send_message``); returns its id."""
        return await self.poster.send_message(channel_id=channel_id, text=text, reply_to=reply_to, nonce=nonce)

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
        """Deliver an answer, finishing its live reply or following a queued run's ledger (``Poster.deliver``)."""
        return await self.poster.deliver(
            key=key,
            channel_id=channel_id,
            text=text,
            reply_to=reply_to,
            idempotency_key=idempotency_key,
            ledger=ledger,
        )

    def typing(self, channel_id: int) -> AbstractAsyncContextManager[None]:
        """Keep "typing..." alive in the channel while the block lasts (``Poster.typing``)."""
        return self.poster.typing(channel_id)

    async def dm_channel(self, user_id: int) -> int:
        """The DM channel with a person (``Poster.dm_channel``)."""
        return await self.poster.dm_channel(user_id)

    async def add_reaction(self, *, channel_id: int, message_id: int, emoji: str) -> None:
        """React to a message with ``emoji`` (``Poster.add_reaction``)."""
        await self.poster.add_reaction(channel_id=channel_id, message_id=message_id, emoji=emoji)
