"""Approvals in a fleet on Discord: ``bots gateway`` (the real discord.py client on the fake gateway) and two
``bots worker`` processes (REST only) on a real redis-server, a fake OpenAI-compatible model, and the test MCP
server's ``open_ticket`` marked ``approve``. The worker that asked is killed with SIGKILL while the request is
pending; the gateway decides the presses (a member's refused, ephemeral), the other worker runs the approved call
once (the MCP server's call log) and the model tells the outcome."""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.approvals.support import POLICY
from tests.approvals.test_fleet import asked_by
from tests.bots_fleet import DEADLINE, Process, start_fleet, stop_all
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fleet.server import RedisServer
from tests.mcp.support import logged_config

CALL = '<response><action_call name="tools:open_ticket">{"title": "printer"}</action_call></response>'
ASKED = "Asked an admin."
MANAGE_GUILD = 1 << 5
EPHEMERAL = 64


def say(text: str) -> Reply:
    return Reply(chunks=(f'<response><output type="discord:message">{text}</output></response>',))


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        yield fake
    assert fake.unhandled == [], fake.unhandled


async def test_an_approval_pending_while_its_worker_is_killed_runs_once_on_the_other(
    tmp_path: Path, discord: FakeDiscord, redis_server: RedisServer, processes: list[Process]
) -> None:
    calls = tmp_path / "calls.log"
    guild = discord.guild()
    general = discord.text_channel(guild, "general")
    alice, bob = discord.user("alice"), discord.user("bob")
    replies = [Reply(chunks=(CALL,)), say(ASKED), say("Ticket opened.")]
    async with FakeOpenAIServer(replies=replies) as model:
        shared = {
            "REDIS_URL": redis_server.url,
            "REDIS_LEASE_SECONDS": "5",
            "DISCORD_TOKEN": "fake-token",
            "DISCORD_API_URL": discord.api_url,
            "DISCORD_GATEWAY_URL": discord.gateway_url,
            "DISCORD_GUILD_READY_TIMEOUT": "0.05",
            "DISCORD_SYNC_COMMANDS": "false",
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": model.url,
            "LLM_API_KEY": "sk-test",
            "LLM_MODEL": "fake-model",
            "MCP_SERVERS": json.dumps([logged_config(calls)]),
            "ACTIONS_POLICY": POLICY,
        }
        gateway, workers = await start_fleet(tmp_path, shared, processes, workers=2)
        await discord.wait_until(lambda: discord.shards_connected() == {0}, timeout=DEADLINE)

        await discord.say(general, "open a ticket", author=bob, mention_bot=True)
        posted = await discord.wait_posted(general, 2, timeout=DEADLINE)
        request = next(m for m in posted if m["content"].startswith("🔐"))  # (an answer written has Stop)
        assert "tools:open_ticket" in request["content"] and set(discord.buttons(request)) == {"Approve", "Deny"}
        assert any(m["content"] == ASKED for m in posted)
        asker = await asked_by(workers)
        assert asker.proc is not None
        asker.proc.send_signal(signal.SIGKILL)  # the approval is pending: nothing of it lives in the worker
        await asker.proc.wait()
        survivor = next(w for w in workers if w is not asker)

        refused = await discord.press(request, "Approve", user=bob)
        await discord.wait_until(lambda: refused in discord.interaction_responses, timeout=DEADLINE)
        answer = discord.interaction_responses[refused]
        assert answer["data"]["flags"] == EPHEMERAL and "Only the chat's admins" in answer["data"]["content"]
        assert not calls.exists() and discord.buttons(request)

        await discord.press(request, "Approve", user=alice, permissions=MANAGE_GUILD)
        await discord.wait_until(
            lambda: any(m["content"] == "Ticket opened." for m in discord.posted_in(general)), timeout=DEADLINE
        )
        assert calls.read_text().splitlines() == ["open_ticket printer"]
        told = json.dumps(model.requests[2].body)
        assert "approved the call of tools:open_ticket" in told and "ticket opened: printer" in told
        assert 'tier=\\"member\\"' in told
        await survivor.wait_for("the approved call of tools:open_ticket ran")
        assert not discord.buttons(request) and request["content"].endswith("✅ Approved by `alice`.")
        await gateway.wait_for("open_ticket approved (tier member)")
    await stop_all(gateway, survivor)
