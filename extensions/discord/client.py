"""The discord.py side: the client subclass, its slash commands, and turning a message into filter facts.

Imported only when a Discord runtime starts (it needs the ``discord`` extra).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from core.errors import ConfigError, PlatformError
from core.media import Attachment, kind_of

from ..chat.i18n import LANGUAGE_NAMES, localized
from ._lib import app_commands, discord
from .filters import MessageFacts

if TYPE_CHECKING:
    from .runtime import DiscordRuntime

__all__ = (
    "INTENT_HELP",
    "BotClient",
    "attachments_of",
    "facts_of",
    "intents",
    "message_params",
    "message_text",
    "platform_error",
)

log = logging.getLogger("extensions.discord")

INTENT_HELP = (
    "Discord refused the gateway connection with close code 4014 (disallowed intents): this bot reads "
    "messages, so it needs the privileged Message Content intent. Open "
    "https://discord.com/developers/applications, choose the application of DISCORD_TOKEN, go to Bot, turn on "
    "'Message Content Intent' under 'Privileged Gateway Intents', save the changes, and start the bot again."
)
"""What the operator reads when the Message Content intent is not enabled in the developer portal."""


_CLOSE_HINTS = {
    4010: "; the shard setup is invalid: run one gateway process per token",
    4011: "; this bot is in too many servers for one connection and needs sharding",
    4012: "; the gateway API version is not supported: upgrade discord.py",
    4013: "; the intents this bot asks for are invalid: upgrade the bot",
}
"""What to do about the fatal gateway close codes that are not the operator's token or intents."""


def intents() -> discord.Intents:
    """Guilds, guild and DM messages, reactions, and the Message Content intent; no members or presences."""
    wanted = discord.Intents.default()
    wanted.message_content = True
    return wanted


def platform_error(exc: BaseException, what: str) -> PlatformError | ConfigError:
    """Our error for a discord.py or network failure while doing ``what`` (no token ever in the text)."""
    if isinstance(exc, discord.LoginFailure):
        return ConfigError(
            "Discord refused DISCORD_TOKEN (401): copy the bot token again from the developer portal "
            "(your application, Bot, Reset Token) into DISCORD_TOKEN"
        )
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return ConfigError(INTENT_HELP)
    if isinstance(exc, discord.Forbidden):
        return PlatformError(
            f"Discord refused to {what} (403, code {exc.code}: {exc.text}); check the bot's permissions in that "
            "channel (View Channel, Send Messages, Send Messages in Threads, Add Reactions)"
        )
    if isinstance(exc, discord.NotFound):
        return PlatformError(f"Discord could not {what} (404, code {exc.code}: {exc.text}); it may have been deleted")
    if isinstance(exc, discord.HTTPException):
        return PlatformError(f"Discord refused to {what} ({exc.status}, code {exc.code}: {exc.text})")
    if isinstance(exc, TimeoutError):
        return PlatformError(f"Discord did not answer in time to {what}; raise DISCORD_REQUEST_TIMEOUT if it is slow")
    if isinstance(exc, discord.ConnectionClosed):
        if exc.code == 4014:
            return ConfigError(INTENT_HELP)
        if exc.code == 4004:
            return ConfigError(
                "Discord refused DISCORD_TOKEN on the gateway (close code 4004, authentication failed): the token "
                "was reset or revoked; copy the current bot token from the developer portal (your application, "
                "Bot, Reset Token) into DISCORD_TOKEN and start the bot again"
            )
        hint = _CLOSE_HINTS.get(exc.code, "")
        return PlatformError(f"the Discord gateway closed with code {exc.code} ({exc.reason or 'no reason'}){hint}")
    return PlatformError(
        f"could not reach Discord to {what} ({type(exc).__name__}: {exc}); check the network, "
        "DISCORD_API_URL and DISCORD_GATEWAY_URL"
    )


def _author_is_bot(message: discord.Message) -> bool:
    return bool(message.author.bot or message.webhook_id is not None)


def facts_of(message: discord.Message, me: discord.ClientUser) -> MessageFacts:
    """The filter's view of ``message``."""
    channel = message.channel
    guild = message.guild
    guild_id = guild.id if guild is not None else getattr(channel, "guild_id", None)
    parent_id = getattr(channel, "parent_id", None) if isinstance(channel, discord.Thread) else None
    mentioned = me.id in message.raw_mentions
    if not mentioned and guild is not None and guild.me is not None and message.raw_role_mentions:
        own_roles = {role.id for role in guild.me.roles if role.is_bot_managed()}
        mentioned = bool(own_roles.intersection(message.raw_role_mentions))
    replied_to_bot = False
    reference = message.reference
    if reference is not None:
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
    """The input's attributes: who wrote it and which message it is."""
    params = {
        "author": message.author.display_name,
        "author_id": str(message.author.id),
        "message_id": str(message.id),
    }
    if _author_is_bot(message):
        params["author_is_bot"] = "true"
    return params


class BotClient(discord.Client):
    """A discord.py client that hands messages to the runtime and serves /reset and /help."""

    def __init__(self, runtime: DiscordRuntime, **options: Any) -> None:
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False  # a chat bot: no voice, no warning
        super().__init__(intents=intents(), allowed_mentions=discord.AllowedMentions.none(), **options)
        self.runtime = runtime
        self.tree = app_commands.CommandTree(self)
        self.tree.on_error = self._on_tree_error  # type: ignore[method-assign]
        for command in _commands(runtime):
            self.tree.add_command(command)

    async def setup_hook(self) -> None:
        """Register the slash commands with Discord (once per start) when listening, from the runtime's own
        client only (never from a shard's). A failure (refused, rate limited, an answer discord.py cannot read)
        is a warning: the bot answers messages without them."""
        if self.runtime.listen and self.runtime.settings.sync_commands and self.shard_id is None:
            try:
                async with asyncio.timeout(self.runtime.settings.request_timeout):
                    await self.tree.sync()
            except discord.HTTPException as exc:
                log.warning(
                    "could not register the slash commands /reset and /help (the bot runs without them): %s",
                    platform_error(exc, "register commands"),
                )
            except Exception as exc:  # a malformed answer (KeyError, TypeError...), a timeout
                log.warning(
                    "could not register the slash commands /reset and /help (the bot runs without them): "
                    "Discord's answer was not understood (%s: %s); set DISCORD_SYNC_COMMANDS=false to skip "
                    "registering them",
                    type(exc).__name__,
                    exc,
                )

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """A shard waits for its identify slot (``DISCORD_IDENTIFY_INTERVAL``, shared by every gateway)."""
        if not await self.runtime.before_identify(shard_id, initial=initial):
            await super().before_identify_hook(shard_id, initial=initial)

    async def on_ready(self) -> None:
        """A shard's connection is ready (logged: operators follow shards moving between gateways)."""
        if self.shard_id is not None:
            log.info("discord: shard %d of %s ready (%d servers)", self.shard_id, self.shard_count, len(self.guilds))

    async def on_message(self, message: discord.Message) -> None:
        """Every message the gateway delivers; the runtime filters it at once and answers in a task."""
        self.runtime.on_message(message)

    async def _on_tree_error(self, interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
        name = interaction.command.name if interaction.command is not None else "?"
        log.error("slash command /%s failed: %s", name, error, exc_info=error)
        if not interaction.response.is_done():
            try:
                await interaction.response.send_message("Sorry, that did not work. Please try again.", ephemeral=True)
            except discord.HTTPException as exc:
                log.warning("could not answer the failed interaction: %s", exc)


def _commands(runtime: DiscordRuntime) -> list[app_commands.Command[Any, ..., None] | app_commands.Group]:
    """/reset and /forget (offered to everyone; the runtime lets through members with Manage Messages, admin users
    of ``BOT_ADMIN_USERS`` and anyone in a DM), /help, and the
    settings commands (/model, /persona, /language, /reply, /settings, /stats); those in BOT_DISABLED_COMMANDS are left
    out."""
    none = discord.AllowedMentions.none()

    async def reset(interaction: discord.Interaction) -> None:
        text = await runtime.reset_channel(interaction)
        await interaction.response.send_message(text, allowed_mentions=none)

    async def forget(interaction: discord.Interaction) -> None:
        text = await runtime.reset_channel(interaction, erase=True)
        await interaction.response.send_message(text, allowed_mentions=none)

    async def help(interaction: discord.Interaction) -> None:
        text = localized(runtime.settings.help_text, "discord.help", await runtime.language_of(interaction))
        await interaction.response.send_message(text, ephemeral=True, allowed_mentions=none)

    async def answer(interaction: discord.Interaction, command: str, arg: str | None = None) -> None:
        reply = await runtime.settings_command(interaction, command, arg)
        await interaction.response.send_message(reply.text, ephemeral=not reply.changed, allowed_mentions=none)

    @app_commands.describe(name="The model to use in this channel (leave empty to see the choices)")
    async def model(interaction: discord.Interaction, name: str | None = None) -> None:
        await answer(interaction, "model", name)

    async def model_names(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        return [app_commands.Choice(name=m, value=m) for m in runtime.model_choices(current)][:25]

    @app_commands.describe(code="The language of the bot's own messages")
    @app_commands.choices(code=[app_commands.Choice(name=n, value=c) for c, n in LANGUAGE_NAMES.items()])
    async def language(interaction: discord.Interaction, code: str | None = None) -> None:
        await answer(interaction, "language", code)

    @app_commands.describe(policy="When the bot answers in this channel (leave empty to see it)")
    @app_commands.choices(
        policy=[
            app_commands.Choice(name="every message", value="always"),
            app_commands.Choice(name="when mentioned or replied to", value="mention"),
            app_commands.Choice(name="the bot's default", value="default"),
        ]
    )
    async def reply(interaction: discord.Interaction, policy: str | None = None) -> None:
        await answer(interaction, "reply", policy)

    async def persona_show(interaction: discord.Interaction) -> None:
        await answer(interaction, "persona", "show")

    @app_commands.describe(text="Who the bot is in this channel, for example: You are a pirate. Answer in rhymes.")
    async def persona_set(interaction: discord.Interaction, text: str) -> None:
        await answer(interaction, "persona", f"set {text}")

    async def persona_reset(interaction: discord.Interaction) -> None:
        await answer(interaction, "persona", "reset")

    async def settings(interaction: discord.Interaction) -> None:
        await answer(interaction, "settings")

    async def stats(interaction: discord.Interaction) -> None:
        await answer(interaction, "stats")

    reset_command: app_commands.Command[Any, ..., None] = app_commands.Command(
        name="reset", description="Forget the bot's conversation in this channel", callback=reset
    )
    forget_command: app_commands.Command[Any, ..., None] = app_commands.Command(
        name="forget",
        description="Erase the bot's conversation in this channel: history, summary, facts and state",
        callback=forget,
    )
    model_command: app_commands.Command[Any, ..., None] = app_commands.Command(
        name="model", description="Show or choose the model of this channel", callback=model
    )
    model_command.autocomplete("name")(model_names)
    persona = app_commands.Group(name="persona", description="The bot's persona in this channel")
    persona.add_command(app_commands.Command(name="show", description="Show the persona", callback=persona_show))
    persona.add_command(app_commands.Command(name="set", description="Give a new persona", callback=persona_set))
    persona.add_command(
        app_commands.Command(name="reset", description="Back to the bot's own persona", callback=persona_reset)
    )
    commands: dict[str, app_commands.Command[Any, ..., None] | app_commands.Group] = {
        "reset": reset_command,
        "forget": forget_command,
        "help": app_commands.Command(name="help", description="How to talk to the bot", callback=help),
        "model": model_command,
        "persona": persona,
        "language": app_commands.Command(
            name="language", description="Show or choose the language of the bot's messages", callback=language
        ),
        "reply": app_commands.Command(
            name="reply", description="Show or choose when the bot answers in this channel", callback=reply
        ),
        "settings": app_commands.Command(name="settings", description="This channel's settings", callback=settings),
        "stats": app_commands.Command(name="stats", description="Your usage and this channel's", callback=stats),
    }
    disabled = runtime.disabled_commands()
    return [command for name, command in commands.items() if name not in disabled]
