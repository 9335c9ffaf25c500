"""The scheduled-texts plugin: a ``schedule`` input meant to be posted as written (``ScheduleKind.TEXT``) is posted
through the conversation's own output without asking the model, and recorded so the model sees it was said."""

from __future__ import annotations

import logging

from ..entries import InputRef, Log
from ..plugin import Plugin, RunHooks, RunView
from .model import posted_as_written

__all__ = ("ScheduledTexts",)

log = logging.getLogger("core.schedules")


class ScheduledTexts(Plugin):
    """Posts the texts of scheduled messages as written."""

    name = "scheduled-texts"

    def begin(self, run: RunView) -> RunHooks:
        return _Post(run)


class _Post(RunHooks):
    __slots__ = ("run",)

    def __init__(self, run: RunView) -> None:
        self.run = run

    async def admit(self, updates: list[Log]) -> list[Log]:
        rest: list[Log] = []
        for entry in updates:
            if not (isinstance(entry, InputRef) and posted_as_written(entry)):
                rest.append(entry)
                continue
            entry.processed = True
            try:
                await self.run.say(str(entry.data.get("text", "")), record=True)
            except Exception as exc:
                log.warning("%s: a scheduled message was not posted: %s", self.run.state.id, exc)
        return rest
