"""``/catchup`` on Discord through the real discord.py client and the fake Discord (issue 53): the summary links to
the messages it cites (``discord.com/channels/<server>/<channel>/<message>``), and ``/catchup private`` lands in a
DM channel the bot opens with the person (POST /users/@me/channels), the channel told so; a person who takes no
direct messages gets nothing in private and nothing breaks."""

from __future__ import annotations

from pathlib import Path

from bots.catchup_settings import message_link, private_chat
from core import ModelRequest, ScriptedModel
from core.catchup import CatchUp
from core.memory import SQLiteHistory
from extensions.chat.policy import ReplyPolicy

from .conftest import StartBot, World, say


def model(request: ModelRequest) -> str:
    if "You summarize a group chat" in request.system:  # cites carol's question by its number in the prompt
        found = [line[1:].split("]")[0] for line in request.prompt.splitlines() if "the release?" in line]
        number = found[0] if found else "1"
        return f"- bob moved the release to Friday [{number}]"
    return say("noted")


def dms_of(world: World, user_id: str) -> list[int]:
    return [
        cid
        for cid, channel in world.fake.channels.items()
        if channel.get("type") == 1 and channel["recipients"][0]["id"] == user_id
    ]


async def test_catchup_links_to_the_cited_messages_and_goes_to_a_dm(
    world: World, start_bot: StartBot, tmp_path: Path
) -> None:
    fake, general = world.fake, world.general
    carol = fake.user("carol")
    history = SQLiteHistory(tmp_path / "history.sqlite3")
    plugin = CatchUp(history, link=message_link, private=private_chat)
    await start_bot(
        ScriptedModel(model), reply_policy=ReplyPolicy.ALWAYS, agent_options={"history": history, "plugins": [plugin]}
    )
    await fake.say(general, "I am off until Monday", author=world.alice)
    await fake.wait_posted(general, 1)
    sent = {}
    for text, who in (("the release?", carol), ("moved to Friday", world.bob), ("ok", carol)):
        sent[text] = await fake.say(general, text, author=who)
        await fake.wait_posted(general, len(fake.posted_in(general)) + 1)
    before = len(fake.posted_in(general))
    await fake.say(general, "/catchup", author=world.alice)
    digest = (await fake.wait_posted(general, before + 1))[-1]["content"]
    assert digest.startswith("Since your last message (")
    assert "bob moved the release to Friday [2]" in digest
    assert ": 7 messages." in digest.split("\n", 1)[0]  # the bot's answers count: [1] is its answer to alice
    question = sent["the release?"]["id"]
    assert digest.endswith(f"Messages: [2] https://discord.com/channels/{world.guild}/{general}/{question}")

    # in private: the bot opens the DM channel with bob (none was open) and posts the digest there
    assert dms_of(world, world.bob["id"]) == []
    before = len(fake.posted_in(general))
    await fake.say(general, "/catchup 1h private", author=world.bob)
    notice = (await fake.wait_posted(general, before + 1))[-1]["content"]
    assert notice.startswith("I sent you the catch-up in private")
    await fake.wait_until(lambda: dms_of(world, world.bob["id"]))
    [dm] = dms_of(world, world.bob["id"])
    [private] = await fake.wait_posted(dm, 1)
    assert private["content"].startswith("Since the last hour: ")
    # [3] since an hour ago (alice's message, the bot's answer, carol's question): a link into the server's channel
    assert private["content"].endswith(f"Messages: [3] https://discord.com/channels/{world.guild}/{general}/{question}")
    assert "Since" not in "".join(m["content"] for m in fake.posted_in(general)[before + 1 :])

    # carol takes no direct messages: Discord refuses the DM (50007); the channel got its notice, nothing else
    fake.dms_closed.add(carol["id"])
    before = len(fake.posted_in(general))
    await fake.say(general, "/catchup private", author=carol)
    notice = (await fake.wait_posted(general, before + 1))[-1]["content"]
    assert notice.startswith("I sent you the catch-up in private")
    await fake.wait_until(lambda: dms_of(world, carol["id"]))
    [closed] = dms_of(world, carol["id"])
    await fake.say(general, "still there?", author=world.alice)
    await fake.wait_posted(general, before + 2)  # the bot still answers the channel
    assert fake.posted_in(closed) == []
    await history.close()
