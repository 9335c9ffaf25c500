"""Deciding what to answer: every message the gateway delivers is filtered at once (own and bot messages,
allowlists, the reply policy, a redelivery), and a message to answer is handed to the agent in a task the
adapter owns (``extensions.chat.adapter``), with ``discord:<message id>`` as the correlation id of everything
down to the reply.

In front of a queue (``bots gateway``) a message for a full inbox waits for room or is dropped with the busy
notice, in the channel's language (``extensions.chat.backpressure``, ``REDIS_INBOX_FULL``), as on Telegram;
a message that could not be handed over at all gets the "something went wrong" notice: nothing is dropped
without the user being told.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from core import tracing
from core.entries import InputRef
from core.errors import BotError
from core.media import Attachment
from core.trust import TIER_PARAM

from ..chat.adapter import ChatAdapter
from ..chat.backpressure import Incoming
from ..chat.counters import Ignored
from ..chat.policy import should_reply
from ._lib import discord
from .definitions import ChannelArgs, discord_channel
from .filters import BotHops, MessageFacts, Verdict, decide
from .messages import args_of, attachments_of, facts_of, message_params, message_text, tier_of
from .notices import Notices
from .posting import MESSAGE, Poster
from .settings import DiscordSettings

if TYPE_CHECKING:
    from core.definitions import Send

__all__ = ("Listener",)

log = logging.getLogger("extensions.discord")
content_log = logging.getLogger("content.discord")
"""Message text, silent unless the operator opts in (``LOG_CONTENT``)."""


class Listener:
    """Decides on each message at once and hands those to answer to the agent (``open``)."""

    def __init__(
        self,
        adapter: ChatAdapter,
        settings: DiscordSettings,
        *,
        poster: Poster,
        notices: Notices,
        hops: BotHops,
        me: Callable[[], discord.ClientUser | None],
    ) -> None:
        self.adapter = adapter
        """The shared part of the adapter: dedupe, metrics, tasks, backpressure, the channels' reply policies."""
        self.settings = settings
        """The ``DISCORD_*`` settings (filters, allowlists, reply policies)."""
        self.poster = poster
        """Shows "typing..." while a message is handed over."""
        self.notices = notices
        """Tells a channel the bot is busy, or that something went wrong."""
        self.hops = hops
        """Bot messages answered in a row, per channel."""
        self.verdicts: collections.Counter[Verdict] = collections.Counter()
        """How many messages got each verdict (for metrics and tests)."""
        self._me = me
        self._send: Send | None = None
        self._open = asyncio.Event()
        self._channel_turns: dict[int, tuple[asyncio.Lock, int]] = {}
        """Per server channel, a lock held while a message's reply policy is read and the message handed over,
        with the number of messages holding or waiting for it: messages keep their order."""

    def open(self, send: Send) -> None:
        """Start handing answered messages to ``send`` (``agent.send``)."""
        self._send = send
        self._open.set()

    def hand(self, args: ChannelArgs, ref: InputRef, *, key: str) -> None:
        """Hand an input that is no message (a vote in one of the bot's polls) to the conversation ``args``, in a
        task the adapter owns (``key``: its dedupe key and correlation id)."""
        send = self._send
        if send is None:
            log.info("discord: %s arrived while the bot is not taking inputs; left", key)
            return
        self.adapter.metrics.received(discord_channel, args)

        async def store() -> None:
            await send(discord_channel, args, ref, dedupe_key=key)

        self.adapter.spawn(store(), name=key, key=key)

    def close(self) -> None:
        """Hand no more messages over (those waiting see that nobody takes inputs any more)."""
        self._send = None
        self._open.set()

    def on_message(self, message: discord.Message) -> None:
        """Decide at once whether ``message`` is answered; answer in a task the adapter owns, with
        ``discord:<message id>`` as the correlation id of everything down to the reply."""
        me = self._me()
        if me is None or message.is_system():
            return
        with tracing.span("discord message", kind="server") as span:  # the answering task continues its trace
            if span.is_recording():
                span.set_attributes(
                    {
                        "messaging.system": "discord",
                        "bots.chat.id": tracing.ident(message.channel.id),
                        "user.id": tracing.ident(message.author.id),
                    }
                )
            self._on_message(message, me)

    def _on_message(self, message: discord.Message, me: discord.ClientUser) -> None:
        adapter = self.adapter
        facts = facts_of(message, me)
        args = args_of(facts)
        adapter.metrics.received(discord_channel, args)
        if not adapter.seen.add(str(message.id)):
            log.info("discord: message %s was delivered twice; answering it once", message.id)
            adapter.metrics.ignored(discord_channel, args, Ignored.DUPLICATE)
            return
        rules = adapter.trust
        bots = facts.author_is_bot and rules.allows_bot("discord", facts.author_id, message.author.name)
        verdict = decide(facts, self.settings, self.hops, bots=bots)
        if verdict is Verdict.ANSWER and facts.author_is_bot and not adapter.bot_exchanges.take(facts.channel_id):
            log.warning(
                "discord: channel %s: bot %s not answered: TRUST_BOT_REPLIES reached", facts.channel_id, facts.author_id
            )
            verdict = Verdict.BOT_CAP
        key, name = f"discord:{message.id}", f"discord:message:{message.id}"
        chosen = adapter.agent is not None and facts.guild_id is not None and not facts.author_is_bot
        if chosen and verdict in (Verdict.ANSWER, Verdict.POLICY):  # the channel may have its own (``/reply``)
            text, attachments = message_text(message, me), attachments_of(message)
            adapter.spawn(self._answer_if_chosen(message, facts, args, text, attachments), name=name, key=key)
            return
        self.verdicts[verdict] += 1
        if verdict.ignored is not None:
            log.debug("discord: not answering message %s in %s: %s", message.id, facts.channel_id, verdict.value)
            adapter.metrics.ignored(discord_channel, args, verdict.ignored)
            return
        text = message_text(message, me)
        attachments = attachments_of(message)
        if not text and not attachments:
            adapter.metrics.ignored(discord_channel, args, Ignored.EMPTY)
            return
        adapter.spawn(self._answer(message, facts, args, text, attachments), name=name, key=key)

    async def _answer(
        self, message: discord.Message, facts: MessageFacts, args: ChannelArgs, text: str, attachments: list[Attachment]
    ) -> None:
        """Hand the message to the agent with "typing..." shown meanwhile: embedded, wait for its run (a failure:
        the failure notice); in front of a queue, store it, or keep it waiting for room, or drop it with the busy
        notice (``extensions.chat.backpressure``)."""
        content_log.info("channel %s message %s from %s: %s", facts.channel_id, message.id, facts.author_id, text)
        log.info(
            "discord: channel %s: answering user %s (message %s, %d characters)",
            facts.channel_id,
            facts.author_id,
            message.id,
            len(text),
        )
        await self._open.wait()
        send, adapter = self._send, self.adapter
        if send is None or adapter.agent is None:
            log.warning("discord: message %s arrived while the bot is stopping; not answered", message.id)
            adapter.metrics.ignored(discord_channel, args, Ignored.STOPPING)
            return
        params = message_params(message)
        params[TIER_PARAM] = tier_of(message, adapter.trust).value
        hidden = ["author_id"] if args.guild_id is None else []  # (a DM is one person's: its id tells nobody apart)
        ref = InputRef(type=MESSAGE, data=text, params=params, hidden=hidden, attachments=attachments)
        key = f"discord:{message.id}"

        async def store() -> None:
            await send(discord_channel, args, ref, dedupe_key=key)

        async def failed() -> None:
            await self.notices.say(args, "run_failed", reply_to=message.id)

        incoming = Incoming(
            chat=facts.channel_id,
            key=key,
            what=f"message {message.id} in channel {facts.channel_id}",
            store=store,
            tell_busy=lambda: self.notices.say(args, "busy", reply_to=message.id),
            tell_failed=failed,
            on_dropped=lambda: adapter.metrics.ignored(discord_channel, args, Ignored.BUSY),
        )
        async with self.poster.typing(facts.channel_id):
            if not adapter.agent.distributed:
                await adapter.run_here(incoming, context=discord_channel, args=args)
                return
            try:
                await adapter.backpressure.submit(incoming)
            except BotError as exc:  # the queue could not be reached (after REDIS_RETRY_SECONDS)
                log.warning("discord: message %s in %s was not stored: %s", message.id, facts.channel_id, exc)
                await failed()  # Discord cannot deliver it again: the user is told to resend

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
                default = self.settings.policy_for(facts.channel_id, facts.parent_id)
                policy = await self.adapter.reply_policy(discord_channel, args, default)
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
            self.adapter.metrics.ignored(discord_channel, args, verdict.ignored)
        elif not text and not attachments:
            self.adapter.metrics.ignored(discord_channel, args, Ignored.EMPTY)
        else:
            await self._answer(message, facts, args, text, attachments)
