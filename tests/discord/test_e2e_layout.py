"""Components v2 (issue 54, point 3): an answer with structure, posted whole, is laid out as a container of text
displays (the table's rows aligned in a code block); where Discord refuses the layout it is posted as plain text; an
answer without structure is posted as before. An answer shown while it is written ends in the layout: its message is
edited into it once complete. Through the real discord.py client and the fake Discord."""

from __future__ import annotations

import core
from tests.fakes.discord_server import IS_COMPONENTS_V2, layout_text

from .conftest import StartBot, World, answers, say

TABLE = "## Prices\n\n| fruit | price |\n|---|---|\n| apple | 1 |\n| pear | 2 |\n\n## Note\nPrices in euros."


async def test_a_table_is_laid_out_with_components_v2(world: World, start_bot: StartBot) -> None:
    await start_bot(answers(TABLE), stream_replies=False)
    asked = await world.fake.say(world.dm, "prices?", author=world.alice)
    [reply] = await world.fake.wait_posted(world.dm, 1)
    assert int(reply["flags"]) & IS_COMPONENTS_V2 and reply["content"] == ""
    [container] = reply["components"]
    assert container["type"] == 17  # a container: text display, separator, text display
    assert [c["type"] for c in container["components"]] == [10, 14, 10]
    shown = layout_text(reply)
    assert "## Prices" in shown and "apple  1" in shown and "```" in shown and "Prices in euros." in shown
    assert reply["message_reference"]["message_id"] == asked["id"]


async def test_a_refused_layout_falls_back_to_text(world: World, start_bot: StartBot) -> None:
    world.fake.refuse_layout = True
    await start_bot(answers(TABLE), stream_replies=False)
    await world.fake.say(world.dm, "prices?", author=world.alice)
    [reply] = await world.fake.wait_posted(world.dm, 1)
    assert not int(reply["flags"]) & IS_COMPONENTS_V2 and "| apple | 1 |" in reply["content"]


async def test_plain_answers_and_the_setting_off_post_text(world: World, start_bot: StartBot) -> None:
    await start_bot(answers(TABLE), stream_replies=False, components_v2=False)
    await world.fake.say(world.dm, "prices?", author=world.alice)
    [reply] = await world.fake.wait_posted(world.dm, 1)
    assert not int(reply["flags"]) & IS_COMPONENTS_V2 and "| apple | 1 |" in reply["content"]


async def test_a_streamed_answer_with_a_table_ends_in_the_layout(world: World, start_bot: StartBot) -> None:
    model = core.ScriptedModel([say(TABLE), say("Just **one** line.")], chunk_size=4, delay=0.01)
    await start_bot(model, stream_replies=True, stream_interval=0.05)
    asked = await world.fake.say(world.dm, "prices?", author=world.alice)
    [reply] = await world.fake.wait_posted(world.dm, 1, timeout=60)
    await world.fake.wait_until(lambda: int(reply.get("flags") or 0) & IS_COMPONENTS_V2, timeout=60)
    assert reply["content"] == "" and reply["message_reference"]["message_id"] == asked["id"]
    shown = layout_text(reply)
    assert "## Prices" in shown and "apple  1" in shown and "Prices in euros." in shown
    assert not [c for c in reply["components"] if c["type"] == 1]  # the Stop button went with the text
    # an answer without structure is finished as text
    await world.fake.say(world.dm, "and?", author=world.alice)
    [_, plain] = await world.fake.wait_posted(world.dm, 2, timeout=60)
    await world.fake.wait_until(lambda: plain["content"] == "Just **one** line.", timeout=60)
    assert not int(plain.get("flags") or 0) & IS_COMPONENTS_V2


async def test_a_refused_layout_leaves_the_streamed_answer_as_text(world: World, start_bot: StartBot) -> None:
    world.fake.refuse_layout = True
    await start_bot(core.ScriptedModel([say(TABLE)], chunk_size=4, delay=0.01), stream_replies=True)
    await world.fake.say(world.dm, "prices?", author=world.alice)
    [reply] = await world.fake.wait_posted(world.dm, 1, timeout=60)
    await world.fake.wait_until(lambda: reply["content"] == TABLE, timeout=60)
    await world.fake.wait_until(
        lambda: [r for r in world.fake.requests if r.method == "PATCH" and r.status == 400], timeout=60
    )
    assert not int(reply.get("flags") or 0) & IS_COMPONENTS_V2 and reply["content"] == TABLE
