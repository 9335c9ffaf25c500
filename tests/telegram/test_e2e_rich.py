"""Rich messages (issue 54, point 3), through the real python-telegram-bot client (its raw request) and the fake Bot
API: an answer with a table is sent with sendRichMessage; where Telegram refuses it, the same answer is posted as
today's formatted text; an answer without structure is posted as today. An answer shown while it is written ends
in the rich layout: its message is edited into a rich message once complete (editMessageText with rich_message)."""

from __future__ import annotations

from core import ScriptedModel
from extensions.chat.structure import has_structure
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import StartBot, answer

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
    replies = await server.wait_replies(2, timeout=60)
    assert [r.parse_mode for r in replies] == ["HTML", "HTML"] and not server.calls_of("sendRichMessage")


async def test_a_streamed_answer_with_a_table_ends_as_a_rich_message(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    model = ScriptedModel([answer(TABLE), answer("Just **one** line.")], chunk_size=4, delay=0.01)
    await start_bot(model, stream_replies=True, stream_interval=0.05)
    update = server.user_says("prices?")
    [reply] = await server.wait_replies(1, timeout=60)
    await server.wait_for(lambda: reply.parse_mode == "rich", timeout=60)
    assert reply.raw == TABLE and reply.reply_to == update["message"]["message_id"]
    assert reply.edits and not server.calls_of("sendRichMessage")  # posted (as it was written), then laid out
    [call] = [c for c in server.calls_of("editMessageText") if c.params.get("rich_message") is not None]
    assert call.status == 200
    # an answer without structure is finished as today
    server.user_says("and?")
    replies = await server.wait_replies(2, timeout=60)
    assert replies[1].parse_mode == "HTML" and len(server.calls_of("editMessageText")) >= 1
    assert [c for c in server.calls_of("editMessageText") if c.params.get("rich_message") is not None] == [call]


async def test_a_refused_rich_edit_leaves_the_streamed_answer_as_formatted_text(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    server.refuse_rich = True
    await start_bot(ScriptedModel([answer(TABLE)], chunk_size=4, delay=0.01), stream_replies=True, stream_interval=0.05)
    server.user_says("prices?")
    [reply] = await server.wait_replies(1)
    await server.wait_for(
        lambda: [c for c in server.calls_of("editMessageText") if c.params.get("rich_message")], timeout=60
    )
    assert reply.parse_mode == "HTML" and "apple" in reply.text and "pear" in reply.text
