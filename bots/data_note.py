"""Which data a bot uses: ``bots run`` and ``bots chat`` say it when they start, and say it louder when the data
folder was last used by another bot (the built-in assistant's conversations, then ``bots run todo`` in the same
folder). Each conversation then goes on with its history, and its memory is brought to the new bot's shape
(``core.memory_shape``); ``BOT_DATA_DIR`` keeps a bot's data apart."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core import Agent

    from .settings import Settings

__all__ = ("LAST_BOT", "note_data")

log = logging.getLogger(__name__)

LAST_BOT = "last-bot"
"""The memory store's key of the name of the last bot started on it (no `:`: not a conversation's key)."""


async def note_data(agent: Agent, settings: Settings, *, name: str) -> str:
    """Log which data the bot ``name`` uses and record it as the last bot on it; returns the line logged."""
    where = f"the data folder {settings.bot.data_dir}"
    last = await agent.memory.get(LAST_BOT)
    if isinstance(last, str) and last and last != name:
        line = (
            f"bot {name!r} uses {where}, which bot {last!r} used last: each conversation there goes on with its "
            "history and its memory brought to this bot's shape; set BOT_DATA_DIR to another folder to keep this "
            "bot's data apart"
        )
        log.warning("%s", line)
    else:
        line = f"bot {name!r} uses {where}"
        log.info("%s", line)
    if last != name:
        await agent.memory.set(LAST_BOT, name)
    return line
