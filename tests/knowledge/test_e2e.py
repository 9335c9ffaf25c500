"""A question answered from an added document with its citation, end to end: documents added with ``bots knowledge
add`` (the real command), then a user asks through the fake Telegram (the real python-telegram-bot client) or the fake
Discord (the real discord.py); the bot as ``bots run`` builds it (``plugins.standard()``, ``KNOWLEDGE_*``) calls
``search_knowledge`` or reads the passages put in its prompt, and answers with the document and section."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bots.app import build_agent
from bots.cli import main
from bots.settings import Settings
from core import ScriptedModel
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.telegram_server import FakeTelegramServer

from .support import CITE, QUESTION, cites, write_corpus


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegramServer]:
    async with FakeTelegramServer() as fake:
        yield fake


def settings_for(tmp_path: Path, **groups: Any) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        bot={"data_dir": str(tmp_path / "data"), **groups.pop("bot", {})},
        llm={"provider": "scripted"},
        **groups,
    )


async def add_documents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    """``bots knowledge add <corpus> args...`` with ``BOT_DATA_DIR`` in ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))
    folder = write_corpus(tmp_path / "docs")
    assert await asyncio.to_thread(main, ["knowledge", "add", str(folder), *args]) == 0


async def test_telegram_answers_from_the_handbook_with_its_citation(
    telegram: FakeTelegramServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await add_documents(tmp_path, monkeypatch, "--collection", "acme")
    settings = settings_for(
        tmp_path,
        bot={"platforms": "telegram"},
        telegram={"token": telegram.token, "api_url": telegram.api_url, "poll_timeout": 10},
        knowledge={"enabled": True},
    )
    model = ScriptedModel(cites("telegram:message"))  # type: ignore[arg-type]
    agent = build_agent(settings, model=model)
    await agent.start()
    try:
        telegram.user_says(QUESTION, user_id=777)
        [reply] = await telegram.wait_replies(1, timeout=30)
    finally:
        await agent.stop()
    assert "five working days" in reply.text and f"(Source: {CITE})" in reply.text
    assert "search_knowledge" in model.requests[0].prompt  # offered to the model, which called it


async def test_a_conversation_limited_to_other_collections_finds_nothing_there(
    telegram: FakeTelegramServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await add_documents(tmp_path, monkeypatch, "--collection", "acme")
    chat = "telegram:chat:777"
    assert await asyncio.to_thread(main, ["knowledge", "scope", chat, "other"]) == 0
    settings = settings_for(
        tmp_path,
        bot={"platforms": "telegram"},
        telegram={"token": telegram.token, "api_url": telegram.api_url, "poll_timeout": 10},
        knowledge={"enabled": True},
    )
    seen: list[str] = []

    def reply(request: Any) -> str:
        seen.append(request.prompt)
        if '<action_result name="search_knowledge"' in request.prompt:
            return '<response><output type="telegram:message">The documents do not cover it.</output></response>'
        return '<response><action_call name="search_knowledge">{"query": "refund"}</action_call></response>'

    agent = build_agent(settings, model=ScriptedModel(reply))
    await agent.start()
    try:
        telegram.user_says(QUESTION, user_id=777)
        [answer] = await telegram.wait_replies(1, timeout=30)
    finally:
        await agent.stop()
    assert answer.text == "The documents do not cover it."
    assert '"found": 0' in seen[-1]


async def test_discord_gets_the_passages_before_the_answer_and_cites_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await add_documents(tmp_path, monkeypatch)
    fake = FakeDiscord()
    guild = fake.guild()
    alice = fake.user("alice")
    dm = fake.dm_channel(alice)
    fake.text_channel(guild, "general")
    await fake.start()
    settings = settings_for(
        tmp_path,
        bot={"platforms": "discord"},
        discord={
            "token": "fake-token",
            "api_url": fake.api_url,
            "gateway_url": fake.gateway_url,
            "guild_ready_timeout": 0.05,
            "sync_commands": False,
        },
        knowledge={"enabled": True, "before_answer": 2},
    )
    model = ScriptedModel(cites("discord:message"))  # type: ignore[arg-type]
    agent = build_agent(settings, model=model)
    try:
        await agent.start()
        await fake.say(dm, QUESTION, author=alice)
        [posted] = await fake.wait_posted(dm, 1)
    finally:
        await agent.stop()
        await fake.close()
    assert "five working days" in posted["content"] and f"(Source: {CITE})" in posted["content"]
    assert len(model.requests) == 1  # the passages were in the first prompt: no search needed
    assert f'<passage cite="{CITE}">' in model.requests[0].prompt
