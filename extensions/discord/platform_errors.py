"""Discord's failures as ours: a discord.py or network exception becomes a ``ConfigError`` or ``PlatformError``
that says what to do (no token ever in the text). The one place discord.py's exception types are read."""

from __future__ import annotations

import aiohttp

from core.errors import ChatGoneError, ConfigError, PlatformError

from ._lib import discord

__all__ = ("GONE_CODES", "INTENT_HELP", "NETWORK_ERRORS", "platform_error")

INTENT_HELP = (
    "Discord refused the gateway connection with close code 4014 (disallowed intents): this bot reads "
    "messages, so it needs the privileged Message Content intent. Open "
    "https://discord.com/developers/applications, choose the application of DISCORD_TOKEN, go to Bot, turn on "
    "'Message Content Intent' under 'Privileged Gateway Intents', save the changes, and start the bot again."
)
"""What the operator reads when the Message Content intent is not enabled in the developer portal."""

GONE_CODES = frozenset({10003, 50001, 50007})
"""Discord's error codes that mean the bot may no longer post in a channel: Unknown Channel (deleted, or the bot
left the server), Missing Access, Cannot send messages to this user (a DM the user closed)."""

NETWORK_ERRORS = (discord.DiscordException, aiohttp.ClientError, OSError, TimeoutError)
"""What a call to Discord may raise that ``platform_error`` translates."""

_CLOSE_HINTS = {
    4010: "; the shard setup is invalid: run one gateway process per token",
    4011: "; this bot is in too many servers for one connection and needs sharding",
    4012: "; the gateway API version is not supported: upgrade discord.py",
    4013: "; the intents this bot asks for are invalid: upgrade the bot",
}
"""What to do about the fatal gateway close codes that are not the operator's token or intents."""


def platform_error(exc: BaseException, what: str, *, in_channel: bool = False) -> PlatformError | ConfigError:
    """Our error for a discord.py or network failure while doing ``what`` (no token ever in the text);
    ``in_channel``: ``what`` is posting in a channel, where Discord's ``GONE_CODES`` are a ``ChatGoneError``."""
    if isinstance(exc, discord.LoginFailure):
        return ConfigError(
            "Discord refused DISCORD_TOKEN (401): copy the bot token again from the developer portal "
            "(your application, Bot, Reset Token) into DISCORD_TOKEN"
        )
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return ConfigError(INTENT_HELP)
    if in_channel and isinstance(exc, discord.HTTPException) and exc.code in GONE_CODES:
        return ChatGoneError(f"Discord refused to {what} ({exc.status}, code {exc.code}: {exc.text}): no access")
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
