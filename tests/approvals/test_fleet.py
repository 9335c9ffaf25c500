"""Approvals in a fleet: ``bots gateway`` and two ``bots worker`` processes on a real redis-server, the fake Bot
API, a fake OpenAI-compatible model, and the test MCP server's ``open_ticket`` marked ``approve``. The worker that
asked is killed with SIGKILL while the request is pending; the gateway decides the presses (a member's refused),
the other worker runs the approved call once (the MCP server's call log) and the model tells the outcome; a denial
is told too. With a short ``ACTIONS_APPROVAL_TIMEOUT``, a request nobody answers expires and the model is told."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

from extensions.telegram.definitions import MESSAGE
from tests.approvals.support import POLICY
from tests.bots_fleet import DEADLINE, Process, model_settings, start_fleet, stop_all
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer, SentMessage
from tests.fleet.server import RedisServer
from tests.mcp.support import logged_config

GROUP, MEMBER, ADMIN = -100800, 1001, 2002
CALL = '<response><action_call name="tools:open_ticket">{"title": "printer"}</action_call></response>'
ASKED = "Asked an admin."


def say(text: str) -> Reply:
    return Reply(chunks=(f'<response><output type="{MESSAGE}">{text}</output></response>',))


def fleet_env(tmp_path: Path, telegram: FakeTelegramServer, redis: RedisServer, model: str, **more: str) -> dict:
    calls = tmp_path / "calls.log"
    config = logged_config(calls)
    return model_settings(
        redis,
        telegram,
        model,
        REDIS_LEASE_SECONDS="5",
        MCP_SERVERS=json.dumps([config]),
        ACTIONS_POLICY=POLICY,
        **more,
    )


async def ask(telegram: FakeTelegramServer, count: int) -> SentMessage:
    """A member asks for a ticket; the request with its buttons (the bot also says it asked)."""
    telegram.user_says("@daydream_test_bot open a ticket", user_id=MEMBER, chat_id=GROUP)
    sent = await telegram.wait_replies(count, chat_id=GROUP, timeout=DEADLINE)
    return [m for m in sent if m.buttons][-1]


async def asked_by(workers: list[Process]) -> Process:
    """The worker whose run asked for the approval (its audit line)."""
    waits = {asyncio.ensure_future(w.wait_for("open_ticket approval requested (tier member)")): w for w in workers}
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return waits[done.pop()]


async def test_an_approval_pending_while_its_worker_is_killed_runs_once_on_the_other(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, processes: list[Process]
) -> None:
    calls = tmp_path / "calls.log"
    telegram.chat(GROUP, kind="supergroup")
    telegram.admins[GROUP] = {ADMIN}
    replies = [Reply(chunks=(CALL,)), say(ASKED), say("Ticket opened."), Reply(chunks=(CALL,)), say(ASKED)]
    replies.append(say("An admin said no."))
    async with FakeOpenAIServer(replies=replies) as model:
        shared = fleet_env(tmp_path, telegram, redis_server, model.url)
        gateway, workers = await start_fleet(tmp_path, shared, processes, workers=2)

        request = await ask(telegram, 2)
        assert "tools:open_ticket" in request.text and set(request.buttons) == {"✅ Approve", "❌ Deny"}
        assert any(m.text == ASKED for m in telegram.sent)
        asker = await asked_by(workers)
        assert asker.proc is not None
        asker.proc.send_signal(signal.SIGKILL)  # the approval is pending: nothing of it lives in the worker
        await asker.proc.wait()
        survivor = next(w for w in workers if w is not asker)

        telegram.user_presses(request, "✅ Approve", user_id=MEMBER)
        await telegram.wait_for(lambda: len(telegram.callback_answers) == 1, timeout=DEADLINE)
        assert "Only the chat's admins" in telegram.callback_answers[0]["text"]
        assert not calls.exists()

        telegram.user_presses(request, "✅ Approve", user_id=ADMIN, first_name="Ada")
        await telegram.wait_for(lambda: any(m.text == "Ticket opened." for m in telegram.sent), timeout=DEADLINE)
        assert calls.read_text().splitlines() == ["open_ticket printer"]
        told = json.dumps(model.requests[2].body)
        assert "approved the call of tools:open_ticket" in told and "ticket opened: printer" in told
        assert 'tier=\\"member\\"' in told
        await survivor.wait_for("the approved call of tools:open_ticket ran")
        assert request.text.endswith("✅ Approved by Ada.") and not request.buttons
        line = await gateway.wait_for("open_ticket approved (tier member)")
        assert line.get("correlation_id", "").startswith("telegram:")

        second = await ask(telegram, 5)
        telegram.user_presses(second, "❌ Deny", user_id=ADMIN, first_name="Ada")
        await telegram.wait_for(lambda: any(m.text == "An admin said no." for m in telegram.sent), timeout=DEADLINE)
        assert "denied the call of tools:open_ticket" in json.dumps(model.requests[5].body)
        assert calls.read_text().splitlines() == ["open_ticket printer"]  # once, whatever happened since
        requests = [m for m in telegram.sent if m.text.startswith("🔐")]
        assert len(requests) == 2, [m.text[:40] for m in telegram.sent]  # asked once each, killed worker or not
    await stop_all(gateway, survivor)


async def test_a_request_nobody_answers_expires_in_the_fleet_and_the_model_is_told(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, processes: list[Process]
) -> None:
    calls = tmp_path / "calls.log"
    telegram.chat(GROUP, kind="supergroup")
    telegram.admins[GROUP] = {ADMIN}
    replies = [Reply(chunks=(CALL,)), say(ASKED), say("Nobody approved it.")]
    async with FakeOpenAIServer(replies=replies) as model:
        shared = fleet_env(tmp_path, telegram, redis_server, model.url, ACTIONS_APPROVAL_TIMEOUT="1")
        gateway, [worker] = await start_fleet(tmp_path, shared, processes)

        request = await ask(telegram, 1)
        await telegram.wait_for(lambda: any(m.text == "Nobody approved it." for m in telegram.sent), timeout=DEADLINE)
        assert "it expired" in json.dumps(model.requests[2].body)
        await telegram.wait_for(lambda: not request.buttons, timeout=DEADLINE)
        assert "Expired" in request.text
        await worker.wait_for("open_ticket expired (tier member)")
        assert not calls.exists()
    await stop_all(gateway, worker)
