"""What Discord delivers, read as plain facts: a message (or a slash command's interaction) as the filter's
``MessageFacts`` and the conversation's ``ChannelArgs``, its text as the model reads it, its files as references."""

from __future__ import annotations

from core.media import Attachment, kind_of
from core.trust import Tier

from ..chat.trust import TrustRules
from ._lib import discord
from .definitions import ChannelArgs
from .filters import MessageFacts

__all__ = (
    "args_of",
    "attachments_of",
    "facts_of",
    "interaction_args",
    "interaction_facts",
    "message_params",
    "message_text",
    "outside_quotes",
    "tier_of",
)


def _author_is_bot(message: discord.Message) -> bool:
    return bool(message.author.bot or message.webhook_id is not None)


def facts_of(message: discord.Message, me: discord.ClientUser) -> MessageFacts:
    """The filter's view of ``message``."""
    channel = message.channel
    guild = message.guild
    guild_id = guild.id if guild is not None else getattr(channel, "guild_id", None)
    parent_id = getattr(channel, "parent_id", None) if isinstance(channel, discord.Thread) else None
    said = outside_quotes(message.content)  # a mention quoted from someone else's message addresses nobody
    mentioned = f"<@{me.id}>" in said or f"<@!{me.id}>" in said
    if not mentioned and guild is not None and guild.me is not None and message.raw_role_mentions:
        own_roles = {role.id for role in guild.me.roles if role.is_bot_managed()}
        mentioned = any(f"<@&{role}>" in said for role in own_roles)
    replied_to_bot = False
    reference = message.reference
    # a forward (its content in ``message_snapshots``) replies to nobody, even one of the bot's own messages
    if reference is not None and reference.type is not discord.MessageReferenceType.forward:
        resolved = reference.resolved or reference.cached_message
        replied_to_bot = isinstance(resolved, discord.Message) and resolved.author.id == me.id
    return MessageFacts(
        author_id=message.author.id,
        author_is_bot=_author_is_bot(message),
        own=message.author.id == me.id,
        channel_id=channel.id,
        parent_id=parent_id,
        guild_id=guild_id,
        mentioned=mentioned,
        replied_to_bot=replied_to_bot,
    )


def outside_quotes(content: str) -> str:
    """``content`` without its quoted lines (``> ...``, and everything after a ``>>> ``)."""
    kept = []
    for line in content.split("\n"):
        if line.startswith(">>> "):
            break
        if not line.startswith("> "):
            kept.append(line)
    return "\n".join(kept)


def tier_of(message: discord.Message, rules: TrustRules) -> Tier:
    """The tier of ``message``'s author (``TRUST_*``): in a server, a member holding one of
    ``TRUST_ADMIN_PERMISSIONS`` in the channel, or one of ``TRUST_ADMIN_ROLES``, is an admin; roles also decide
    the members (``TRUST_MEMBER_ROLES``), and the date they joined the guests (``TRUST_GUEST_DAYS``). Read from
    what the gateway sent: no request."""
    author = message.author
    roles: list[str] = []
    admin = False
    joined: float | None = None
    if isinstance(author, discord.Member):  # (only what the rules read: this runs at every message)
        if rules.guest_days and author.joined_at is not None:
            joined = (discord.utils.utcnow() - author.joined_at).total_seconds() / 86400
        if rules.admin_roles or rules.member_roles:
            for role in author.roles:
                roles += (str(role.id), role.name)
        channel = message.channel
        if rules.chat_admins and isinstance(channel, discord.abc.GuildChannel | discord.Thread):
            permissions = channel.permissions_for(author)
            admin = any(getattr(permissions, name, False) is True for name in rules.admin_permissions)
    return rules.tier(
        "discord", author.id, is_bot=_author_is_bot(message), admin=admin, roles=roles, joined_days=joined
    )


def args_of(facts: MessageFacts) -> ChannelArgs:
    """The conversation of a message (a thread's with its channel)."""
    return ChannelArgs(channel_id=facts.channel_id, guild_id=facts.guild_id, parent_id=facts.parent_id)


def interaction_facts(interaction: discord.Interaction) -> MessageFacts:
    """A slash command read as a message by a person that addresses the bot, for the filter's allowlists."""
    channel, channel_id = interaction.channel, interaction.channel_id
    assert channel_id is not None
    return MessageFacts(
        author_id=interaction.user.id,
        author_is_bot=False,
        own=False,
        channel_id=channel_id,
        parent_id=getattr(channel, "parent_id", None) if isinstance(channel, discord.Thread) else None,
        guild_id=interaction.guild_id,
        mentioned=True,
    )


def interaction_args(interaction: discord.Interaction) -> ChannelArgs:
    """The conversation of an interaction's channel (a thread's with its channel)."""
    return args_of(interaction_facts(interaction))


def message_text(message: discord.Message, me: discord.ClientUser) -> str:
    """What the model reads: mentions shown as names (``@Ann``, ``#general``), the bot's own mention
    removed (attachments travel apart, see ``attachments_of``)."""
    text = message.clean_content
    if me.id in message.raw_mentions:
        own = message.guild.get_member(me.id) if message.guild is not None else None
        named = own or discord.utils.get(message.mentions, id=me.id)
        if named is not None:
            text = text.replace(f"@{named.display_name}", "")
    return text.strip()


def attachments_of(message: discord.Message) -> list[Attachment]:
    """The files of ``message`` as references (their CDN URL), fetched by whoever runs the channel."""
    found = []
    for item in message.attachments:
        mime = (item.content_type or "").split(";")[0].strip()
        found.append(
            Attachment(
                kind=kind_of(name=item.filename, mime=mime),
                name=item.filename,
                mime=mime,
                size=item.size,
                source="discord",
                ref=item.url,
            )
        )
    return found


def message_params(message: discord.Message) -> dict[str, str]:
    """The input's attributes: who wrote it and which message it is. A webhook's message (any name it gives
    itself, any integration behind it) is the channel's own: its author is the channel (a snowflake no user has), so
    its facts, usage and limits are that channel's, never one account shared by every webhook that posts."""
    author = str(message.channel.id) if message.webhook_id is not None else str(message.author.id)
    params = {
        "author": message.author.display_name,
        "author_id": author,
        "message_id": str(message.id),
    }
    if _author_is_bot(message):
        params["author_is_bot"] = "true"
    return params
