"""The slash commands and who may use them: ``/reset`` and ``/forget`` (members with Manage Messages, the admin
users of ``BOT_ADMIN_USERS``, anyone in a DM), ``/help``, and the settings commands of ``extensions.chat.commands``
(``/model``, ``/persona``, ``/language``, ``/reply``, ``/settings``, ``/stats``: members with Manage Server or Manage
Channels may change settings). Every answer is in the channel's language (``extensions.chat.i18n``); those in
``BOT_DISABLED_COMMANDS`` are not offered."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..chat.adapter import ChatAdapter
from ..chat.commands import Answer, Caller, ChatCommands
from ..chat.i18n import LANGUAGE_NAMES, localized, say
from ._lib import app_commands, discord
from .definitions import discord_channel
from .filters import BotHops, Verdict, decide
from .messages import interaction_args, interaction_facts
from .settings import DiscordSettings

if TYPE_CHECKING:
    from .client import SlashCommand

__all__ = ("FORGET_DONE", "RESET_REFUSED", "SlashCommands")

log = logging.getLogger("extensions.discord")

FORGET_DONE = say("forget_done")
"""What ``/forget`` answers (in English; each channel reads its language)."""
RESET_REFUSED = say("discord.reset_refused")
"""The answer to a /reset by a server member without Manage Messages (and not in ``BOT_ADMIN_USERS``), in English."""


class SlashCommands:
    """Answers the slash commands of one bot; ``build()`` gives them to each discord.py client."""

    def __init__(
        self,
        adapter: ChatAdapter,
        settings: DiscordSettings,
        *,
        hops: BotHops,
        client: Callable[[], discord.Client | None],
    ) -> None:
        self.adapter = adapter
        """The shared part of the adapter: the agent served, the channels' languages, the disabled commands."""
        self.settings = settings
        """The ``DISCORD_*`` settings (filters and allowlists, the help text)."""
        self.hops = hops
        """The listener's count of bot messages answered in a row (the filter reads it)."""
        self._client = client

    def serves(self, interaction: discord.Interaction) -> bool:
        """True when the bot talks in the interaction's channel (filters and allowlists, any reply policy)."""
        verdict = decide(interaction_facts(interaction), self.settings, self.hops)
        return verdict is Verdict.ANSWER or verdict is Verdict.POLICY

    async def language(self, interaction: discord.Interaction) -> str | None:
        """The language of the bot's messages in the interaction's channel (None when it cannot be read)."""
        if interaction.channel_id is None:
            return None
        return await self.adapter.language(discord_channel, interaction_args(interaction))

    async def reset_channel(self, interaction: discord.Interaction, *, erase: bool = False) -> str:
        """``/reset``: forget the conversation of the interaction's channel, if the bot serves it; with
        ``erase`` (``/forget``), delete its full history and summary too."""
        agent, client, channel_id = self.adapter.agent, self._client(), interaction.channel_id
        if agent is None or client is None or client.user is None or channel_id is None:
            return say("not_ready")
        language = await self.language(interaction)
        if not self.serves(interaction):
            return say("nothing_to_forget", language)
        if not (
            interaction.guild_id is None  # a DM
            or agent.is_admin(f"discord:{interaction.user.id}")
            or interaction.permissions.manage_messages
        ):
            log.info(
                "discord: /%s by user %s in %s refused", "forget" if erase else "reset", interaction.user.id, channel_id
            )
            return say("discord.reset_refused", language)
        args = {"channel_id": channel_id, "guild_id": interaction.guild_id}
        if erase:
            await agent.forget(discord_channel, args)
            return say("forget_done", language)
        await agent.reset(discord_channel, args)
        return say("reset_done", language)

    def model_choices(self, typed: str) -> list[str]:
        """The models of ``LLM_ALLOWED_MODELS`` that contain what the user typed so far (autocomplete)."""
        agent = self.adapter.agent
        allowed = agent.chat_policy.allowed_models if agent is not None else ()
        return [m for m in allowed if typed.lower() in m.lower()]

    async def settings_command(self, interaction: discord.Interaction, command: str, arg: str | None) -> Answer:
        """``/model``, ``/persona``, ``/language``, ``/settings``, ``/stats`` in the interaction's channel. Server
        members with Manage Server or Manage Channels (or ``BOT_ADMIN_USERS``) may change settings; in a DM,
        its user."""
        agent, channel_id = self.adapter.agent, interaction.channel_id
        if agent is None or self._client() is None or channel_id is None:
            return Answer(text=say("not_ready"))
        commands, cid = ChatCommands.of(agent, discord_channel, interaction_args(interaction))
        if not self.serves(interaction):
            return Answer(text=say("not_served", await commands.language(cid)))
        permissions = interaction.permissions
        manages = interaction.guild_id is None or permissions.manage_guild or permissions.manage_channels
        caller = Caller(user=f"discord:{interaction.user.id}", manages_chat=manages)
        return await commands.run(command, cid, caller, arg)

    async def command_failed(self, interaction: discord.Interaction) -> str:
        """What a user reads when their slash command failed."""
        return say("command_failed", await self.language(interaction))

    def build(self) -> list[SlashCommand]:
        """The slash commands, less those in BOT_DISABLED_COMMANDS (for one discord.py client)."""
        return _commands(self)


def _commands(served: SlashCommands) -> list[SlashCommand]:
    """/reset and /forget (offered to everyone; ``SlashCommands.reset_channel`` lets through members with Manage
    Messages, admin users of ``BOT_ADMIN_USERS`` and anyone in a DM), /help, and the settings commands (/model,
    /persona, /language, /reply, /settings, /stats); those in BOT_DISABLED_COMMANDS are left out."""
    none = discord.AllowedMentions.none()

    async def reset(interaction: discord.Interaction) -> None:
        text = await served.reset_channel(interaction)
        await interaction.response.send_message(text, allowed_mentions=none)

    async def forget(interaction: discord.Interaction) -> None:
        text = await served.reset_channel(interaction, erase=True)
        await interaction.response.send_message(text, allowed_mentions=none)

    async def help(interaction: discord.Interaction) -> None:
        text = localized(served.settings.help_text, "discord.help", await served.language(interaction))
        await interaction.response.send_message(text, ephemeral=True, allowed_mentions=none)

    async def answer(interaction: discord.Interaction, command: str, arg: str | None = None) -> None:
        reply = await served.settings_command(interaction, command, arg)
        await interaction.response.send_message(reply.text, ephemeral=not reply.changed, allowed_mentions=none)

    @app_commands.describe(name="The model to use in this channel (leave empty to see the choices)")
    async def model(interaction: discord.Interaction, name: str | None = None) -> None:
        await answer(interaction, "model", name)

    async def model_names(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        return [app_commands.Choice(name=m, value=m) for m in served.model_choices(current)][:25]

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
    commands: dict[str, SlashCommand] = {
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
    disabled = served.adapter.disabled_commands()
    return [command for name, command in commands.items() if name not in disabled]
