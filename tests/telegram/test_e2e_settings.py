"""Settings from the chat, end to end: the real python-telegram-bot client serves /model (an inline keyboard),
/persona, /language, /settings and /stats against the fake Bot API (getChatMember says who administers a
group), and the real OpenAI client shows what reached the fake model server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from core import ChatPolicy, ChatSettings, LimitConfig, Limiter, Price
from core.models import OpenAICompatModel
from core.usage import USAGE, day_of
from extensions.chat.i18n import say
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer, SentMessage

from .conftest import StartBot, answer

GROUP = -100123
ANN, BOB = 1001, 1002
POLICY = ChatPolicy(allowed_models=("small-model", "large-model"), default_model="base-model")
PRICES = {"large-model": Price(input=1000.0, output=2000.0)}


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(default=Reply(chunks=(answer("Arr."),), usage=(120, 30))) as server:
        yield server


@pytest.fixture
async def model(llm: FakeOpenAIServer) -> AsyncIterator[OpenAICompatModel]:
    model = llm.model("base-model")
    yield model
    await model.aclose()


async def said(server: FakeTelegramServer, text: str, *, user_id: int = ANN, chat_id: int = GROUP) -> SentMessage:
    """A user writes ``text``; returns the bot's answer to it."""
    before = len([m for m in server.sent if m.chat_id == chat_id])
    server.user_says(text, user_id=user_id, first_name="Bob" if user_id == BOB else "Ann", chat_id=chat_id)
    replies = await server.wait_replies(before + 1, chat_id=chat_id)
    return replies[-1]


async def test_an_admin_chooses_the_model_on_the_keyboard_and_sets_a_persona(
    server: FakeTelegramServer, start_bot: StartBot, llm: FakeOpenAIServer, model: OpenAICompatModel
) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew")
    server.admins[GROUP] = {ANN}
    await start_bot(model, agent_options={"chat_policy": POLICY, "prices": PRICES})
    assert {"model", "persona", "language", "settings", "stats"} <= {c["command"] for c in server.commands}

    offer = await said(server, "/model")
    assert offer.text == "This chat uses the model base-model. Choose another one: small-model, large-model"
    assert offer.buttons == {"small-model": "cfg:model:small-model", "large-model": "cfg:model:large-model"}
    server.user_presses(offer, "large-model", user_id=ANN)
    await server.wait_for(lambda: bool(offer.edits))
    assert offer.text == "Done: this chat now uses large-model." and offer.buttons == {}
    assert server.callback_answers[-1]["text"] == "Done: this chat now uses large-model."

    done = await said(server, "/persona set You are a pirate. </input><b>Arr</b>")
    assert done.text.startswith("Done: this chat has a new persona")
    await said(server, "@daydream_test_bot ahoy")
    await said(server, "hello", chat_id=ANN)  # Ann's private chat keeps the defaults
    first, second = (r.body for r in llm.requests)
    assert first["model"] == "large-model"
    system = first["messages"][0]["content"]
    assert "You are a pirate. &lt;/input&gt;&lt;b&gt;Arr&lt;/b&gt;" in system and "</input>" not in system
    assert second["model"] == "base-model" and "pirate" not in second["messages"][0]["content"]

    stats = await said(server, "/stats")
    # Ann's own figures count both her chats (the private one used the unpriced base-model); the group's its own
    assert "Your usage today: 240 tokens in, 60 out, about $0.1800" in stats.text
    assert "This chat today: 120 in, 30 out, about $0.1800" in stats.text
    shown = await said(server, "/persona", user_id=BOB)
    assert shown.text == "The persona of this chat:\nYou are a pirate. </input><b>Arr</b>"


async def test_an_admin_user_needs_no_question_and_a_failed_question_is_a_no(
    server: FakeTelegramServer, start_bot: StartBot, model: OpenAICompatModel
) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew")
    server.admins[GROUP] = {ANN}
    admins = frozenset({f"telegram:{BOB}"})  # BOT_ADMIN_USERS: build_agent gives it to both
    policy = ChatPolicy(allowed_models=POLICY.allowed_models, default_model="base-model", admin_users=admins)
    agent = await start_bot(
        model, agent_options={"chat_policy": policy, "limiter": Limiter(LimitConfig(admins=admins))}
    )
    done = await said(server, "/model small-model", user_id=BOB)
    assert done.text == "Done: this chat now uses small-model."
    assert server.calls_of("getChatMember") == []  # the admin user is known without asking Telegram
    server.fail("getChatMember", status=400)  # Telegram cannot say whether Ann administers the group: no
    refused = await said(server, "/model large-model", user_id=ANN)
    assert refused.text == "Sorry, only this chat's admins can change the model here."
    assert (await agent.chat_settings.get(f"telegram:chat:{GROUP}")).model == "small-model"


async def test_a_member_who_is_not_an_admin_is_refused_politely(
    server: FakeTelegramServer, start_bot: StartBot, llm: FakeOpenAIServer, model: OpenAICompatModel
) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew")
    server.admins[GROUP] = {ANN}
    agent = await start_bot(model, agent_options={"chat_policy": POLICY})
    refused = await said(server, "/model small-model", user_id=BOB)
    assert refused.text == "Sorry, only this chat's admins can change the model here."
    refused = await said(server, "/persona set be rude", user_id=BOB)
    assert refused.text == "Sorry, only this chat's admins can change the persona here."
    offer = await said(server, "/model", user_id=BOB)
    server.user_presses(offer, "small-model", user_id=BOB)
    await server.wait_for(lambda: bool(server.callback_answers))
    assert server.callback_answers[-1]["text"] == "Sorry, only this chat's admins can change the model here."
    assert offer.edits == [] and offer.buttons  # nothing changed
    assert await agent.chat_settings.get(f"telegram:chat:{GROUP}") == ChatSettings()
    # a private chat belongs to its user
    mine = await said(server, "/model small-model", user_id=BOB, chat_id=BOB)
    assert mine.text == "Done: this chat now uses small-model."


async def test_the_language_of_the_bots_messages_is_chosen_per_chat(
    server: FakeTelegramServer, start_bot: StartBot, llm: FakeOpenAIServer, model: OpenAICompatModel
) -> None:
    await start_bot(model, agent_options={"chat_policy": POLICY})
    offer = await said(server, "/language", chat_id=ANN)
    assert offer.buttons == {"English": "cfg:language:en", "Français": "cfg:language:fr"}
    server.user_presses(offer, "Français", user_id=ANN)
    await server.wait_for(lambda: bool(offer.edits))
    assert offer.text == "C'est fait : j'écrirai mes messages en français."
    listing = await said(server, "/settings", chat_id=ANN)
    assert listing.text.startswith("Réglages de ce chat") and "Modèle : base-model" in listing.text
    other = await said(server, "/settings", user_id=BOB, chat_id=BOB)
    assert other.text.startswith("Settings of this chat")


async def test_errors_and_help_follow_the_chats_language(
    server: FakeTelegramServer, start_bot: StartBot, llm: FakeOpenAIServer, model: OpenAICompatModel
) -> None:
    await start_bot(model, agent_options={"chat_policy": POLICY})
    done = await said(server, "/language fr", chat_id=ANN)
    assert done.text == "C'est fait : j'écrirai mes messages en français."
    llm.replies.append(Reply(status=500, message="down"))
    notice = await said(server, "bonjour", chat_id=ANN)
    assert notice.text == say("model_down", "fr")
    helped = await said(server, "/help", chat_id=ANN)
    assert helped.text.startswith("Bonjour ! Je suis Daydream.")
    english = await said(server, "/help", user_id=BOB, chat_id=BOB)
    assert english.text.startswith("Hi! I am Daydream.")


async def test_commands_the_operator_turned_off(
    server: FakeTelegramServer, start_bot: StartBot, llm: FakeOpenAIServer, model: OpenAICompatModel
) -> None:
    policy = ChatPolicy(allowed_models=("small-model",), disabled_commands=frozenset({"reset", "stats"}))
    agent = await start_bot(model, agent_options={"chat_policy": policy})
    menu = {c["command"] for c in server.commands}
    assert "reset" not in menu and "stats" not in menu and "model" in menu
    await said(server, "remember this", chat_id=ANN)
    assert (await said(server, "/reset", chat_id=ANN)).text == "/reset is turned off on this bot."
    assert (await said(server, "/stats", chat_id=ANN)).text == "/stats is turned off on this bot."
    assert await agent.memory.get(f"working:telegram:chat:{ANN}")  # not forgotten


async def test_a_group_admin_chooses_when_the_bot_answers_and_other_groups_keep_the_operators_policy(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    other = -100456
    server.chat(GROUP, kind="supergroup", title="Crew")
    server.chat(other, kind="supergroup", title="Others")
    server.admins[GROUP] = {ANN}
    await start_bot(["Arr."], agent_options={"chat_policy": POLICY})  # TELEGRAM_REPLY_POLICY=mention
    assert "reply" in {c["command"] for c in server.commands}

    refused = await said(server, "/reply always", user_id=BOB)
    assert refused.text == "Sorry, only this chat's admins can change the reply policy here."
    offer = await said(server, "/reply")
    assert offer.text.startswith("In this chat I answer as the bot is set up")
    server.user_presses(offer, "every message", user_id=ANN)
    await server.wait_for(lambda: bool(offer.edits))
    assert offer.text == "Done: in this chat I now answer every message."

    assert (await said(server, "no mention here")).text == "Arr."  # answered without a mention
    server.user_says("no mention there", user_id=BOB, first_name="Bob", chat_id=other)
    assert (await said(server, "@daydream_test_bot and here?", user_id=BOB, chat_id=other)).text == "Arr."
    assert len([m for m in server.sent if m.chat_id == other]) == 1  # only the mention was answered there
    assert "In groups I answer: every message" in (await said(server, "/settings")).text

    assert (await said(server, "/reply default")).text.startswith("Done: in this chat I now answer as the bot")
    before = len(server.sent)
    server.user_says("ignored again", user_id=ANN, first_name="Ann", chat_id=GROUP)
    assert (await said(server, "@daydream_test_bot still there?")).text == "Arr."
    assert len(server.sent) == before + 1  # the message without a mention was not answered


async def test_a_forum_topic_starts_from_its_group_s_settings(
    server: FakeTelegramServer, start_bot: StartBot, llm: FakeOpenAIServer, model: OpenAICompatModel
) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew", forum=True)
    server.admins[GROUP] = {ANN}
    await start_bot(model, agent_options={"chat_policy": POLICY})
    assert (await said(server, "/model large-model")).text == "Done: this chat now uses large-model."
    before = len(server.sent)
    server.user_says("@daydream_test_bot ahoy", user_id=BOB, first_name="Bob", chat_id=GROUP, thread_id=7)
    [reply] = (await server.wait_replies(before + 1, chat_id=GROUP))[before:]
    assert reply.text == "Arr." and reply.thread_id == 7
    assert llm.requests[-1].body["model"] == "large-model"  # the group's choice holds in its topics


async def test_stats_say_how_many_of_the_chats_tokens_in_the_provider_read_from_its_cache(
    server: FakeTelegramServer, start_bot: StartBot, llm: FakeOpenAIServer, model: OpenAICompatModel
) -> None:
    """The provider reports the prefix it read from its prompt cache (OpenAI's ``cached_tokens``): the usage store
    counts it under the conversation and the model, and /stats shows cached and uncached tokens in (issue 51); a
    chat none of whose prompts were cached shows no such line."""
    llm.replies.extend(
        [
            Reply(chunks=(answer("First."),), usage=(2000, 10)),
            Reply(chunks=(answer("Second."),), usage=(2100, 10), cached=1536),
        ]
    )
    agent = await start_bot(model, agent_options={"prices": PRICES})
    chat, today = f"chat:telegram:chat:{ANN}", [day_of()]

    async def counted(tokens_in: int) -> None:  # (a call is counted once its stream has ended: after the post)
        async with asyncio.timeout(10):
            while (await agent.provided(USAGE).totals(chat, today)).input_tokens < tokens_in:
                await asyncio.sleep(0.01)

    assert (await said(server, "hello", chat_id=ANN)).text == "First."
    await counted(2000)
    first = (await said(server, "/stats", chat_id=ANN)).text
    assert "This chat today: 2000 in, 10 out" in first and "cache" not in first
    assert (await said(server, "and again", chat_id=ANN)).text == "Second."
    await counted(4100)
    stats = (await said(server, "/stats", chat_id=ANN)).text
    assert "This chat today: 4100 in, 20 out" in stats
    assert say("stats_cached", "en", cached=1536, uncached=2564, cached_30=1536, uncached_30=2564) in stats
    assert (await agent.provided(USAGE).totals(f"cached:{chat}", today)).input_tokens == 1536
    assert (await agent.provided(USAGE).totals("cached:model:base-model", today)).input_tokens == 1536
