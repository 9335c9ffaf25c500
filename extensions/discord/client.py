"""The discord.py client of the bot and its events: messages, shards becoming ready, IDENTIFY slots, slash
commands registered and failing. What it does with them is given as ``ClientHooks`` (callbacks), so the client
knows nothing above it.

Imported only when a Discord runtime starts (it needs the ``discord`` extra).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp

from ._lib import app_commands, discord
from .platform_errors import platform_error

__all__ = ("BotClient", "ClientHooks", "SlashCommand", "intents", "rate_limit_trace")

log = logging.getLogger("extensions.discord")

SlashCommand = app_commands.Command[Any, ..., None] | app_commands.Group
"""A slash command (or a group of them) the client serves."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClientHooks:
    """What a client does with what Discord tells it."""

    on_message: Callable[[discord.Message], None]
    """Every message the gateway delivers (decided at once; answered in a task the callee owns)."""
    before_identify: Callable[[int | None], Awaitable[bool]]
    """Awaited before a shard identifies; False: discord.py's own wait applies."""
    commands: Sequence[SlashCommand]
    """The slash commands to serve."""
    command_failed: Callable[[discord.Interaction], Awaitable[str]]
    """What a user reads when their slash command failed (in their channel's language)."""
    sync_commands: bool
    """Register the slash commands with Discord at start (``DISCORD_SYNC_COMMANDS``, and listening)."""
    request_timeout: float
    """Seconds a REST call may take (``DISCORD_REQUEST_TIMEOUT``)."""
    on_component: Callable[[discord.Interaction], Awaitable[None]] | None = None
    """A button under one of the bot's messages was pressed (an approval's)."""
    on_removed: Callable[[int, list[int]], Awaitable[None]] | None = None
    """The bot was removed from a server (kicked, banned, or the server deleted): its id and the ids of the
    channels and threads the bot knew in it."""
    on_deleted: Callable[[int, int | None, list[int]], Awaitable[None]] | None = None
    """Messages were deleted (by their author, a moderator, or in bulk): the channel, its server (None in a DM)
    and the messages' ids."""
    on_reaction: Callable[[discord.RawReactionActionEvent], Awaitable[None]] | None = None
    """Someone put a reaction on a message (feedback, when the message is one of the bot's answers)."""
    on_poll_vote: Callable[[discord.RawPollVoteActionEvent], Awaitable[None]] | None = None
    """Someone voted in a poll (an input, when the poll is one of the bot's)."""


def intents() -> discord.Intents:
    """Guilds, guild and DM messages, reactions, and the Message Content intent; no members or presences."""
    wanted = discord.Intents.default()
    wanted.message_content = True
    return wanted


def rate_limit_trace(on_429: Callable[[], None]) -> aiohttp.TraceConfig:
    """discord.py's ``http_trace`` hook: ``on_429()`` for every REST answer of 429 (discord.py waits and retries
    by itself)."""

    async def on_request_end(
        session: aiohttp.ClientSession, context: Any, params: aiohttp.TraceRequestEndParams
    ) -> None:
        if params.response.status == 429:
            on_429()

    trace = aiohttp.TraceConfig()
    trace.on_request_end.append(on_request_end)
    return trace


class BotClient(discord.Client):
    """A discord.py client that hands messages and slash commands to its ``hooks``."""

    def __init__(self, hooks: ClientHooks, **options: Any) -> None:
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False  # a chat bot: no voice, no warning
        super().__init__(intents=intents(), allowed_mentions=discord.AllowedMentions.none(), **options)
        self.hooks = hooks
        self.tree = app_commands.CommandTree(self)
        self.tree.on_error = self._on_tree_error  # type: ignore[method-assign]
        for command in hooks.commands:
            self.tree.add_command(command)

    async def setup_hook(self) -> None:
        """Register the slash commands with Discord (once per start) when asked, from the main client only
        (never from a shard's). A failure (refused, rate limited, an answer discord.py cannot read) is a
        warning: the bot answers messages without them."""
        if self.hooks.sync_commands and self.shard_id is None:
            try:
                async with asyncio.timeout(self.hooks.request_timeout):
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

    async def close(self) -> None:
        """Close the connection, and first stop discord.py's wait for the servers after READY: closing while it
        waits (a shard handed over or the gateway stopping right after connecting) let it dispatch ``ready`` to a
        client whose loop is gone (an AttributeError and a coroutine never awaited in the log)."""
        waiting = self._connection._ready_task  # discord.py keeps no public handle on it
        if waiting is not None and not waiting.done():
            waiting.cancel()
            with contextlib.suppress(BaseException):
                await waiting
        await super().close()

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """A shard waits for its identify slot (``DISCORD_IDENTIFY_INTERVAL``, shared by every gateway)."""
        if not await self.hooks.before_identify(shard_id):
            await super().before_identify_hook(shard_id, initial=initial)

    async def on_ready(self) -> None:
        """A shard's connection is ready (logged: operators follow shards moving between gateways)."""
        if self.shard_id is not None:
            log.info("discord: shard %d of %s ready (%d servers)", self.shard_id, self.shard_count, len(self.guilds))

    async def on_message(self, message: discord.Message) -> None:
        """Every message the gateway delivers; the hook filters it at once and answers in a task."""
        self.hooks.on_message(message)

    async def on_guild_remove(self, guild: discord.Guild) -> None:
        """The bot left a server or was removed from it (not an outage: discord.py reports those apart)."""
        if self.hooks.on_removed is not None:
            channels = [c.id for c in guild.channels] + [t.id for t in guild.threads]
            await self.hooks.on_removed(guild.id, channels)

    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        """A message was deleted (raw: whether or not discord.py had it in its cache)."""
        if self.hooks.on_deleted is not None:
            await self.hooks.on_deleted(payload.channel_id, payload.guild_id, [payload.message_id])

    async def on_raw_bulk_message_delete(self, payload: discord.RawBulkMessageDeleteEvent) -> None:
        """Messages were deleted at once (a moderator's purge)."""
        if self.hooks.on_deleted is not None:
            await self.hooks.on_deleted(payload.channel_id, payload.guild_id, sorted(payload.message_ids))

    async def on_raw_reaction_add(self, payload: discord.RawReactionActionEvent) -> None:
        """A reaction was added (raw: whether or not discord.py had the message in its cache)."""
        if self.hooks.on_reaction is not None:
            await self.hooks.on_reaction(payload)

    async def on_raw_poll_vote_add(self, payload: discord.RawPollVoteActionEvent) -> None:
        """A vote in a poll (raw: whether or not discord.py had the poll's message in its cache)."""
        if self.hooks.on_poll_vote is not None:
            await self.hooks.on_poll_vote(payload)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """Every interaction; a component's (a button pressed) goes to the hook (slash commands go to the tree)."""
        if interaction.type is discord.InteractionType.component and self.hooks.on_component is not None:
            await self.hooks.on_component(interaction)

    async def _on_tree_error(self, interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
        name = interaction.command.name if interaction.command is not None else "?"
        log.error("slash command /%s failed: %s", name, error, exc_info=error)
        if not interaction.response.is_done():
            try:
                text = await self.hooks.command_failed(interaction)
                await interaction.response.send_message(text, ephemeral=True)
            except discord.HTTPException as exc:
                log.warning("could not answer the failed interaction: %s", exc)
