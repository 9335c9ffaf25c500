"""Components v2 (issue 54, point 3): an answer with structure, posted whole, is laid out as a container of text
displays (the table's rows aligned in a code block); where Discord refuses the layout it is posted as plain text; an
answer without structure is posted as before. Through the real discord.py client and the fake Discord."""

from __future__ import annotations

from tests.fakes.discord_server import IS_COMPONENTS_V2, layout_text

from .conftest import StartBot, World, answers

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
