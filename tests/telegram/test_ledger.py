"""Replies in a queued run follow the run's reply ledger, seen from Telegram: a worker (send only, the real
python-telegram-bot client against the fake Bot API) runs the same batch twice with an in-memory ledger standing
in for the Redis one, as a redelivered batch would. ``tests/fleet/test_e2e_idempotent*.py`` does it with Redis."""

from __future__ import annotations

from typing import Any

import pytest

from core import Agent, ScriptedModel
from core.entries import InputRef
from core.errors import ModelError
from core.media import Attachment, AttachmentKind, OpenAITranscriber
from core.media.reader import READER
from extensions.chat.exactly_once import Uncertain
from extensions.telegram import ChatArgs, get_runtime, telegram_chat
from tests.discord.test_ledger import MemoryLedger
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import StartBot, answer

ANSWER = "The answer, written a few characters at a time so that it is **shown** while it is written."
SHOWN = "The answer, written a few characters at a time so that it is shown while it is written."
CHAT = 404


async def answer_batch(agent: Agent, ledger: MemoryLedger) -> None:
    """Run the batch (one message in the chat) as a queue worker does."""
    ref = InputRef(type="telegram:message", data="hi", params={"user": "Ann", "user_id": "1", "message_id": "7"})
    await agent.run(telegram_chat, ChatArgs(chat_id=CHAT), [ref], ledger=ledger)


@pytest.mark.parametrize("stream", [False, True], ids=["posted", "streamed"])
async def test_a_reply_delivered_by_an_earlier_attempt_is_left_alone(
    server: FakeTelegramServer, start_bot: StartBot, stream: bool
) -> None:
    server.chat(CHAT)
    model = ScriptedModel([answer(ANSWER)], chunk_size=5, delay=0.002, repeat_last=True)
    agent = await start_bot(model, listen=False, stream_replies=stream, stream_interval=0.05)
    ledger = MemoryLedger()
    await answer_batch(agent, ledger)
    [reply] = server.sent
    assert reply.text == SHOWN and reply.reply_to == 7
    entries = ledger.stored()
    assert len(entries) == (2 if stream else 1)
    assert all(e["done"] and e["ids"] == [str(reply.message_id)] for e in entries)
    versions = reply.versions

    await answer_batch(agent, ledger.attempt())  # the same batch again (the ack was lost)
    assert len(server.calls_of("sendMessage")) == 1 and reply.versions == versions


@pytest.mark.parametrize("stream", [False, True], ids=["posted", "streamed"])
async def test_a_reply_delivered_by_an_earlier_attempt_with_another_answer_is_edited_to_this_one(
    server: FakeTelegramServer, start_bot: StartBot, stream: bool
) -> None:
    """The batch runs again with other inputs (a Redis failover lost a join, or a take then made again under the same
    batch id with the inputs stored meanwhile): its step is not replayed, and the model's new answer lands on the
    entries of the earlier attempt's finished reply. Taken as delivered, it was recorded as given and never shown
    (tests/fleet/test_e2e_primary_back.py); it edits the earlier reply's message instead."""
    server.chat(CHAT)
    other = "Another answer, to the inputs the batch holds now."
    model = ScriptedModel([answer(ANSWER), answer(other)], chunk_size=5, delay=0.002)
    agent = await start_bot(model, listen=False, stream_replies=stream, stream_interval=0.05)
    ledger = MemoryLedger()
    await answer_batch(agent, ledger)
    [reply] = server.sent
    assert reply.text == SHOWN

    await answer_batch(agent, ledger.attempt())
    assert len(server.calls_of("sendMessage")) == 1
    assert reply.text == other
    assert all(e["done"] and e["content"] == other for e in ledger.stored())


async def test_a_message_an_earlier_attempt_showed_is_finished_not_posted_again(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    server.chat(CHAT)
    agent = await start_bot(
        ScriptedModel([answer(ANSWER)], chunk_size=5, delay=0.002), listen=False, stream_interval=0.05
    )
    # the worker that crashed: it stored the reply, showed its first words and recorded that message
    ledger = MemoryLedger()
    slot = await ledger.begin("telegram:message", ANSWER[:12])
    [shown] = await get_runtime(agent).post_reply(chat_id=CHAT, thread_id=None, text=ANSWER[:12], reply_to=7)
    await ledger.posted(slot, str(shown), done=False)

    await answer_batch(agent, ledger.attempt())
    [reply] = server.sent
    assert reply.message_id == shown and reply.text == SHOWN  # finished in place
    assert len(server.calls_of("sendMessage")) == 1
    assert all(e["done"] and e["ids"] == [str(shown)] for e in ledger.stored())


async def test_a_first_message_recorded_with_the_whole_answer_is_still_edited_to_it(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    """The crash the fleet test found: the worker showed the first words, recorded the message with the text it
    had received so far (the whole answer, which it went on to store as complete) and died before the final
    edit. The retry must not take that text for what the message shows. (It replays the stored answer, all at
    once: no live update comes before the final text.)"""
    server.chat(CHAT)
    agent = await start_bot(ScriptedModel([answer(ANSWER)], chunk_size=1000), listen=False, stream_interval=0.05)
    ledger = MemoryLedger()
    first = await ledger.begin("telegram:message", ANSWER[:12])
    [shown] = await get_runtime(agent).post_reply(chat_id=CHAT, thread_id=None, text=ANSWER[:12], reply_to=7)
    first.content, first.shown = ANSWER, [ANSWER[:12]]
    await ledger.posted(first, str(shown), done=False)
    await ledger.begin("telegram:message", ANSWER)  # the answer complete, the final edit not made

    await answer_batch(agent, ledger.attempt())
    [reply] = server.sent
    assert reply.message_id == shown and reply.text == SHOWN
    assert all(e["done"] and e["sh"] == [ANSWER] for e in ledger.stored())


async def test_a_worker_that_lost_the_conversation_tells_nobody_its_run_failed(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    server.chat(CHAT)
    agent = await start_bot(ScriptedModel([ModelError("the model is down")]), listen=False)
    ledger = MemoryLedger()
    ledger.valid = False  # its lease expired: the worker that took the conversation over answers
    await answer_batch(agent, ledger)
    assert server.calls_of("sendMessage") == []


@pytest.mark.parametrize("stream", [False, True], ids=["posted", "streamed"])
async def test_the_intent_to_post_is_recorded_before_the_post_and_its_id_right_after(
    server: FakeTelegramServer, start_bot: StartBot, stream: bool
) -> None:
    server.chat(CHAT)
    model = ScriptedModel([answer(ANSWER)], chunk_size=5, delay=0.002)
    agent = await start_bot(model, listen=False, stream_replies=stream, stream_interval=0.05)
    ledger = MemoryLedger()
    await answer_batch(agent, ledger)
    [reply] = server.sent
    written = [(e.get("p"), e["ids"]) for e in ledger.history]
    intent = written.index((0, []))
    assert (None, [str(reply.message_id)]) in written[intent + 1 :]  # the id, written once the post returned


@pytest.mark.parametrize("policy", list(Uncertain))
@pytest.mark.parametrize("stream", [False, True], ids=["posted", "streamed"])
async def test_a_post_left_uncertain_by_a_crash_follows_telegram_uncertain_replies(
    server: FakeTelegramServer, start_bot: StartBot, stream: bool, policy: Uncertain
) -> None:
    server.chat(CHAT)
    model = ScriptedModel([answer(ANSWER)], chunk_size=5, delay=0.002, repeat_last=True)
    agent = await start_bot(model, listen=False, stream_replies=stream, stream_interval=0.05, uncertain_replies=policy)
    seen: list[Any] = []
    agent.observers.append(lambda kind, cid, value: seen.append(kind))
    # the worker that crashed: it stored the reply and its intent to post, sent the post and died before the
    # answer came (whether Telegram got the request, nobody knows: here it did not)
    ledger = MemoryLedger()
    for _ in range(2 if stream else 1):
        slot = await ledger.begin("telegram:message", ANSWER)
        slot.pending, slot.pending_text = 0, ANSWER
        await ledger.posted(slot, None, done=False)

    await answer_batch(agent, ledger.attempt())
    assert len(server.calls_of("sendMessage")) == (1 if policy is Uncertain.RESEND else 0)
    assert seen.count(f"reply_uncertain:{policy.value}") == 1
    assert all(e["done"] for e in ledger.stored())


async def test_with_skip_a_post_that_showed_only_the_first_words_is_followed_by_the_answer(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    server.chat(CHAT)
    model = ScriptedModel([answer(ANSWER)], chunk_size=5, delay=0.002, repeat_last=True)
    agent = await start_bot(model, listen=False, stream_interval=0.05, uncertain_replies=Uncertain.SKIP)
    ledger = MemoryLedger()
    slot = await ledger.begin("telegram:message", ANSWER[:12])
    slot.pending, slot.pending_text = 0, ANSWER[:12]  # died posting the first words of a streamed answer
    await ledger.posted(slot, None, done=False)

    await answer_batch(agent, ledger.attempt())
    [reply] = server.sent  # (the first words, if Telegram got them, stay above it: they cannot be edited)
    assert reply.text == SHOWN and len(server.calls_of("sendMessage")) == 1
    assert all(e["done"] for e in ledger.stored())


async def test_a_voice_message_is_quoted_once_however_often_its_batch_runs(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    server.chat(CHAT)
    server.files["voice-1"] = ("voices/file_1.oga", b"OggS" + bytes(30))
    agent = await start_bot(ScriptedModel([answer("Noted.")], repeat_last=True), listen=False, stream_replies=False)
    voice = Attachment(kind=AttachmentKind.AUDIO, name="voice.ogg", mime="audio/ogg", source="telegram", ref="voice-1")
    ref = InputRef(
        type="telegram:message", data="", params={"user": "Ann", "user_id": "1", "message_id": "7"}, attachments=[voice]
    )
    ledger = MemoryLedger()
    async with FakeOpenAIServer() as stt_server:
        stt_server.transcript = "remind me to call mum"
        stt = agent.provided(READER).transcriber = OpenAITranscriber(base_url=stt_server.url)
        agent.provided(READER).echo = True
        try:
            for _ in range(2):  # the batch, then the batch again (the ack was lost)
                inputs = [ref.model_copy(deep=True)]
                await agent.run(telegram_chat, ChatArgs(chat_id=CHAT), inputs, ledger=ledger.attempt())
        finally:
            await stt.aclose()
    assert [m.text for m in server.sent] == ['🎤 "remind me to call mum"', "Noted."]
