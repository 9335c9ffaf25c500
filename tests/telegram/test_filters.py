"""Who gets an answer: facts read from real python-telegram-bot Messages, decided in code."""

from __future__ import annotations

from typing import Any

import pytest
from telegram import Message

from extensions.chat import Allowlist, ReplyPolicy
from extensions.telegram.filters import Decision, MessageFacts, decide
from tests.fakes.telegram_server import FakeTelegramServer

BOT_ID = 123456
GROUP = -100777


@pytest.fixture
def fake() -> FakeTelegramServer:
    """Only used to build updates the way Telegram shapes them (entities, topics, replies)."""
    return FakeTelegramServer(bot_id=BOT_ID)


def facts(update: dict[str, Any]) -> MessageFacts:
    message = Message.de_json(update["message"], None)
    assert message is not None
    return MessageFacts.of(message, bot_id=BOT_ID, bot_username="daydream_test_bot")


def decision(
    update: dict[str, Any], *, policy: ReplyPolicy = ReplyPolicy.MENTION, allowlist: Allowlist | None = None
) -> Decision:
    return decide(facts(update), policy=policy, allowlist=allowlist or Allowlist())


def bot_message(fake: FakeTelegramServer, chat_id: int, text: str = "earlier answer") -> int:
    """A message the bot posted in ``chat_id`` (so a user can reply to it); returns its id."""
    message_id = fake._next_message_id(chat_id)
    fake._messages[(chat_id, message_id)] = {
        "message_id": message_id,
        "date": 0,
        "chat": fake._chats[chat_id],
        "from": fake.bot,
        "text": text,
    }
    return message_id


def test_private_chats_are_always_answered(fake: FakeTelegramServer) -> None:
    for policy in ReplyPolicy:
        assert decision(fake.user_says("hello"), policy=policy) is Decision.ANSWER


def test_group_policy(fake: FakeTelegramServer) -> None:
    plain = fake.user_says("talking among ourselves", chat_id=GROUP, kind="supergroup")
    mention = fake.user_says("hey @Daydream_Test_Bot, help", chat_id=GROUP)
    other = fake.user_says("hey @someone_else look", chat_id=GROUP)
    assert decision(plain) is Decision.IGNORE
    assert decision(mention) is Decision.ANSWER
    assert decision(other) is Decision.IGNORE
    assert decision(plain, policy=ReplyPolicy.ALWAYS) is Decision.ANSWER
    assert decision(mention, policy=ReplyPolicy.OFF) is Decision.IGNORE


def test_a_text_mention_of_the_bot_counts(fake: FakeTelegramServer) -> None:
    update = fake.user_says("Daydream, help", chat_id=GROUP, kind="supergroup")
    update["message"]["entities"] = [
        {"type": "text_mention", "offset": 0, "length": 8, "user": {"id": BOT_ID, "is_bot": True, "first_name": "D"}}
    ]
    assert decision(update) is Decision.ANSWER


def test_replies_to_the_bot_count_and_replies_to_others_do_not(fake: FakeTelegramServer) -> None:
    fake.chat(GROUP, kind="supergroup")
    mine = bot_message(fake, GROUP)
    theirs = fake.user_says("hi all", chat_id=GROUP, user_id=9)["message"]["message_id"]
    assert decision(fake.user_says("thanks", chat_id=GROUP, reply_to=mine)) is Decision.ANSWER
    assert decision(fake.user_says("hi back", chat_id=GROUP, reply_to=theirs)) is Decision.IGNORE


def test_a_forum_topic_is_its_own_conversation_and_its_first_message_is_no_reply(fake: FakeTelegramServer) -> None:
    update = fake.user_says("chatting in the topic", chat_id=GROUP, kind="supergroup", thread_id=42)
    update["message"]["reply_to_message"]["from"] = fake.bot  # the bot opened the topic
    seen = facts(update)
    assert (seen.chat_id, seen.thread_id) == (GROUP, 42)
    assert not seen.replied_to_bot
    assert decision(update) is Decision.IGNORE
    assert facts(fake.user_says("@daydream_test_bot hi", chat_id=GROUP, thread_id=42)).thread_id == 42


def test_a_reply_thread_outside_forums_is_not_a_topic(fake: FakeTelegramServer) -> None:
    update = fake.user_says("a reply", chat_id=GROUP, kind="supergroup")
    update["message"]["message_thread_id"] = 5  # set by Telegram on replies in plain supergroups
    assert facts(update).thread_id is None


@pytest.mark.parametrize(
    ("text", "private", "expected"),
    [
        ("/start", True, Decision.HELP),
        ("/help", True, Decision.HELP),
        ("/HELP@daydream_test_bot", False, Decision.HELP),
        ("/reset", True, Decision.RESET),
        ("/reset@daydream_test_bot", False, Decision.RESET),
        ("/forget", True, Decision.FORGET),
        ("/forget@daydream_test_bot", False, Decision.FORGET),
        ("/help@other_bot", False, Decision.IGNORE),
        ("/help@other_bot", True, Decision.IGNORE),
        ("/weather in Paris", False, Decision.ANSWER),
    ],
)
def test_commands(fake: FakeTelegramServer, text: str, private: bool, expected: Decision) -> None:
    update = fake.user_says(text) if private else fake.user_says(text, chat_id=GROUP, kind="supergroup")
    assert decision(update) is expected


def test_bots_are_ignored_but_anonymous_admins_are_people(fake: FakeTelegramServer) -> None:
    assert decision(fake.user_says("beep", user_id=5, is_bot=True, username="beep_bot")) is Decision.IGNORE
    admin = fake.user_says("@daydream_test_bot hi", chat_id=GROUP, kind="supergroup", user_id=1087968824, is_bot=True)
    admin["message"]["sender_chat"] = admin["message"]["chat"]
    assert decision(admin) is Decision.ANSWER


def test_allowlists(fake: FakeTelegramServer) -> None:
    allowlist = Allowlist.of(chats=[GROUP, 1001], users=[1001, 7])
    assert decision(fake.user_says("hi"), allowlist=allowlist) is Decision.ANSWER
    assert decision(fake.user_says("hi", user_id=8), allowlist=allowlist) is Decision.IGNORE
    assert (
        decision(fake.user_says("@daydream_test_bot", chat_id=GROUP, user_id=7), allowlist=allowlist) is Decision.ANSWER
    )
    assert decision(fake.user_says("@daydream_test_bot", chat_id=-5, user_id=7), allowlist=allowlist) is Decision.IGNORE


def test_captions_are_text_and_messages_without_text_or_attachment_are_ignored(fake: FakeTelegramServer) -> None:
    photo = fake.user_says("ignored")
    message = photo["message"]
    del message["text"]
    message["caption"] = "what is in this photo?"
    message["photo"] = [{"file_id": "f", "file_unique_id": "u", "width": 1, "height": 1}]
    assert facts(photo).text == "what is in this photo?"
    assert decision(photo) is Decision.ANSWER
    del message["caption"]
    assert decision(photo) is Decision.ANSWER  # a photo alone is something to look at
    [attachment] = facts(photo).attachments
    assert (attachment.kind, attachment.ref, attachment.source) == ("image", "f", "telegram")
    del message["photo"]
    message["location"] = {"latitude": 1.0, "longitude": 2.0}
    assert decision(photo) is Decision.IGNORE


def test_user_facts(fake: FakeTelegramServer) -> None:
    seen = facts(fake.user_says("hi", first_name="Zoë", username="zoe", user_id=31))
    assert (seen.user_id, seen.user_name, seen.username, seen.private) == (31, "Zoë", "zoe", True)
