"""Messages sent on behalf of a chat (issue 49, point 3), through the real python-telegram-bot client and the fake
Bot API: an anonymous admin's message (``from`` is ``GroupAnonymousBot`` for all of them, ``sender_chat`` the
group) is the group's own, so the anonymous admins of one group never read nor delete what another group's kept;
a message sent as a channel is that channel's."""

from __future__ import annotations

import json

from telegram import Message

from core import ScriptedModel
from core.facts import Facts, remember
from extensions.telegram.filters import MessageFacts
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import MESSAGE, StartBot

CREW, BAND, NEWS = -100701, -100702, -100703


def _remember(fact: str) -> str:
    return f'<response><action_call name="remember">{json.dumps({"fact": fact})}</action_call></response>'


def _answer(text: str) -> str:
    return f'<response><output type="{MESSAGE}">{text}</output></response>'


async def test_anonymous_admins_of_two_groups_are_two_owners_and_delete_only_their_own(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    for group, title in ((CREW, "Crew"), (BAND, "Band")):
        server.chat(group, kind="supergroup", title=title)
    facts = Facts()
    model = ScriptedModel(
        [
            _remember("The crew meets at 9"),
            _answer("Kept."),
            _remember("The band rehearses on Monday"),
            _answer("Kept."),
        ],
        repeat_last=True,
    )
    await start_bot(model, agent_options={"plugins": [facts], "actions": [remember]})
    for group, text in ((CREW, "remember: the crew meets at 9"), (BAND, "remember: the band rehearses on Monday")):
        before = len([m for m in server.sent if m.chat_id == group])
        server.user_says(f"@daydream_test_bot {text}", chat_id=group, kind="supergroup", on_behalf_of=group)
        await server.wait_replies(before + 1, chat_id=group)
    crew = await facts.store.of_owner(f"telegram:{CREW}")
    band = await facts.store.of_owner(f"telegram:{BAND}")
    assert [f.text for f in crew] == ["The crew meets at 9"] and [f.text for f in band] == [
        "The band rehearses on Monday"
    ]
    assert await facts.store.of_owner("telegram:1087968824") == []  # never the account Telegram shows for them all

    before = len([m for m in server.sent if m.chat_id == BAND])
    server.user_says("/memory delete all", chat_id=BAND, kind="supergroup", on_behalf_of=BAND)
    answer = (await server.wait_replies(before + 1, chat_id=BAND))[-1]
    assert "private chat" in answer.text  # nobody's private chat to answer in: not said in the group either
    assert await facts.store.of_owner(f"telegram:{BAND}") == []  # the band's anonymous admins deleted theirs
    assert [f.text for f in await facts.store.of_owner(f"telegram:{CREW}")] == ["The crew meets at 9"]


def test_a_message_sent_as_a_channel_is_the_channel_s(server: FakeTelegramServer) -> None:
    server.chat(CREW, kind="supergroup", title="Crew")
    server.chat(NEWS, kind="channel", title="News")
    update = server.user_says(
        "hello", chat_id=CREW, kind="supergroup", user_id=136817688, is_bot=True, on_behalf_of=NEWS
    )
    facts = MessageFacts.of(Message.de_json(update["message"], None), bot_id=1, bot_username="daydream_test_bot")
    assert (facts.user_id, facts.user_name, facts.anonymous_admin) == (NEWS, "News", False)
    anonymous = server.user_says("hi", chat_id=CREW, kind="supergroup", on_behalf_of=CREW)
    facts = MessageFacts.of(Message.de_json(anonymous["message"], None), bot_id=1, bot_username="daydream_test_bot")
    assert (facts.user_id, facts.user_name, facts.anonymous_admin, facts.from_bot) == (CREW, "Crew", True, False)
