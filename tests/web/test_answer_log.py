"""A web-chat message and its answer leave one line at INFO (``bots.runs``): how the run ended and how long it
took, never the message's text nor the answer's."""

from __future__ import annotations

import logging

import pytest

from .conftest import StartBot, client, scripted, until
from .visiting import talk


async def test_an_answer_leaves_a_line_at_info_with_its_duration(
    start_bot: StartBot, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await start_bot(scripted("the harbour opens at nine"))
    with caplog.at_level(logging.INFO, logger="bots.runs"):
        async with client() as visitor:
            await talk(bot.chat_url, visitor, "when does the secret harbour open?", until="the harbour opens at nine")

            async def logged_run() -> bool:  # (the line comes when the run ends: after its answer was posted)
                return any(r.name == "bots.runs" for r in caplog.records)

            await until(logged_run)
    lines = [r for r in caplog.records if r.name == "bots.runs"]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    line = lines[0]
    assert line.levelno == logging.INFO
    assert line.getMessage().startswith("web run of ") and " answered in " in line.getMessage()  # (the id hashed)
    assert line.outcome == "answered" and 0 <= line.duration_seconds < 60  # type: ignore[attr-defined]
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "secret harbour" not in logged and "opens at nine" not in logged
