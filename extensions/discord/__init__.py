"""Talking to the bot in Discord: server channels, threads and DMs, through discord.py.

``discord_extension(settings)`` brings the ``discord:channel`` context (one per channel, thread or DM), the
``discord:message`` input and output, the ``discord:react`` action, the /reset and /help slash commands
and the client's lifecycle as a service. Importing this package needs no discord.py; building the
runtime does (``pip install daydreams-bots[discord]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.definitions import Extension, extension, service
from core.media import media_posters

from .definitions import (
    POLL,
    POLL_ANSWER,
    REPLY_TO,
    ChannelArgs,
    PollArgs,
    ReactArgs,
    bind_runtime,
    discord_channel,
    discord_message_input,
    discord_message_output,
    discord_poll_answer_input,
    discord_poll_output,
    discord_react,
    get_runtime,
)
from .settings import DiscordSettings

if TYPE_CHECKING:
    from core import Setup

    from ..chat.answer_book import AnswerBook
    from ..chat.trust import TrustRules
    from .runtime import DiscordRuntime

__all__ = (
    "POLL",
    "POLL_ANSWER",
    "REPLY_TO",
    "ChannelArgs",
    "DiscordSettings",
    "PollArgs",
    "ReactArgs",
    "discord_channel",
    "discord_extension",
    "discord_message_input",
    "discord_message_output",
    "discord_poll_answer_input",
    "discord_poll_output",
    "discord_react",
    "discord_runtime",
    "get_runtime",
)


def discord_runtime(settings: DiscordSettings, *, listen: bool = True) -> DiscordRuntime:
    """Build the discord.py side on its own (``discord_extension`` does this for you)."""
    try:
        from .runtime import DiscordRuntime
    except ImportError as exc:  # the optional extra is missing
        from core.errors import ConfigError

        raise ConfigError(
            "the Discord adapter needs discord.py: pip install 'daydreams-bots[discord]', or leave DISCORD_TOKEN unset"
        ) from exc
    return DiscordRuntime(settings, listen=listen)


def discord_extension(
    settings: DiscordSettings,
    *,
    listen: bool = True,
    trust: TrustRules | None = None,
    answers: AnswerBook | None = None,
) -> Extension:
    """The Discord extension. ``listen=False`` (queue workers) logs in for REST only: no gateway, no
    message listener, no slash-command registration; replies and reactions still work. ``trust``: how authors get
    their tier and which bots are answered (``TRUST_*``). ``answers``: where the polls the bot posts are noted, so
    that a vote finds its conversation (default: in this process; a fleet gives ``core.fleet.RedisAnswerBook``)."""
    runtime = discord_runtime(settings, listen=listen)
    if answers is not None:
        runtime.poster.polls.store = answers
    if trust is not None:
        runtime.set_trust(trust)

    def install(agent: Setup) -> None:
        bind_runtime(agent, runtime)
        media_posters(agent).add(discord_channel.type, runtime.poster, reply_output=discord_message_output.type)
        for channel, pins in settings.channel_settings.items():  # DISCORD_CHANNEL_SETTINGS
            agent.pin_settings(f"discord:channel:{channel}", pins)

    return extension(
        name="discord",
        install=install,
        contexts=[discord_channel],
        inputs=[discord_message_input, discord_poll_answer_input],
        outputs=[discord_message_output, discord_poll_output],
        actions=[discord_react],
        services=[service(name="discord", start=runtime.start, stop=runtime.stop)],
    )
