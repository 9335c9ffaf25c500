"""The slash commands and who may use them: ``/reset`` and ``/forget`` (members with Manage Messages, the admin
users of ``BOT_ADMIN_USERS``, anyone in a DM), ``/help``, and the settings commands of ``extensions.chat.commands``
(``/model``, ``/persona``, ``/language``, ``/reply``, ``/timezone``, ``/settings``, ``/stats``: members with Manage
Server or Manage Channels may change settings), ``/reminders`` (the channel's reminders with a Cancel button
each, or ``/reminders cancel:<id>``, the ids offered as you type) and ``/memory`` (what the bot keeps about the
caller, ``/memory delete:<number or all>``; always an ephemeral answer, seen by the caller alone), and ``/stop``
(anyone: the answer being written in the channel stops). Every answer is in the channel's language
(``extensions.chat.i18n``); those in ``BOT_DISABLED_COMMANDS`` are not offered."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..chat.adapter import ChatAdapter
from ..chat.commands import STOP_BUTTON, Answer, Caller, ChatCommands, all_zones, zone_named
from ..chat.i18n import LANGUAGE_NAMES, localized, say
from ..chat.reminders import CANCEL_PREFIX, describe, schedules_or_none
from ._lib import app_commands, discord
from .definitions import discord_channel
from .filters import BotHops, Verdict, decide
from .messages import interaction_args, interaction_facts
from .settings import DiscordSettings

if TYPE_CHECKING:
    from .client import SlashCommand

__all__ = ("BUTTON_PREFIX", "FORGET_DONE", "RESET_REFUSED", "SlashCommands", "cancel_buttons")

log = logging.getLogger("extensions.discord")

FORGET_DONE = say("forget_done")
"""What ``/forget`` answers (in English; each channel reads its language)."""
BUTTON_PREFIX = "cfg:"
"""The custom id of a button under a command's answer starts with this (``cfg:reminders:cancel:<id>``)."""
RESET_REFUSED = say("discord.reset_refused")
"""The answer to a /reset by a server member without Manage Messages (and not in ``BOT_ADMIN_USERS``), in English."""


def cancel_buttons(answer: Answer) -> discord.ui.View | None:
    """The Cancel buttons of a ``/reminders`` answer (None when it offers none). Its presses reach
    ``SlashCommands.on_button`` through the client's component hook, whichever process receives them."""
    choices = [(label, value) for label, value in answer.choices if value.startswith(CANCEL_PREFIX)][:25]
    if not choices:
        return None
    view = discord.ui.View(timeout=None)
    for label, value in choices:
        view.add_item(
            discord.ui.Button(style=discord.ButtonStyle.secondary, label=label[:80], custom_id=BUTTON_PREFIX + value)
        )
    return view


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

    async def settings_command(
        self, interaction: discord.Interaction, command: str, arg: str | None, *, choice: str | None = None
    ) -> Answer:
        """``/model``, ``/persona``, ``/language``, ``/settings``, ``/stats``, ``/reminders`` in the interaction's
        channel (or, with ``choice``, a button's choice). Server members with Manage Server or Manage Channels (or
        ``BOT_ADMIN_USERS``) may change settings; in a DM, its user."""
        agent, channel_id = self.adapter.agent, interaction.channel_id
        if agent is None or self._client() is None or channel_id is None:
            return Answer(text=say("not_ready"))
        commands, cid = ChatCommands.of(
            agent, discord_channel, interaction_args(interaction), quote=discord.utils.escape_markdown
        )
        if not self.serves(interaction):
            return Answer(text=say("not_served", await commands.language(cid)))
        permissions = interaction.permissions
        manages = interaction.guild_id is None or permissions.manage_guild or permissions.manage_channels
        caller = Caller(user=f"discord:{interaction.user.id}", manages_chat=manages)
        if choice is not None:
            return await commands.choose(cid, caller, choice)
        return await commands.run(command, cid, caller, arg)

    def zone_choices(self, typed: str) -> list[str]:
        """Time zones whose name contains what the user typed so far (autocomplete of ``/timezone``)."""
        typed = typed.strip().lower()
        exact = zone_named(typed) if typed else None
        found = sorted(name for low, name in all_zones().items() if typed in low)
        return ([exact] if exact else []) + [z for z in found if z != exact]

    async def reminder_choices(self, interaction: discord.Interaction, typed: str) -> list[tuple[str, str]]:
        """The channel's reminders whose line contains what the user typed (autocomplete of ``/reminders
        cancel``): ``(line, id)``."""
        agent = self.adapter.agent
        schedules = schedules_or_none(agent) if agent is not None else None
        if agent is None or schedules is None or interaction.channel_id is None:
            return []
        cid = agent.context_id(discord_channel, interaction_args(interaction))
        language = await self.language(interaction)
        lines = [(describe(s, lang=language), s.id) for s in await schedules.by_conversation(cid)]
        return [(line, sid) for line, sid in lines if typed.lower() in line.lower()]

    async def on_button(self, interaction: discord.Interaction) -> bool:
        """A button under a command's answer was pressed (``cfg:...``; False for any other, left to its owner):
        the choice is made if the presser may (a reminder's creator, a member with Manage Server or Manage
        Channels, ``BOT_ADMIN_USERS``), the answer shown in place of the message, or a refusal only they see."""
        data: Any = interaction.data or {}
        custom_id = str(data.get("custom_id", ""))
        if not custom_id.startswith(BUTTON_PREFIX):
            return False
        reply = await self.settings_command(interaction, "", None, choice=custom_id.removeprefix(BUTTON_PREFIX))
        none = discord.AllowedMentions.none()
        if reply.changed:
            view = cancel_buttons(reply)
            await interaction.response.edit_message(content=reply.text, view=view, allowed_mentions=none)
            if view is not None:
                view.stop()
        else:
            await interaction.response.send_message(reply.text, ephemeral=True, allowed_mentions=none)
        return True

    async def on_stop_button(self, interaction: discord.Interaction) -> bool:
        """The Stop button under an answer being written was pressed (False for any other button): ``/stop`` in
        the channel where it was pressed, answered to the presser alone."""
        data: Any = interaction.data or {}
        if str(data.get("custom_id", "")) != STOP_BUTTON:
            return False
        reply = await self.settings_command(interaction, "stop", None)
        await interaction.response.send_message(
            reply.text, ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
        )
        return True

    async def command_failed(self, interaction: discord.Interaction) -> str:
        """What a user reads when their slash command failed."""
        return say("command_failed", await self.language(interaction))

    def build(self) -> list[SlashCommand]:
        """The slash commands, less those in BOT_DISABLED_COMMANDS (for one discord.py client)."""
        return _commands(self)


def _commands(served: SlashCommands) -> list[SlashCommand]:
    """/reset and /forget (offered to everyone; ``SlashCommands.reset_channel`` lets through members with Manage
    Messages, admin users of ``BOT_ADMIN_USERS`` and anyone in a DM), /help, and the settings commands (/model,
    /persona, /language, /reply, /timezone, /voice, /busy, /quiet, /settings, /stats, /reminders, /memory,
    /knowledge); those in BOT_DISABLED_COMMANDS are left out."""
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
        view = cancel_buttons(reply)
        ephemeral = reply.personal or not reply.changed  # what the bot keeps about someone: for them alone
        if view is None:
            await interaction.response.send_message(reply.text, ephemeral=ephemeral, allowed_mentions=none)
            return
        await interaction.response.send_message(reply.text, ephemeral=ephemeral, allowed_mentions=none, view=view)
        view.stop()  # the presses go to on_button (the client's component hook), whichever process receives them

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

    @app_commands.describe(choice="Whether the bot's answers here are also spoken (leave empty to see it)")
    @app_commands.choices(
        choice=[
            app_commands.Choice(name="every answer", value="on"),
            app_commands.Choice(name="never", value="off"),
            app_commands.Choice(name="answers to voice messages (the default)", value="default"),
        ]
    )
    async def voice(interaction: discord.Interaction, choice: str | None = None) -> None:
        await answer(interaction, "voice", choice)

    @app_commands.describe(policy="What a message sent while the bot answers here does (leave empty to see it)")
    @app_commands.choices(
        policy=[
            app_commands.Choice(name="steer: the answer being written reads it", value="steer"),
            app_commands.Choice(name="collect: the next answer takes them all", value="collect"),
            app_commands.Choice(name="queue: one answer each, in order", value="queue"),
            app_commands.Choice(name="interrupt: stop the answer and start again", value="interrupt"),
            app_commands.Choice(name="the bot's default", value="default"),
        ]
    )
    async def busy(interaction: discord.Interaction, policy: str | None = None) -> None:
        await answer(interaction, "busy", policy)

    @app_commands.describe(milliseconds="Messages sent within this many ms get one answer: 0 to 10000, or default")
    async def quiet(interaction: discord.Interaction, milliseconds: str | None = None) -> None:
        await answer(interaction, "quiet", milliseconds)

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

    @app_commands.describe(zone="An IANA time zone such as Europe/Paris (leave empty to see this channel's)")
    async def timezone(interaction: discord.Interaction, zone: str | None = None) -> None:
        await answer(interaction, "timezone", zone)

    async def zone_names(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        return [app_commands.Choice(name=z, value=z) for z in served.zone_choices(current)][:25]

    @app_commands.describe(cancel="The id of a reminder to cancel (leave empty to list this channel's)")
    async def reminders(interaction: discord.Interaction, cancel: str | None = None) -> None:
        await answer(interaction, "reminders", f"cancel {cancel}" if cancel else None)

    async def reminder_ids(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        found = await served.reminder_choices(interaction, current)
        return [app_commands.Choice(name=line[:100], value=sid) for line, sid in found][:25]

    async def stop(interaction: discord.Interaction) -> None:
        await answer(interaction, "stop")

    @app_commands.describe(delete="A number from the list to delete that item, or all to delete all of it")
    async def memory(interaction: discord.Interaction, delete: str | None = None) -> None:
        await answer(interaction, "memory", f"delete {delete}" if delete else None)

    async def knowledge_show(interaction: discord.Interaction) -> None:
        await answer(interaction, "knowledge")

    @app_commands.describe(collections="The collections to search here, separated by spaces or commas")
    async def knowledge_use(interaction: discord.Interaction, collections: str) -> None:
        await answer(interaction, "knowledge", f"use {collections}")

    async def knowledge_all(interaction: discord.Interaction) -> None:
        await answer(interaction, "knowledge", "all")

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
    timezone_command: app_commands.Command[Any, ..., None] = app_commands.Command(
        name="timezone",
        description="Show or choose this channel's time zone (reminders are set in it)",
        callback=timezone,
    )
    timezone_command.autocomplete("zone")(zone_names)
    reminders_command: app_commands.Command[Any, ..., None] = app_commands.Command(
        name="reminders", description="This channel's reminders and scheduled messages; cancel one", callback=reminders
    )
    reminders_command.autocomplete("cancel")(reminder_ids)
    persona = app_commands.Group(name="persona", description="The bot's persona in this channel")
    persona.add_command(app_commands.Command(name="show", description="Show the persona", callback=persona_show))
    persona.add_command(app_commands.Command(name="set", description="Give a new persona", callback=persona_set))
    persona.add_command(
        app_commands.Command(name="reset", description="Back to the bot's own persona", callback=persona_reset)
    )
    knowledge = app_commands.Group(name="knowledge", description="Which document collections the bot searches here")
    knowledge.add_command(
        app_commands.Command(
            name="show", description="What this channel searches, and the collections", callback=knowledge_show
        )
    )
    knowledge.add_command(
        app_commands.Command(name="use", description="Search these collections only here", callback=knowledge_use)
    )
    knowledge.add_command(
        app_commands.Command(name="all", description="Lift the limit: the bot's default again", callback=knowledge_all)
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
        "timezone": timezone_command,
        "voice": app_commands.Command(
            name="voice", description="Show or choose whether the bot's answers here are spoken", callback=voice
        ),
        "busy": app_commands.Command(
            name="busy", description="Show or choose what a message sent while the bot answers does", callback=busy
        ),
        "quiet": app_commands.Command(
            name="quiet",
            description="Show or choose the quiet window: messages within it get one answer",
            callback=quiet,
        ),
        "settings": app_commands.Command(name="settings", description="This channel's settings", callback=settings),
        "stats": app_commands.Command(name="stats", description="Your usage and this channel's", callback=stats),
        "reminders": reminders_command,
        "stop": app_commands.Command(
            name="stop", description="Stop the answer I am writing in this channel", callback=stop
        ),
        "memory": app_commands.Command(
            name="memory",
            description="What the bot keeps about you (facts, reminders, usage); delete it",
            callback=memory,
        ),
        "knowledge": knowledge,
    }
    disabled = served.adapter.disabled_commands()
    return [command for name, command in commands.items() if name not in disabled]
