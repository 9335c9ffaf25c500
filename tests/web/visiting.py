"""Talking to the web chat as a visitor from a test: send from the page, read what the page is shown, and the
conversation's saved state."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from core import ContextState
from extensions.web import web_chat

from .conftest import Bot, csrf_of


async def talk(chat_url: str, session: aiohttp.ClientSession, text: str, *, until: str) -> list[dict[str, Any]]:
    """Send ``text`` from the page at ``chat_url``; what the page is shown until a message ``until`` is posted."""
    async with session.get(chat_url) as response:
        assert response.status == 200, await response.text()
        csrf = csrf_of(await response.text())
    shown: list[dict[str, Any]] = []
    async with session.get(chat_url + "chat/events") as events:
        await events.content.readuntil(b'"ready"}\n\n')
        async with session.post(
            chat_url + "chat/send", json={"text": text}, headers={"X-CSRF-Token": csrf}
        ) as response:
            assert response.status == 202, await response.text()
        async with asyncio.timeout(10):
            while not any(e.get("op") == "post" and e.get("text") == until for e in shown):
                line = await events.content.readline()
                if line.startswith(b"data: "):
                    shown.append(json.loads(line[6:]))
    return shown


def visitor_of(session: aiohttp.ClientSession) -> str:
    """The visitor id the session's cookie names."""
    cookie = next(c for c in session.cookie_jar if c.key == "visitor")
    return cookie.value.partition(".")[0]


async def state_of(bot: Bot, session: aiohttp.ClientSession) -> ContextState:
    """The saved state of the session's conversation."""
    return await bot.agent.load_state(web_chat, visitor_of(session))


async def saved(bot: Bot, session: aiohttp.ClientSession, text: str) -> bool:
    """The run that answered ``text`` ended and saved its state."""
    return text in str((await state_of(bot, session)).working_memory.logs)
