"""``/catchup`` in a Telegram supergroup through the fake Bot API: the people's messages are kept in the history
(the long memory), the summary names the messages with t.me links, and ``/catchup private`` lands in the person's
private chat with the bot, the group told so."""

from __future__ import annotations

from pathlib import Path

from bots.catchup_settings import message_link, private_chat
from core import ModelRequest, ScriptedModel
from core.catchup import CatchUp
from core.memory import SQLiteHistory
from extensions.chat.policy import ReplyPolicy
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import StartBot, answer

GROUP = -1001234567890


def model(request: ModelRequest) -> str:
    if "You summarize a group chat" in request.system:
        return "- Bob moved the release to Friday [2]"
    return answer("noted")


async def test_catchup_in_a_supergroup_and_in_private(
    server: FakeTelegramServer, start_bot: StartBot, tmp_path: Path
) -> None:
    history = SQLiteHistory(tmp_path / "history.sqlite3")
    plugin = CatchUp(history, link=message_link, private=private_chat)
    scripted = ScriptedModel(model)
    await start_bot(scripted, reply_policy=ReplyPolicy.ALWAYS, agent_options={"history": history, "plugins": [plugin]})
    server.chat(GROUP, kind="supergroup", title="Team")
    server.user_says("I am off until Monday", user_id=7, first_name="Ann", chat_id=GROUP)
    await server.wait_replies(1)
    sent = {}
    for text, who, uid in (("the release?", "Carol", 8), ("moved to Friday", "Bob", 9), ("ok", "Carol", 8)):
        sent[text] = server.user_says(text, user_id=uid, first_name=who, chat_id=GROUP)
        await server.wait_replies(len(server.sent) + 1)
    asked = server.user_says("/catchup", user_id=7, first_name="Ann", chat_id=GROUP)
    replies = await server.wait_replies(5)
    digest = replies[-1]
    assert digest.chat_id == GROUP and digest.text.startswith("Since your last message (")
    assert "Bob moved the release to Friday [2]" in digest.text  # (Telegram shows the list's dash as a bullet)
    # since Ann's message: [1] the bot's answer to her (no link: the bot's own), [2] Carol's question, ...
    assert ": 7 messages." in digest.text.split("\n", 1)[0]
    carol = sent["the release?"]["message"]["message_id"]
    assert digest.text.endswith(f"Messages: [2] https://t.me/c/1234567890/{carol}")
    assert asked["message"]["text"] == "/catchup"
    server.chat(
        7, title="Ann"
    )  # she started a private chat with the bot once (else Telegram refuses: "Chat not found")
    server.user_says("/catchup private", user_id=7, first_name="Ann", chat_id=GROUP)
    await server.wait_replies(7)
    private = [m for m in server.sent if m.chat_id == 7]
    assert len(private) == 1 and private[0].text.startswith("Since your last message")
    assert any(m.chat_id == GROUP and m.text.startswith("I sent you the catch-up in private") for m in server.sent)
    await history.close()
