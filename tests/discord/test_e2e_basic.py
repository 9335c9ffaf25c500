"""End to end, who gets an answer: the real discord.py client against the fake Discord, scripted model."""

from __future__ import annotations

import core
from core.testing import updates_of
from extensions.discord.filters import Verdict

from .conftest import StartBot, World, answers, barrier, runtime_of, say


async def test_dm_is_answered_as_a_reply_with_typing(world: World, start_bot: StartBot) -> None:
    model = core.ScriptedModel([say("Hello alice!")])
    await start_bot(model)
    asked = await world.fake.say(world.dm, "hi there", author=world.alice)
    [reply] = await world.fake.wait_posted(world.dm)
    assert reply["content"] == "Hello alice!"
    assert reply["message_reference"]["message_id"] == asked["id"]
    assert world.dm in world.fake.typing
    assert "hi there" in model.requests[0].prompt
    assert 'author="alice"' in model.requests[0].prompt
    # a DM is one person's: their id tells nobody apart; the message id stays (discord:react takes one: issue 51)
    assert "author_id=" not in model.requests[0].prompt and f'message_id="{asked["id"]}"' in model.requests[0].prompt


async def test_channel_message_needs_a_mention(world: World, start_bot: StartBot) -> None:
    model = answers("hi!")
    agent = await start_bot(model)
    await world.fake.say(world.general, "talking among ourselves", author=world.alice)
    await barrier(world)
    assert world.fake.posted_in(world.general) == []
    assert runtime_of(agent).verdicts[Verdict.POLICY] == 1

    asked = await world.fake.say(world.general, "what is 2+2?", author=world.alice, mention_bot=True)
    [reply] = await world.fake.wait_posted(world.general)
    assert reply["message_reference"]["message_id"] == asked["id"]
    prompt = model.requests[-1].prompt
    assert "what is 2+2?" in prompt and 'author_id="' in prompt  # (a server channel: people told apart by id)
    assert world.fake.bot["id"] not in updates_of(prompt)  # the bot's own mention is stripped
    assert "talking among ourselves" not in prompt


async def test_a_reply_to_the_bot_needs_no_mention(world: World, start_bot: StartBot) -> None:
    await start_bot(answers())
    await world.fake.say(world.general, "hello", author=world.alice, mention_bot=True)
    [first] = await world.fake.wait_posted(world.general)
    await world.fake.say(world.general, "and another thing", author=world.alice, reply_to=int(first["id"]))
    await world.fake.wait_posted(world.general, 2)


async def test_per_channel_policy_overrides(world: World, start_bot: StartBot) -> None:
    quiet = world.fake.text_channel(world.guild, "quiet")
    agent = await start_bot(answers(), channel_policies={world.general: "always", quiet: "off"})
    await world.fake.say(world.general, "no mention needed here", author=world.alice)
    await world.fake.wait_posted(world.general)
    await world.fake.say(quiet, "even a mention is ignored", author=world.alice, mention_bot=True)
    await barrier(world)
    assert world.fake.posted_in(quiet) == []
    assert runtime_of(agent).verdicts[Verdict.POLICY] == 1


async def test_the_bot_ignores_itself(world: World, start_bot: StartBot) -> None:
    """With the ``always`` policy, answering its own messages would loop forever."""
    model = answers()
    agent = await start_bot(model, reply_policy="always")
    await world.fake.say(world.general, "hi", author=world.alice)
    await world.fake.wait_posted(world.general)
    await barrier(world)
    assert len(model.requests) == 2  # the channel message and the barrier DM, nothing for its own posts
    assert runtime_of(agent).verdicts[Verdict.OWN] >= 1  # its reply in the channel came back and was skipped
    assert len(world.fake.posted_in(world.general)) == 1


async def test_other_bots_are_ignored_by_default(world: World, start_bot: StartBot) -> None:
    model = answers()
    agent = await start_bot(model, reply_policy="always")
    await world.fake.say(world.general, "hello bot", author=world.other_bot, mention_bot=True)
    await barrier(world)
    assert world.fake.posted_in(world.general) == []
    assert runtime_of(agent).verdicts[Verdict.BOT] == 1


async def test_allowed_bots_stop_at_the_hop_limit(world: World, start_bot: StartBot) -> None:
    agent = await start_bot(answers(), allow_bots=True, bot_hop_limit=2)
    runtime = runtime_of(agent)
    for n in range(3):
        await world.fake.say(world.general, f"bot says {n}", author=world.other_bot, mention_bot=True)
    await barrier(world)
    assert runtime.verdicts[Verdict.ANSWER] == 3  # two bot messages and the barrier
    assert runtime.verdicts[Verdict.BOT_HOPS] == 1
    await world.fake.say(world.general, "a person speaks", author=world.alice)  # not answered, but resets
    await world.fake.say(world.general, "bot again", author=world.other_bot, mention_bot=True)
    await barrier(world)
    assert runtime.verdicts[Verdict.BOT_HOPS] == 1
    assert runtime.verdicts[Verdict.ANSWER] == 5


async def test_allowlists(world: World, start_bot: StartBot) -> None:
    allowed = world.fake.text_channel(world.guild, "bot-room")
    agent = await start_bot(answers(), allowed_channels=[allowed], allowed_users=[world.alice["id"]])
    runtime = runtime_of(agent)
    await world.fake.say(world.general, "not here", author=world.alice, mention_bot=True)
    await world.fake.say(allowed, "bob is not on the list", author=world.bob, mention_bot=True)
    await world.fake.say(allowed, "alice is", author=world.alice, mention_bot=True)
    await world.fake.wait_posted(allowed)
    await barrier(world)
    assert runtime.verdicts[Verdict.CHANNEL_NOT_ALLOWED] == 1
    assert runtime.verdicts[Verdict.USER_NOT_ALLOWED] == 1
    assert world.fake.posted_in(world.general) == []
    assert len(world.fake.posted_in(allowed)) == 1


async def test_a_redelivered_message_is_answered_once(world: World, start_bot: StartBot) -> None:
    model = answers()
    await start_bot(model)
    asked = await world.fake.say(world.dm, "once please", author=world.alice)
    await world.fake.wait_posted(world.dm)
    await world.fake.dispatch("MESSAGE_CREATE", asked)  # the same message again, as after a RESUME
    await barrier(world)
    assert len(model.requests) == 2  # the message and the barrier
    assert len(world.fake.posted_in(world.dm)) == 2


async def test_mentioning_the_bots_role_counts_as_a_mention(world: World, start_bot: StartBot) -> None:
    model = answers()
    await start_bot(model)
    role = world.fake.guilds[world.guild]["bot_role_id"]
    await world.fake.say(world.general, f"<@&{role}> are you the bot?", author=world.alice)
    await world.fake.wait_posted(world.general)
    assert "are you the bot?" in model.requests[-1].prompt
