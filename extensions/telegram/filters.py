"""Who gets an answer in Telegram, and as whom: the facts of a message, and the verdict taken from them in code.

``MessageFacts.of`` reads what matters from a python-telegram-bot ``Message``. ``Judge.verdict_on`` turns them into
the message's ``Verdict``: the chat's reply policy (its own choice, ``/reply``, over ``TELEGRAM_REPLY_POLICY``),
why it is ignored (``ignore_reason``: the reply policy, the allowlists, the bots let in; and an allowed bot past
its answers per chat, ``TRUST_BOT_REPLIES``), what it asks for (``asked``: a command of the bot's, or an answer)
and its author's tier (``members``). The rules themselves (``ignore_reason``, ``asked``, ``decide``) are plain
functions of the facts; only the judge reads the store and, through ``ChatMembers``, Telegram.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.media import Attachment, AttachmentKind, kind_of

from ..chat.commands import COMMANDS
from ..chat.counters import Ignored
from ..chat.policy import Allowlist, ReplyPolicy, should_reply
from .definitions import ChatArgs, telegram_chat

if TYPE_CHECKING:
    from telegram import Message

    from core.trust import Tier

    from ..chat.adapter import ChatAdapter
    from .members import ChatMembers

__all__ = (
    "PHOTO_SIDE",
    "Decision",
    "Judge",
    "MessageFacts",
    "Verdict",
    "asked",
    "attachments_of",
    "decide",
    "ignore_reason",
)

log = logging.getLogger("extensions.telegram")

PHOTO_SIDE = 1600
"""Of the sizes Telegram keeps of a photo, the largest whose longer side is at most this is read (vision
models scale larger pictures down anyway, so more pixels would only cost bytes)."""


class Decision(enum.StrEnum):
    """What to do with a message."""

    IGNORE = "ignore"
    """Not for the bot (policy, allowlist, another bot, no text)."""
    HELP = "help"
    """``/start`` or ``/help``: post the help text."""
    RESET = "reset"
    """``/reset``: forget the conversation."""
    FORGET = "forget"
    """``/forget``: erase the conversation, its full history included."""
    SETTINGS = "settings"
    """``/model``, ``/persona``, ``/language``, ``/settings``, ``/stats``: a settings command."""
    ANSWER = "answer"
    """Send it to the agent."""


@dataclass(frozen=True, kw_only=True)
class MessageFacts:
    """What the decision and the agent need from one incoming message."""

    chat_id: int
    """The chat."""
    thread_id: int | None
    """The forum topic, when the message is in one (a topic is its own conversation)."""
    message_id: int
    """The message, to reply to."""
    private: bool
    """A one-to-one chat with the bot."""
    user_id: int | None
    """The author: the sender, or the chat a message was sent on behalf of (``sender_chat``: the group itself for an
    anonymous admin, a channel; a negative id no user has), never the one account Telegram shows for all of them."""
    user_name: str
    """The author's display name (a chat's title)."""
    username: str
    """The sender's @username without the @, or empty."""
    from_bot: bool
    """Sent by a bot (including this one)."""
    anonymous_admin: bool = False
    """Sent by an administrator of the group as the group itself (Telegram hides who)."""
    forwarded: bool = False
    """A forward of someone's message: its mentions and commands are its author's, not addressed to the bot."""
    forwarded_from_me: bool = False
    """A forward of a message the bot wrote itself (never answered)."""
    mentioned: bool
    """The bot is @mentioned or text-mentioned."""
    replied_to_bot: bool
    """The message replies to one of the bot's messages."""
    command: str | None
    """The command addressed to this bot, lowercase without ``/`` (``/help@this_bot`` -> ``help``)."""
    foreign_command: bool
    """A command addressed to another bot (``/help@other_bot``)."""
    text: str
    """The text, or the caption of a photo or document."""
    attachments: tuple[Attachment, ...] = ()
    """The photo, voice message, audio, document or video it carries (references, not bytes)."""
    business_connection_id: str | None = None
    """The Telegram Business connection it came through (a chat of a business account the bot answers for:
    ``business.py``), None in the bot's own chats."""

    @property
    def args(self) -> ChatArgs:
        """The conversation the message belongs to."""
        return ChatArgs(
            chat_id=self.chat_id, thread_id=self.thread_id, business_connection_id=self.business_connection_id
        )

    @classmethod
    def of(cls, message: Message, *, bot_id: int, bot_username: str) -> MessageFacts:
        """Read the facts of ``message`` as the bot ``bot_id`` / ``@bot_username`` sees them."""
        chat = message.chat
        sender = message.from_user
        text = message.text or message.caption or ""
        entities = message.parse_entities() if message.text else message.parse_caption_entities()
        me = "@" + bot_username.lower()
        mentioned = False
        command: str | None = None
        foreign = False
        for entity, value in entities.items():
            if entity.type == "mention":
                mentioned = mentioned or value.lower() == me
            elif entity.type == "text_mention":
                mentioned = mentioned or (entity.user is not None and entity.user.id == bot_id)
            elif entity.type == "bot_command" and entity.offset == 0:
                name, _, target = value[1:].partition("@")
                if target and target.lower() != bot_username.lower():
                    foreign = True
                else:
                    command = name.lower()
        origin = message.forward_origin
        forwarded = origin is not None
        if forwarded:  # the words are the original author's: they address nobody here
            mentioned, command, foreign = False, None, False
        sender_user = getattr(origin, "sender_user", None)
        thread_id = message.message_thread_id if message.is_topic_message else None
        replied = message.reply_to_message
        replied_to_bot = (
            replied is not None
            and replied.from_user is not None
            and replied.from_user.id == bot_id
            and not (thread_id is not None and replied.message_id == thread_id)  # the topic's first message
        )
        on_behalf = message.sender_chat  # an anonymous admin (the group itself), a channel, a user writing as one
        anonymous_admin = on_behalf is not None and on_behalf.id == chat.id
        if on_behalf is not None:  # the chat is the author, not the one account Telegram shows for all of them
            user_id: int | None = on_behalf.id
            user_name, username = on_behalf.title or on_behalf.full_name or "", on_behalf.username or ""
        else:
            user_id = sender.id if sender is not None else None
            user_name = (sender.full_name if sender is not None else (chat.title or "")) or ""
            username = (sender.username or "") if sender is not None else ""
        return cls(
            chat_id=chat.id,
            thread_id=thread_id,
            message_id=message.message_id,
            private=chat.type == "private",
            user_id=user_id,
            user_name=user_name,
            username=username,
            from_bot=sender is not None and sender.is_bot and not anonymous_admin,
            anonymous_admin=anonymous_admin,
            forwarded=forwarded,
            forwarded_from_me=sender_user is not None and sender_user.id == bot_id,
            mentioned=mentioned,
            replied_to_bot=replied_to_bot,
            command=command,
            foreign_command=foreign,
            text=text,
            attachments=attachments_of(message),
            business_connection_id=message.business_connection_id,
        )


def attachments_of(message: Message) -> tuple[Attachment, ...]:
    """What ``message`` carries besides text, as references the worker fetches with ``getFile``."""
    found: list[Attachment] = []
    if message.photo:
        fitting = [p for p in message.photo if max(p.width, p.height) <= PHOTO_SIDE]
        photo = fitting[-1] if fitting else min(message.photo, key=lambda p: p.width * p.height)
        found.append(
            Attachment(
                kind=AttachmentKind.IMAGE,
                name="photo.jpg",
                mime="image/jpeg",
                size=photo.file_size,
                source="telegram",
                ref=photo.file_id,
            )
        )
    if message.voice is not None:
        voice = message.voice
        found.append(
            Attachment(
                kind=AttachmentKind.AUDIO,
                name="voice.ogg",
                mime=voice.mime_type or "audio/ogg",
                size=voice.file_size,
                source="telegram",
                ref=voice.file_id,
            )
        )
    for media, default in ((message.audio, "audio.mp3"), (message.document, "file"), (message.video, "video.mp4")):
        if media is None:
            continue
        name = getattr(media, "file_name", None) or default
        mime = media.mime_type or ""
        found.append(
            Attachment(
                kind=kind_of(name=name, mime=mime),
                name=name,
                mime=mime,
                size=media.file_size,
                source="telegram",
                ref=media.file_id,
            )
        )
    return tuple(found)


def ignore_reason(
    facts: MessageFacts, *, policy: ReplyPolicy, allowlist: Allowlist, bots: bool = False
) -> Ignored | None:
    """Why the message is ignored, or None when it is for the bot. The rule: a forward of the bot's own message is
    ignored, bots too (unless ``bots``: the operator lets this one in, ``TRUST_BOTS``), then commands for other
    bots and messages without a sender, then the allowlists, then the reply policy (private chats are always
    answered), then messages with nothing to read (no text, no attachment)."""
    if facts.forwarded_from_me:
        return Ignored.OWN
    if facts.from_bot and not bots:
        return Ignored.BOT
    if facts.foreign_command or facts.user_id is None:
        return Ignored.POLICY
    if not allowlist.allows(chat_ids=[facts.chat_id], user_id=facts.user_id):
        return Ignored.ALLOWLIST
    addressed = should_reply(
        policy,
        private=facts.private,
        mentioned=facts.mentioned,
        replied_to_bot=facts.replied_to_bot,
        command=facts.command is not None,
    )
    if not addressed:
        return Ignored.POLICY
    if facts.from_bot and not facts.private and not (facts.mentioned or facts.replied_to_bot):
        return Ignored.POLICY  # another bot in a group is answered only when it addresses this one, whatever the policy
    if not facts.text.strip() and not facts.attachments:  # a command always has text
        return Ignored.EMPTY
    return None


def asked(facts: MessageFacts) -> Decision:
    """What a message for the bot asks for: one of the adapter's own commands, or an answer (a bot's message is
    only ever answered, never taken as a command)."""
    if facts.from_bot:
        return Decision.ANSWER
    if facts.command in ("start", "help"):
        return Decision.HELP
    if facts.command == "reset":
        return Decision.RESET
    if facts.command == "forget":  # the same people as /reset
        return Decision.FORGET
    if facts.command in COMMANDS:
        return Decision.SETTINGS
    return Decision.ANSWER


def decide(facts: MessageFacts, *, policy: ReplyPolicy, allowlist: Allowlist, bots: bool = False) -> Decision:
    """What to do with the message: ignore it (see ``ignore_reason``), or what it asks for (see ``asked``)."""
    if ignore_reason(facts, policy=policy, allowlist=allowlist, bots=bots) is not None:
        return Decision.IGNORE
    return asked(facts)


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    """What becomes of one message."""

    decision: Decision
    """What to do with it (``IGNORE`` when ``ignored`` says why)."""
    ignored: Ignored | None = None
    """Why it gets no answer (the reason the metrics count), or None."""
    tier: Tier | None = None
    """Its author's tier, for a message handed to the agent (``core.trust``)."""


class Judge:
    """Gives each message of one bot its verdict."""

    def __init__(
        self, adapter: ChatAdapter, *, default_policy: ReplyPolicy, allowlist: Allowlist, members: ChatMembers
    ) -> None:
        self.adapter = adapter
        """The chats' own reply policies (``/reply``), the trust rules and the answers to bots per chat."""
        self.default_policy = default_policy
        """When the bot answers in a group that chose nothing (``TELEGRAM_REPLY_POLICY``)."""
        self.allowlist = allowlist
        """``TELEGRAM_ALLOWED_CHATS`` and ``TELEGRAM_ALLOWED_USERS``."""
        self.members = members
        """The tier of the message's author."""

    async def verdict_on(self, facts: MessageFacts) -> Verdict:
        """The verdict on the message of ``facts``: what it asks for, unless it is ignored (``ignore_reason``, or an
        allowed bot's message past ``TRUST_BOT_REPLIES`` answers in its chat), with its author's tier when it goes
        to the agent."""
        adapter = self.adapter
        policy = await self.reply_policy(facts)
        decision = asked(facts)
        bots = facts.from_bot and adapter.trust.allows_bot("telegram", facts.user_id or 0, facts.username)
        reason = ignore_reason(facts, policy=policy, allowlist=self.allowlist, bots=bots)
        if reason is None and facts.from_bot and not adapter.bot_exchanges.take((facts.chat_id, facts.thread_id)):
            log.warning("chat %s: bot %s not answered: TRUST_BOT_REPLIES reached", facts.chat_id, facts.user_id)
            reason = Ignored.BOT_CAP
        if reason is not None:
            return Verdict(decision=Decision.IGNORE, ignored=reason)
        if decision is not Decision.ANSWER:
            return Verdict(decision=decision)
        tier = await self.members.tier_in(
            chat_id=facts.chat_id,
            user_id=facts.user_id,
            private=facts.private,
            is_bot=facts.from_bot,
            anonymous_admin=facts.anonymous_admin,
        )
        return Verdict(decision=decision, tier=tier)

    async def reply_policy(self, facts: MessageFacts) -> ReplyPolicy:
        """When the bot answers in the group of ``facts``: its own choice (``/reply``) over
        ``TELEGRAM_REPLY_POLICY`` (read from the store at each message, so a change applies at once)."""
        if facts.private or facts.from_bot:
            return self.default_policy
        return await self.adapter.reply_policy(telegram_chat, facts.args, self.default_policy)
