"""The web chat's usage as ``bots run`` keeps it (``usage.sqlite3`` under ``BOT_DATA_DIR``), whose counts are written
a moment after the answer, off its way (issue 51): ``/stats`` sent right after the answer shows them, and the file
has them once the bot has stopped."""

from __future__ import annotations

import asyncio

from core import SQLiteUsage
from core.usage import day_of
from tests.core.reporting_model import Answers

from .conftest import StartBot, answer, client, csrf_of
from .visiting import talk, visitor_of

TOKENS_IN, TOKENS_OUT = 1200, 7


async def test_stats_right_after_the_answer_show_its_tokens_and_the_stop_writes_them(start_bot: StartBot) -> None:
    bot = await start_bot(Answers(answer("Hi."), tokens_in=TOKENS_IN, tokens_out=TOKENS_OUT))
    async with client() as session:
        await talk(bot.chat_url, session, "hello", until="Hi.")
        visitor = visitor_of(session)
        async with session.get(bot.chat_url) as response:
            csrf = csrf_of(await response.text())
        async with asyncio.timeout(10):
            while True:  # (the run counts its call once the stream has ended, after the answer is posted)
                async with session.post(
                    bot.chat_url + "chat/send", json={"text": "/stats"}, headers={"X-CSRF-Token": csrf}
                ) as response:
                    stats = str((await response.json())["notice"])
                if "This chat today: 0 in" not in stats:
                    break
                await asyncio.sleep(0.01)
    assert f"Your usage today: {TOKENS_IN} tokens in, {TOKENS_OUT} out" in stats
    assert f"This chat today: {TOKENS_IN} in, {TOKENS_OUT} out" in stats
    await bot.agent.stop()
    stored = SQLiteUsage(bot.settings.bot.data_dir / "usage.sqlite3")
    try:
        totals = await stored.totals(f"user:web:{visitor}", [day_of()])
    finally:
        await stored.close()
    assert (totals.input_tokens, totals.output_tokens) == (TOKENS_IN, TOKENS_OUT)
