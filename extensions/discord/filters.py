"""Who gets an answer in Discord, decided in code from plain facts about a message (no discord.py here)."""

from __future__ import annotations

import enum
from collections import OrderedDict
from dataclasses import dataclass

from ..chat.counters import Ignored
from ..chat.policy import Allowlist, ReplyPolicy, should_reply
from .settings import DiscordSettings

__all__ = ("BotHops", "MessageFacts", "Verdict", "decide")


@dataclass(frozen=True, kw_only=True)
class MessageFacts:
    """What the filter needs to know about one incoming message."""

    author_id: int
    """Who wrote it."""
    author_is_bot: bool
    """True for bots and webhooks."""
    own: bool
    """True when this bot wrote it."""
    channel_id: int
    """The channel (or thread, or DM) it was written in."""
    parent_id: int | None = None
    """The thread's parent channel, for a message in a thread."""
    guild_id: int | None = None
    """The server; None in a DM."""
    mentioned: bool = False
    """The bot was mentioned by name (not through @everyone)."""
    replied_to_bot: bool = False
    """The message replies to one of the bot's messages."""


class Verdict(enum.StrEnum):
    """Why a message is answered or not (logged at debug level, counted in tests)."""

    ANSWER = "answer"
    OWN = "own message"
    BOT = "written by a bot"
    BOT_HOPS = "bot hop limit reached"
    BOT_CAP = "answers to bots per window reached (TRUST_BOT_REPLIES)"
    DMS_OFF = "DMs are off"
    GUILD_NOT_ALLOWED = "server not in DISCORD_ALLOWED_GUILDS"
    CHANNEL_NOT_ALLOWED = "channel not in DISCORD_ALLOWED_CHANNELS"
    USER_NOT_ALLOWED = "user not in DISCORD_ALLOWED_USERS"
    POLICY = "reply policy says no"

    @property
    def ignored(self) -> Ignored | None:
        """The metrics' reason for not answering (None for ``ANSWER``)."""
        return _IGNORED.get(self)


_IGNORED = {
    Verdict.OWN: Ignored.OWN,
    Verdict.BOT: Ignored.BOT,
    Verdict.BOT_HOPS: Ignored.BOT_HOPS,
    Verdict.BOT_CAP: Ignored.BOT_CAP,
    Verdict.DMS_OFF: Ignored.POLICY,
    Verdict.GUILD_NOT_ALLOWED: Ignored.ALLOWLIST,
    Verdict.CHANNEL_NOT_ALLOWED: Ignored.ALLOWLIST,
    Verdict.USER_NOT_ALLOWED: Ignored.ALLOWLIST,
    Verdict.POLICY: Ignored.POLICY,
}


class BotHops:
    """Counts, per channel, the bot messages answered since the last human message."""

    def __init__(self, *, size: int = 10_000) -> None:
        self._counts: OrderedDict[int, int] = OrderedDict()
        self._size = size

    def count(self, channel_id: int) -> int:
        """Bot messages answered in a row in the channel."""
        return self._counts.get(channel_id, 0)

    def human(self, channel_id: int) -> None:
        """A person wrote in the channel: the chain of bot messages is broken."""
        self._counts.pop(channel_id, None)

    def bot(self, channel_id: int) -> None:
        """A bot message in the channel is being answered."""
        self._counts[channel_id] = self._counts.pop(channel_id, 0) + 1
        while len(self._counts) > self._size:
            self._counts.popitem(last=False)


def decide(
    facts: MessageFacts,
    settings: DiscordSettings,
    hops: BotHops,
    *,
    policy: ReplyPolicy | None = None,
    bots: bool = False,
) -> Verdict:
    """Whether to answer ``facts``'s message; updates ``hops`` for messages that count. ``policy``: the reply policy
    of the channel when it chose one (``/reply``), else the operator's (``settings.policy_for``). ``bots``: the
    operator lets this bot in (``TRUST_BOTS``; ``DISCORD_ALLOW_BOTS`` lets every bot in)."""
    if facts.own:
        return Verdict.OWN
    if facts.author_is_bot and not (settings.allow_bots or bots):
        return Verdict.BOT
    if not facts.author_is_bot:
        hops.human(facts.channel_id)
    private = facts.guild_id is None
    if private and not settings.allow_dms:
        return Verdict.DMS_OFF
    if not private:
        if settings.allowed_guilds and facts.guild_id not in settings.allowed_guilds:
            return Verdict.GUILD_NOT_ALLOWED
        channels = Allowlist.of(chats=settings.allowed_channels)
        if not channels.allows(chat_ids=[c for c in (facts.channel_id, facts.parent_id) if c], user_id=None):
            return Verdict.CHANNEL_NOT_ALLOWED
    if not Allowlist.of(users=settings.allowed_users).allows(chat_ids=(), user_id=facts.author_id):
        return Verdict.USER_NOT_ALLOWED
    if policy is None:
        policy = settings.policy_for(facts.channel_id, facts.parent_id)
    if not should_reply(policy, private=private, mentioned=facts.mentioned, replied_to_bot=facts.replied_to_bot):
        return Verdict.POLICY
    if facts.author_is_bot and not private and not (facts.mentioned or facts.replied_to_bot):
        return Verdict.POLICY  # another bot is answered only when it addresses this one, whatever the policy
    if facts.author_is_bot:
        if hops.count(facts.channel_id) >= settings.bot_hop_limit:
            return Verdict.BOT_HOPS
        hops.bot(facts.channel_id)
    return Verdict.ANSWER
