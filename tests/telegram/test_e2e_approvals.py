"""End to end through the fake Bot API: an MCP tool whose rule says ``approve`` (core.approvals). The call is not
run; the request with Approve / Deny buttons goes to the group; a member's press is refused with an alert; an
admin's press runs the call once (the MCP server's call log has one line, a second press changes nothing) and the
outcome continues the conversation in a new run; a denial and a timeout are told to the model."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from core import Agent, ScriptedModel
from extensions.chat.i18n import say as say_in
from extensions.chat.trust import TrustRules
from extensions.telegram.definitions import MESSAGE, ChatArgs, telegram_chat
from tests.approvals.support import approval_extensions, approval_model, approval_options
from tests.fakes.telegram_server import FakeTelegramServer, SentMessage

from .conftest import StartBot

GROUP = -100700
MEMBER, ADMIN = 1001, 2002


def say(text: str) -> str:
    return f'<response><output type="{MESSAGE}">{text}</output></response>'


def waiting(result: str) -> str:
    return "waiting: " + ("yes" if "waiting for an admin" in result else result[:80])


async def start(
    server: FakeTelegramServer, start_bot: StartBot, tmp_path: Path, **desk: Any
) -> tuple[Agent, ScriptedModel, Path, list[str]]:
    calls = tmp_path / "calls.log"
    model = approval_model(say, title="printer", waiting=waiting)
    server.chat(GROUP, kind="supergroup")
    server.admins[GROUP] = {ADMIN}
    agent = await start_bot(
        model, extensions=approval_extensions(calls, **desk), agent_options=approval_options(), trust=TrustRules()
    )
    kinds: list[str] = []
    agent.add_observer(lambda kind, cid, value: kinds.append(kind))
    return agent, model, calls, kinds


async def ask(server: FakeTelegramServer) -> tuple[SentMessage, SentMessage]:
    """A member asks for a ticket: the request with its buttons, and the bot's answer that it waits."""
    server.user_says("@daydream_test_bot open a ticket", user_id=MEMBER, chat_id=GROUP)
    sent = await server.wait_replies(2, chat_id=GROUP)
    request = next(m for m in sent if m.buttons)
    answer = next(m for m in sent if not m.buttons)
    return request, answer


async def test_an_admins_press_runs_the_call_once_and_a_members_press_is_refused(
    server: FakeTelegramServer, start_bot: StartBot, tmp_path: Path
) -> None:
    _, model, calls, kinds = await start(server, start_bot, tmp_path)
    request, answer = await ask(server)
    assert set(request.buttons) == {"✅ Approve", "❌ Deny"}
    assert "Approval needed: @ann (telegram:1001) asked me to use tools:open_ticket" in request.text
    assert '{"title": "printer"}' in request.text
    assert answer.text == "waiting: yes"
    assert not calls.exists()  # not run: it waits
    assert "actions:approval_requested:member" in kinds

    server.user_presses(request, "✅ Approve", user_id=MEMBER)
    await server.wait_for(lambda: len(server.callback_answers) == 1)
    refusal = server.callback_answers[0]
    assert refusal["show_alert"] is True and "Only the chat's admins" in refusal["text"]
    assert not calls.exists() and request.buttons  # still pending

    server.user_presses(request, "✅ Approve", user_id=ADMIN, first_name="Ada")
    *_, done = await server.wait_replies(3, chat_id=GROUP)
    assert done.text.startswith("approved, ") and "ticket opened: printer" in done.text
    assert calls.read_text().splitlines() == ["open_ticket printer"]
    # (the request's edit and the run's answer go out side by side: either may land first)
    await server.wait_for(lambda: request.text.endswith("✅ Approved by Ada."))
    assert not request.buttons
    assert server.callback_answers[1]["text"] == "Approved: it runs now."
    assert "actions:approved:member" in kinds

    server.user_presses(dataclasses.replace(request, reply_markup=keyboard_of(server)), "✅ Approve", user_id=ADMIN)
    await server.wait_for(lambda: len(server.callback_answers) == 3)
    assert "already" in server.callback_answers[2]["text"]
    assert calls.read_text().splitlines() == ["open_ticket printer"]  # once
    assert len(server.sent) == 3
    follow_up = model.requests[-1]
    assert 'tier="member"' in follow_up.prompt  # the new run acts for the member who asked


async def test_a_denial_is_told_to_the_model_and_nothing_runs(
    server: FakeTelegramServer, start_bot: StartBot, tmp_path: Path
) -> None:
    _, _, calls, kinds = await start(server, start_bot, tmp_path)
    request, _ = await ask(server)
    server.user_presses(request, "❌ Deny", user_id=ADMIN, first_name="Ada")
    *_, told = await server.wait_replies(3, chat_id=GROUP)
    assert told.text == "an admin denied it"
    await server.wait_for(lambda: request.text.endswith("❌ Denied by Ada; it was not run."))  # (either may be first)
    assert not request.buttons
    assert not calls.exists()
    assert "actions:denied:member" in kinds


async def test_a_request_nobody_answers_expires_and_the_model_is_told(
    server: FakeTelegramServer, start_bot: StartBot, tmp_path: Path
) -> None:
    _, _, calls, kinds = await start(server, start_bot, tmp_path, timeout=3.0, poll=0.1)
    request, _ = await ask(server)
    *_, told = await server.wait_replies(3, chat_id=GROUP, timeout=30)
    assert told.text == "nobody approved it in time"
    await server.wait_for(lambda: not request.buttons, timeout=30)
    assert "Expired: nobody answered in time" in request.text
    server.user_presses(dataclasses.replace(request, reply_markup=keyboard_of(server)), "✅ Approve", user_id=ADMIN)
    await server.wait_for(lambda: len(server.callback_answers) == 1)
    assert "already" in server.callback_answers[0]["text"]
    assert not calls.exists()
    assert "actions:expired:member" in kinds


async def test_the_request_and_the_answers_are_in_the_chat_s_language(
    server: FakeTelegramServer, start_bot: StartBot, tmp_path: Path
) -> None:
    agent, _, calls, _ = await start(server, start_bot, tmp_path)
    await agent.chat_settings.change(agent.context_id(telegram_chat, ChatArgs(chat_id=GROUP)), language="fr")
    request, _ = await ask(server)
    assert set(request.buttons) == {"✅ Approuver", "❌ Refuser"}
    assert "Approbation requise : @ann (telegram:1001) m'a demandé d'utiliser tools:open_ticket" in request.text
    assert "(elle expire dans 60 min)" in request.text
    server.user_presses(request, "✅ Approuver", user_id=MEMBER)
    await server.wait_for(lambda: len(server.callback_answers) == 1)
    assert server.callback_answers[0]["text"] == say_in("approval.not_allowed", "fr")
    server.user_presses(request, "❌ Refuser", user_id=ADMIN, first_name="Ada")
    await server.wait_for(lambda: not request.buttons)
    assert request.text.endswith("❌ Refusée par Ada ; elle n'a pas été exécutée.")
    assert server.callback_answers[1]["text"] == "Refusée : elle ne sera pas exécutée."
    server.user_presses(dataclasses.replace(request, reply_markup=keyboard_of(server)), "✅ Approuver", user_id=ADMIN)
    await server.wait_for(lambda: len(server.callback_answers) == 3)
    assert server.callback_answers[2]["text"] in {"Cette demande est déjà refusée.", "Cette demande est déjà réglée."}
    assert not calls.exists()


def keyboard_of(server: FakeTelegramServer) -> dict[str, Any]:
    """The keyboard the request was posted with (a client may still show it after an edit)."""
    markup = next(c.params["reply_markup"] for c in server.calls_of("sendMessage") if c.params.get("reply_markup"))
    return json.loads(markup) if isinstance(markup, str) else markup


async def test_a_press_forged_in_another_chat_decides_nothing(
    server: FakeTelegramServer, start_bot: StartBot, tmp_path: Path
) -> None:
    """An admin of another group the bot is in sends the request's callback data (a client may send any data) from a
    message there: their tier is computed in that group, so the press must not count for this one's request."""
    _, _, calls, _ = await start(server, start_bot, tmp_path)
    other, mallory = -100800, 3003
    server.chat(other, kind="supergroup")
    server.admins[other] = {mallory}
    request, _ = await ask(server)
    elsewhere = dataclasses.replace(request, chat_id=other, message_id=request.message_id + 1000)
    server.user_presses(elsewhere, "✅ Approve", user_id=mallory, first_name="Mallory")
    await server.wait_for(lambda: len(server.callback_answers) == 1)
    assert server.callback_answers[0]["text"] == "This request is no longer known."
    assert request.buttons and not calls.exists()  # still pending, never run
    assert not server.calls_of("editMessageText")


async def test_stop_withdraws_the_pending_request_and_marks_it(
    server: FakeTelegramServer, start_bot: StartBot, tmp_path: Path
) -> None:
    """/stop (issue 37) withdraws the request still pending in the chat: it never runs, nobody is told in a new run,
    and the request loses its buttons and says it was withdrawn."""
    _, model, calls, _ = await start(server, start_bot, tmp_path)
    request, _ = await ask(server)
    asked = len(model.requests)
    server.user_says("/stop", user_id=MEMBER, chat_id=GROUP)
    await server.wait_for(lambda: not request.buttons)
    assert request.text.endswith(say_in("approval.withdrawn")) and "Approval needed" in request.text
    server.user_presses(dataclasses.replace(request, reply_markup=keyboard_of(server)), "✅ Approve", user_id=ADMIN)
    await server.wait_for(lambda: len(server.callback_answers) == 1)
    assert "already" in server.callback_answers[0]["text"]
    assert not calls.exists() and len(model.requests) == asked
