"""End to end through the fake Discord: an MCP tool whose rule says ``approve`` (core.approvals). The request goes
to the channel with Approve / Deny buttons (components); a member's press gets an ephemeral refusal; a press by a
member with Manage Server runs the call once (the MCP server's call log) and the outcome continues the
conversation; a denial and a timeout are told to the model."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import core
from core.approvals import Approval, ApprovalStatus
from extensions.chat.approvals import settled_text
from extensions.chat.i18n import say as say_in
from extensions.chat.trust import TrustRules
from extensions.discord.definitions import ChannelArgs, discord_channel
from tests.approvals.support import approval_extensions, approval_model, approval_options
from tests.fakes.discord_server import Json

from .conftest import StartBot, World, say

MANAGE_GUILD = 1 << 5
EPHEMERAL = 64


async def start(world: World, start_bot: StartBot, tmp_path: Path, **desk: Any) -> tuple[core.Agent, Path, list[str]]:
    calls = tmp_path / "calls.log"
    model = approval_model(say, title="printer <@&1> **bold**", waiting=lambda result: "waiting for an admin")
    agent = await start_bot(
        model,
        extensions=approval_extensions(calls, **desk),
        agent_options=approval_options(),
        trust=TrustRules(),
    )
    kinds: list[str] = []
    agent.add_observer(lambda kind, cid, value: kinds.append(kind))
    return agent, calls, kinds


async def ask(world: World, count: int = 2) -> Json:
    """Bob asks for a ticket: the request with its buttons (the bot also says it waits)."""
    fake = world.fake
    await fake.say(world.general, "open a ticket", author=world.bob, mention_bot=True)
    posted = await fake.wait_posted(world.general, count)
    assert posted[-1]["content"] == "waiting for an admin"
    return next(m for m in reversed(posted) if m["content"].startswith("🔐"))  # (an answer written has Stop)


async def test_an_admins_press_runs_the_call_once_and_a_members_press_is_refused(
    world: World, start_bot: StartBot, tmp_path: Path
) -> None:
    fake = world.fake
    _, calls, kinds = await start(world, start_bot, tmp_path)
    request = await ask(world)
    assert set(fake.buttons(request)) == {"Approve", "Deny"}
    assert "`bob` (discord:" in request["content"] and "use `tools:open_ticket` with `" in request["content"]
    assert not request["mention_roles"]  # the arguments' mention is inert
    assert not calls.exists()
    assert "actions:approval_requested:member" in kinds

    refused = await fake.press(request, "Approve", user=world.bob)
    await fake.wait_until(lambda: refused in fake.interaction_responses)
    answer = fake.interaction_responses[refused]
    assert answer["type"] == 4 and answer["data"]["flags"] == EPHEMERAL
    assert "Only the chat's admins" in answer["data"]["content"]
    assert fake.buttons(request) and not calls.exists()

    pressed = await fake.press(request, "Approve", user=world.alice, permissions=MANAGE_GUILD)
    posted = await fake.wait_posted(world.general, 3)
    assert posted[-1]["content"].startswith("approved, ") and "ticket opened: printer" in posted[-1]["content"]
    assert len(calls.read_text().splitlines()) == 1
    assert fake.interaction_responses[pressed]["type"] == 7
    assert not fake.buttons(request) and request["content"].endswith("✅ Approved by `alice`.")
    assert "actions:approved:member" in kinds

    again = await fake.press(request, "Approve", user=world.alice, permissions=MANAGE_GUILD)
    await fake.wait_until(lambda: again in fake.interaction_responses)
    assert "already" in fake.interaction_responses[again]["data"]["content"]
    assert len(calls.read_text().splitlines()) == 1 and len(fake.posted_in(world.general)) == 3


async def test_the_request_and_the_answers_are_in_the_channel_s_language(
    world: World, start_bot: StartBot, tmp_path: Path
) -> None:
    fake = world.fake
    agent, calls, _ = await start(world, start_bot, tmp_path)
    channel = ChannelArgs(channel_id=world.general, guild_id=world.guild)
    await agent.chat_settings.change(agent.context_id(discord_channel, channel), language="fr")
    request = await ask(world)
    assert set(fake.buttons(request)) == {"Approuver", "Refuser"}
    assert "Approbation requise dans cette conversation : `bob` (discord:" in request["content"]
    assert "m'a demandé d'utiliser `tools:open_ticket` avec `" in request["content"]
    refused = await fake.press(request, "Approuver", user=world.bob)
    await fake.wait_until(lambda: refused in fake.interaction_responses)
    assert fake.interaction_responses[refused]["data"]["content"] == say_in("approval.not_allowed", "fr")
    await fake.press(request, "Refuser", user=world.alice, permissions=MANAGE_GUILD)
    await fake.wait_until(lambda: not fake.buttons(request))
    assert request["content"].endswith("❌ Refusée par `alice` ; elle n'a pas été exécutée.")
    assert not calls.exists()


async def test_a_denial_and_a_timeout_are_told_to_the_model(world: World, start_bot: StartBot, tmp_path: Path) -> None:
    fake = world.fake
    _, calls, kinds = await start(world, start_bot, tmp_path, timeout=3.0, poll=0.1)
    request = await ask(world)
    await fake.press(request, "Deny", user=world.alice, permissions=MANAGE_GUILD)
    posted = await fake.wait_posted(world.general, 3)
    assert posted[-1]["content"] == "an admin denied it"
    assert request["content"].endswith("❌ Denied by `alice`; it was not run.")

    second = await ask(world, 5)  # nobody answers this one
    await fake.wait_until(
        lambda: any(m["content"] == "nobody approved it in time" for m in fake.posted_in(world.general))
    )
    await fake.wait_until(lambda: not fake.buttons(second))
    assert "Expired" in second["content"]
    assert not calls.exists()
    assert "actions:denied:member" in kinds and "actions:expired:member" in kinds


async def test_a_press_forged_in_another_channel_decides_nothing(
    world: World, start_bot: StartBot, tmp_path: Path
) -> None:
    """A member who manages another channel sends the request's custom id from a message there (a client may send
    any custom id): their permissions are those of that channel, so the press must not count for this request."""
    fake = world.fake
    _, calls, _ = await start(world, start_bot, tmp_path)
    request = await ask(world)
    other = fake.text_channel(world.guild, "other")
    elsewhere = {**request, "channel_id": str(other), "id": str(int(request["id"]) + 1000)}
    forged = await fake.press(elsewhere, "Approve", user=world.bob, permissions=MANAGE_GUILD)
    await fake.wait_until(lambda: forged in fake.interaction_responses)
    assert fake.interaction_responses[forged]["data"]["content"] == "This request is no longer known."
    assert fake.buttons(request) and not calls.exists()


def test_the_deciders_name_is_shown_inert() -> None:
    """A display name is the user's own text: in Discord's Markdown it is code, like the asker's."""
    now = time.time()
    approval = Approval(
        id="a1",
        conversation="discord:1",
        context="discord:channel",
        action="tools:open_ticket",
        address="mcp:tickets:open_ticket",
        arguments="{}",
        created_at=now,
        expires_at=now + 60,
        status=ApprovalStatus.APPROVED,
        decided_by="discord:7",
        decider="[Support](https://evil.example) `x`",
    )
    shown = settled_text(approval, escape=True)
    assert shown.endswith("✅ Approved by `[Support](https://evil.example) 'x'`.")
    assert settled_text(approval).endswith("✅ Approved by [Support](https://evil.example) `x`.")  # Telegram: text
