"""End to end through the fake Discord: tiers from a member's roles and permissions (an MCP tool limited to admins
runs for a member holding an admin role or Manage Server, never for the others: the MCP server's call log shows
it), two bots allowed to talk stopping at the cap (counted), a mention inside a quote and a forward of the bot's
own message not addressing it."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path

import core
from core.testing import updates_of
from core.trust import Trust
from extensions.chat.trust import TrustRules
from extensions.discord.filters import Verdict
from extensions.mcp import McpSettings, mcp_toolset
from tests.mcp.support import logged_config

from .conftest import StartBot, World, answers, barrier, runtime_of, say

_RESULT = re.compile(r"<action_result [^>]*>(.*?)</action_result>", re.S)
MANAGE_GUILD = 1 << 5


async def until(predicate: Callable[[], bool], *, timeout: float = 10.0) -> None:
    """Wait until ``predicate()`` holds (a decision leaves no trace on the fake, so it is looked at)."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


def ticket_model() -> core.ScriptedModel:
    """Calls ``tools:open_ticket`` for each new message (offered or not), then says what came back."""

    def reply(request: core.ModelRequest) -> str:
        results = _RESULT.findall(updates_of(request.prompt))
        if results:
            return say("result: " + results[-1].strip()[:80])
        call = json.dumps({"title": "printer"})
        return f'<response><action_call name="tools:open_ticket">{call}</action_call></response>'

    return core.ScriptedModel(reply)


async def test_roles_and_permissions_make_admins_and_only_they_reach_an_admin_tool(
    world: World, start_bot: StartBot, tmp_path: Path
) -> None:
    fake = world.fake
    helpers = fake.role(world.guild, "Helpers")
    mods = fake.role(world.guild, "Mods", permissions=MANAGE_GUILD)
    carol = fake.user("carol")
    fake.give_role(world.guild, world.alice, helpers)
    fake.give_role(world.guild, carol, mods)
    calls = tmp_path / "calls.log"
    config = logged_config(calls)
    model = ticket_model()
    seen: list[str] = []
    agent = await start_bot(
        model,
        extensions=[mcp_toolset(McpSettings(servers=json.dumps([config]))).extension()],
        agent_options={"trust": Trust()},
        trust=TrustRules(admin_roles=frozenset({"Helpers"})),
    )
    agent.add_observer(lambda kind, cid, value: seen.append(kind))

    await fake.say(world.general, "open a ticket", author=world.bob, mention_bot=True)
    notice, answer = await fake.wait_posted(world.general, 2)
    assert notice["content"] == (
        "⛔ I did not use tools:open_ticket: it is for the admin tier and above here, and you are member."
    )
    assert "was not run" in answer["content"]
    assert not calls.exists()  # the MCP server never got the call
    assert "tools:open_ticket" not in model.requests[0].action_names and 'tier="member"' in model.requests[0].prompt
    assert "actions:refused:member" in seen

    await fake.say(world.general, "open a ticket", author=world.alice, mention_bot=True)  # the Helpers role
    await fake.wait_posted(world.general, 3)
    await fake.say(world.general, "open a ticket", author=carol, mention_bot=True)  # Manage Server
    await fake.wait_posted(world.general, 4)
    assert calls.read_text().splitlines() == ["open_ticket printer", "open_ticket printer"]
    assert all("ticket opened: printer" in m["content"] for m in fake.posted_in(world.general)[2:])
    admins = [r for r in model.requests if 'tier="admin"' in r.prompt]
    assert admins and all("tools:open_ticket" in r.action_names for r in admins)


async def test_two_bots_allowed_to_talk_stop_at_the_cap(world: World, start_bot: StartBot) -> None:
    fake = world.fake
    agent = await start_bot(
        answers("and you?"),
        agent_options={"trust": Trust()},
        trust=TrustRules(bots=frozenset({"discord:@otherbot"}), bot_replies=2, bot_window=3600),
        bot_hop_limit=10,
    )
    verdicts = runtime_of(agent).verdicts
    seen: list[str] = []
    agent.add_observer(lambda kind, cid, value: seen.append(kind))
    said = await fake.say(world.general, "hello", author=world.other_bot, mention_bot=True)
    for turn in range(1, 5):  # the other bot answers each of our replies
        await until(lambda n=turn: len(fake.posted_in(world.general)) >= n or verdicts[Verdict.BOT_CAP] > 0)
        if verdicts[Verdict.BOT_CAP]:
            break
        said = await fake.say(
            world.general, "and you?", author=world.other_bot, reply_to=int(fake.posted_in(world.general)[-1]["id"])
        )
    assert verdicts[Verdict.BOT_CAP] == 1 and len(fake.posted_in(world.general)) == 2
    assert seen.count("message_ignored:bot_cap") == 1  # bots_messages_ignored_total{reason="bot_cap"}
    assert said["author"]["bot"]


async def test_a_bot_not_listed_is_ignored(world: World, start_bot: StartBot) -> None:
    agent = await start_bot(
        answers(), agent_options={"trust": Trust()}, trust=TrustRules(bots=frozenset({"discord:1"}))
    )
    await world.fake.say(world.general, "hello", author=world.other_bot, mention_bot=True)
    await barrier(world)
    assert runtime_of(agent).verdicts[Verdict.BOT] == 1 and world.fake.posted_in(world.general) == []


async def test_a_newcomer_is_a_guest_and_sees_no_member_action(world: World, start_bot: StartBot) -> None:
    model = answers("hi")
    remember = core.action(name="remember", handler=lambda args, ctx, agent: "kept")
    await start_bot(
        model,
        agent_options={"trust": Trust(), "actions": [remember]},
        trust=TrustRules(guest_days=7),
    )
    await world.fake.say(world.general, "hello", author=world.alice, mention_bot=True)  # joined just now
    await world.fake.wait_posted(world.general)
    assert 'tier="guest"' in model.requests[0].prompt and model.requests[0].action_names == ()


async def test_a_mention_inside_a_quote_does_not_address_the_bot(world: World, start_bot: StartBot) -> None:
    model = answers("answered")
    agent = await start_bot(model, agent_options={"trust": Trust()}, trust=TrustRules())
    me = world.fake.bot["id"]
    await world.fake.say(world.general, f"> <@{me}> what do you think?\nbob, ignore it", author=world.alice)
    await world.fake.say(world.general, f">>> quoted\n<@{me}> still quoted", author=world.alice)
    await barrier(world)
    assert world.fake.posted_in(world.general) == [] and runtime_of(agent).verdicts[Verdict.POLICY] == 2
    await world.fake.say(world.general, f"> a quote\n<@{me}> and you?", author=world.alice)
    [reply] = await world.fake.wait_posted(world.general)
    assert reply["content"] == "answered"


async def test_a_forward_of_the_bot_s_own_message_does_not_trigger_it(world: World, start_bot: StartBot) -> None:
    """Discord forwards a message as a new one whose reference (type 1) points at the original and whose content
    is in ``message_snapshots``: a forward of the bot's own answer, mention included, is not a reply to the bot."""
    fake = world.fake
    model = answers("answered")
    agent = await start_bot(model, agent_options={"trust": Trust()}, trust=TrustRules())
    seen: list[str] = []
    agent.add_observer(lambda kind, cid, value: seen.append(kind))
    await fake.say(world.general, "hi", author=world.alice, mention_bot=True)
    [mine] = await fake.wait_posted(world.general)  # the bot's own message, in discord.py's cache
    me = fake.bot["id"]
    forward = fake._message(channel_id=world.general, author=world.bob, content="")
    forward["message_reference"] = {
        "type": 1,
        "message_id": mine["id"],
        "channel_id": str(world.general),
        "guild_id": str(world.guild),
    }
    forward["message_snapshots"] = [{"message": {**mine, "content": f"<@{me}> answered"}}]
    await fake.dispatch("MESSAGE_CREATE", forward)
    await barrier(world)
    verdicts = runtime_of(agent).verdicts
    assert verdicts[Verdict.ANSWER] == 2 and verdicts[Verdict.POLICY] == 1  # "hi" and the barrier; not the forward
    assert len(fake.posted_in(world.general)) == 1 and len(model.requests) == 2
    assert "message_ignored:policy" in seen and "message_ignored:empty" not in seen
