"""Reactions on the bot's answers are feedback (issue 54): recorded as a metric and in the usage counters, never a
message to answer; polls the model posts, whose votes come back to it; through the real discord.py client and the
fake Discord."""

from __future__ import annotations

import asyncio

from core import InMemoryUsage, ScriptedModel
from core.usage import USAGE, day_of
from extensions.discord import get_runtime
from extensions.discord.definitions import POLL, POLL_ANSWER, ChannelArgs, discord_channel

from .conftest import StartBot, World, answers, say


async def test_a_reaction_on_an_answer_is_feedback_and_never_answered(world: World, start_bot: StartBot) -> None:
    model = answers("Paris.")
    agent = await start_bot(model, agent_options={"usage": InMemoryUsage()})  # (the Usage plugin keeps the scores)
    seen: list[tuple[str, str]] = []
    changed = asyncio.Event()

    def observe(kind: str, context_id: str, value: float) -> None:
        if kind.startswith("feedback:"):
            seen.append((kind, context_id))
            changed.set()

    async def wait(count: int) -> None:
        async with asyncio.timeout(10):
            while len(seen) < count:
                changed.clear()
                await changed.wait()

    agent.observers.append(observe)
    asked = await world.fake.say(world.dm, "capital of France?", author=world.alice)
    [reply] = await world.fake.wait_posted(world.dm, 1)
    cid = agent.context_id(discord_channel, ChannelArgs(channel_id=world.dm))
    await world.fake.react(asked, "👎", user=world.alice)  # on the person's own message: not feedback
    await world.fake.react(reply, "👎🏽", user=world.alice)
    await wait(1)
    await world.fake.react(reply, "👍", user=world.bob)
    await wait(2)
    assert seen == [("feedback:down", cid), ("feedback:up", cid)]
    day = [day_of()]
    assert (await agent.provided(USAGE).totals(f"feedback:down:chat:{cid}", day)).output_tokens == 1
    assert (
        await agent.provided(USAGE).totals(f"feedback:down:user:discord:{world.alice['id']}", day)
    ).output_tokens == 1
    assert (await agent.provided(USAGE).totals(f"feedback:up:chat:{cid}", day)).output_tokens == 1
    await world.fake.say(world.dm, "and of Italy?", author=world.alice)
    await world.fake.wait_posted(world.dm, 2)
    assert len(model.requests) == 2 and "👎" not in model.requests[1].prompt


async def test_a_poll_is_posted_answered_and_its_result_read_by_the_bot(world: World, start_bot: StartBot) -> None:
    poll = '{"question": "Tea or coffee?", "options": ["Tea", "Coffee"], "hours": 2}'
    model = ScriptedModel(
        [f'<response><output type="{POLL}">{poll}</output></response>', say("Coffee it is, bob.")], repeat_last=True
    )
    agent = await start_bot(model)
    asked = await world.fake.say(world.general, "ask us tea or coffee", author=world.alice, mention_bot=True)
    [posted] = await world.fake.wait_posted(world.general, 1)
    assert posted["poll"]["question"]["text"] == "Tea or coffee?"
    assert [a["poll_media"]["text"] for a in posted["poll"]["answers"]] == ["Tea", "Coffee"]
    assert posted["message_reference"]["message_id"] == asked["id"]
    polls = get_runtime(agent).poster.polls  # type: ignore[attr-defined]
    async with asyncio.timeout(10):  # Discord has the poll before the bot hears back that it was posted
        while await polls.get(posted["id"]) is None:
            await asyncio.sleep(0.01)
    await world.fake.vote(posted, 2, user=world.bob)
    [_, reply] = await world.fake.wait_posted(world.general, 2)
    assert reply["content"] == "Coffee it is, bob."
    assert reply["message_reference"]["message_id"] == posted["id"]  # the answer replies to the poll
    prompt = model.requests[1].prompt
    assert f'type="{POLL_ANSWER}"' in prompt and "chose 'Coffee' in the poll 'Tea or coffee?'" in prompt
