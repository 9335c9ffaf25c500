"""The data files are checked when a process starts: one that cannot be used (written by a newer version, as after
a rollback; damaged; not the bot's user's to read and write) stops start-up with one line naming the file and the
fix (``bots`` exits 2), instead of failing on every message while ``/readyz`` says ready."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import ConfigError, MemoryStoreError
from core.memory.history import HISTORY
from core.memory.sqlite import SQLiteFile, probe
from core.usage import USAGE

if TYPE_CHECKING:
    from core import Agent

    from .settings import Settings

__all__ = ("check_data_files",)


async def check_data_files(agent: Agent, settings: Settings) -> None:
    """Open the agent's SQLite stores (memory, history, usage) and probe every other SQLite file of
    ``BOT_DATA_DIR`` (the web chat's visitors, the knowledge base); ``ConfigError`` for the first that cannot be
    used."""
    try:
        for store in (agent.memory, agent.provided(HISTORY), agent.provided(USAGE)):
            if isinstance(store, SQLiteFile):
                await store.check()
        await asyncio.to_thread(_probe_all, Path(settings.bot.data_dir))
    except MemoryStoreError as exc:
        raise ConfigError(str(exc)) from exc


def _probe_all(folder: Path) -> None:
    if folder.is_dir():
        for path in sorted(folder.glob("*.sqlite3")):
            probe(path)
