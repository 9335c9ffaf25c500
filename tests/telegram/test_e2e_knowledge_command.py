"""``/knowledge`` through the real python-telegram-bot client and the fake Bot API: anyone sees which collections
a chat searches; a group's admin (getChatMember) limits it to some (``/knowledge use``) and lifts the limit
(``/knowledge all``), a member is refused, an unknown collection is named back escaped; the model's search then
reads only those collections; a private chat's user chooses for their own chat."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.knowledge import Knowledge, SQLiteKnowledge
from core.knowledge.plugin import chat_choice_key
from tests.fakes.telegram_server import FakeTelegramServer, SentMessage
from tests.knowledge.support import searcher, two_collections

from .conftest import StartBot

GROUP = -100777
ANN, BOB = 2001, 2002


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteKnowledge]:
    yield await two_collections(tmp_path)  # the Knowledge plugin closes it with the agent


async def said(server: FakeTelegramServer, text: str, *, user_id: int = ANN, chat_id: int = GROUP) -> SentMessage:
    before = len([m for m in server.sent if m.chat_id == chat_id])
    server.user_says(text, user_id=user_id, first_name="Ann" if user_id == ANN else "Bob", chat_id=chat_id)
    return (await server.wait_replies(before + 1, chat_id=chat_id))[-1]


async def test_a_groups_admin_limits_what_the_bot_searches_there(
    server: FakeTelegramServer, start_bot: StartBot, store: SQLiteKnowledge
) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew")
    server.admins[GROUP] = {ANN}
    found: list[list[str]] = []
    await start_bot(searcher("telegram:message", found), agent_options={"plugins": [Knowledge(store)]})
    assert "knowledge" in {c["command"] for c in server.commands}
    chat = f"telegram:chat:{GROUP}"

    shown = await said(server, "/knowledge", user_id=BOB)
    assert shown.text.startswith("This chat searches every collection. Collections: hr, shop.")
    refused = await said(server, "/knowledge use hr", user_id=BOB)
    assert refused.text == "Sorry, only this chat's admins can choose what the bot searches here."
    assert await store.scope(chat_choice_key(chat)) is None

    unknown = await said(server, "/knowledge use hr <b>nope</b>")
    assert unknown.text == "There is no collection <b>nope</b> here. Collections: hr, shop."
    assert await store.scope(chat_choice_key(chat)) is None  # nothing stored when a name is wrong
    done = await said(server, "/knowledge use hr")
    assert done.text == "Done: this chat searches hr only."
    assert await store.scope(chat_choice_key(chat)) == ("hr",)
    assert (await said(server, "/knowledge", user_id=BOB)).text.startswith("This chat searches hr. Collections:")

    await said(server, "@daydream_test_bot what about refunds and gift cards?", user_id=BOB)
    assert found[-1] and all(cite.startswith("Acme Handbook") for cite in found[-1])  # the FAQ (shop) is not read

    lifted = await said(server, "/knowledge all")
    assert lifted.text == "Done: this chat searches every collection again."
    assert await store.scope(chat_choice_key(chat)) is None
    await said(server, "@daydream_test_bot and now?", user_id=BOB)
    assert any(cite.startswith("Acme FAQ") for cite in found[-1])

    assert (await said(server, "/knowledge forget everything")).text.startswith("Use /knowledge,")
    mine = await said(server, "/knowledge use shop", user_id=BOB, chat_id=BOB)  # Bob's own private chat
    assert mine.text == "Done: this chat searches shop only."
    assert (
        await store.scope(chat_choice_key(f"telegram:chat:{BOB}")) == ("shop",)
        and await store.scope(chat_choice_key(chat)) is None
    )


async def test_a_bot_without_a_knowledge_base_says_so(server: FakeTelegramServer, start_bot: StartBot) -> None:
    await start_bot(["unused"])
    answer = await said(server, "/knowledge use hr", chat_id=ANN)
    assert answer.text == "This bot has no knowledge base (its operator did not turn one on)."


async def test_a_stranger_in_a_private_chat_cannot_name_or_read_a_collection_outside_the_ceiling(
    server: FakeTelegramServer, start_bot: StartBot, store: SQLiteKnowledge
) -> None:
    """Issue 49 point 2: KNOWLEDGE_COLLECTIONS is the most a private chat (whose user administers it) may search:
    ``/knowledge`` does not name hr, ``/knowledge use hr`` is refused as if it were not there, ``/knowledge all``
    lifts the chat's choice to the ceiling only, and the model's search never reads hr."""
    found: list[list[str]] = []
    knowledge = Knowledge(store, collections=["shop"])
    await start_bot(searcher("telegram:message", found), agent_options={"plugins": [knowledge]})
    mine = f"telegram:chat:{BOB}"

    shown = await said(server, "/knowledge", user_id=BOB, chat_id=BOB)
    assert shown.text.startswith("This chat searches shop. Collections: shop.") and "hr" not in shown.text
    refused = await said(server, "/knowledge use hr", user_id=BOB, chat_id=BOB)
    assert refused.text == "There is no collection hr here. Collections: shop."
    lifted = await said(server, "/knowledge all", user_id=BOB, chat_id=BOB)
    assert lifted.text == "Done: this chat searches shop again."
    assert await knowledge.collections_of(mine) == ("shop",)
    await said(server, "what about refunds and gift cards?", user_id=BOB, chat_id=BOB)
    assert found[-1] and all(cite.startswith("Acme FAQ") for cite in found[-1])  # never the handbook (hr)


async def test_a_chat_narrows_the_operators_scope_and_never_widens_it(
    server: FakeTelegramServer, start_bot: StartBot, store: SQLiteKnowledge
) -> None:
    """The operator's own limit for one group (the console, ``bots knowledge scope``) is its ceiling too: its admin
    cannot reach a collection outside it, nor get past it with ``/knowledge all``; a choice stays within it."""
    server.chat(GROUP, kind="supergroup", title="Crew")
    server.admins[GROUP] = {ANN}
    chat = f"telegram:chat:{GROUP}"
    await store.set_scope(chat, ["hr"])
    knowledge = Knowledge(store)
    await start_bot(searcher("telegram:message", []), agent_options={"plugins": [knowledge]})
    assert (await said(server, "/knowledge use shop")).text == "There is no collection shop here. Collections: hr."
    assert (await said(server, "/knowledge all")).text == "Done: this chat searches hr again."
    assert (await said(server, "/knowledge use hr")).text == "Done: this chat searches hr only."
    assert await store.scope(chat) == ("hr",) and await knowledge.collections_of(chat) == ("hr",)
    await store.set_scope(chat, ["shop"])  # the operator moves the group: the chat's old choice does not follow
    assert await knowledge.collections_of(chat) == ("shop",)
