"""Rich messages (issue 54, point 3), through the real python-telegram-bot client (its raw request) and the fake Bot
API: an answer with a table is sent with sendRichMessage; where Telegram refuses it, the same answer is posted as
today's formatted text; an answer without structure is posted as today."""

from __future__ import annotations

from extensions.chat.structure import has_structure
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import StartBot

TABLE = "## Prices\n\n| fruit | price |\n|---|---|\n| apple | 1 |\n| pear | 2 |"


async def test_a_table_is_sent_as_a_rich_message(server: FakeTelegramServer, start_bot: StartBot) -> None:
    await start_bot([TABLE], stream_replies=False)
    update = server.user_says("prices?")
    [reply] = await server.wait_replies(1)
    assert reply.parse_mode == "rich" and reply.raw == TABLE
    assert reply.reply_to == update["message"]["message_id"]
    assert [call.params["rich_message"] for call in server.calls_of("sendRichMessage")]


async def test_a_refused_rich_message_falls_back_to_formatted_text(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    server.refuse_rich = True
    await start_bot([TABLE], stream_replies=False)
    server.user_says("prices?")
    [reply] = await server.wait_replies(1)
    assert reply.parse_mode == "HTML"
    assert "Prices" in reply.text and "apple" in reply.text and "pear" in reply.text
    assert len(server.calls_of("sendRichMessage")) == 1


async def test_an_answer_without_structure_and_the_setting_off_are_posted_as_today(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    assert not has_structure("Just **one** line.") and has_structure(TABLE)
    await start_bot(["Just **one** line.", TABLE], stream_replies=False, rich_messages=False)
    server.user_says("hi")
    await server.wait_replies(1)
    server.user_says("prices?")
    replies = await server.wait_replies(2)
    assert [r.parse_mode for r in replies] == ["HTML", "HTML"] and not server.calls_of("sendRichMessage")
