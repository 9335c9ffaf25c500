"""End to end through the fake Bot API: trust tiers from Telegram's facts (a group's administrators), an MCP tool
limited to admins that a member cannot make the bot call (the MCP server's call log stays empty) while an admin
can, the prompt offering only what the author's tier allows, two bots allowed to talk stopping at the cap, and
forwards and quotes that do not address the bot."""

from __future__ import annotations

import json
import re
from pathlib import Path

from core import Agent, ModelRequest, ScriptedModel
from core.testing import updates_of
from core.trust import Trust
from extensions.chat.trust import TrustRules
from extensions.mcp import McpSettings, mcp_toolset
from extensions.telegram.definitions import MESSAGE
from tests.fakes.telegram_server import FakeTelegramServer
from tests.mcp.support import logged_config

from .conftest import StartBot

GROUP = -100500
MEMBER, ADMIN = 1001, 2002
_RESULT = re.compile(r"<action_result [^>]*>(.*?)</action_result>", re.S)


def say(text: str) -> str:
    return f'<response><output type="{MESSAGE}">{text}</output></response>'


def ticket_model() -> ScriptedModel:
    """Calls ``tools:open_ticket`` for each new message (whether offered or not), then says what came back."""

    def reply(request: ModelRequest) -> str:
        results = _RESULT.findall(updates_of(request.prompt))
        if results:
            return say("result: " + results[-1].strip()[:80])
        call = json.dumps({"title": "printer"})
        return f'<response><action_call name="tools:open_ticket">{call}</action_call></response>'

    return ScriptedModel(reply)


def observed(agent: Agent) -> list[str]:
    kinds: list[str] = []
    agent.add_observer(lambda kind, cid, value: kinds.append(kind))
    return kinds


async def test_a_member_cannot_make_the_bot_call_an_admin_tool_and_a_group_admin_can(
    server: FakeTelegramServer, start_bot: StartBot, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.log"
    config = logged_config(calls)
    tools = mcp_toolset(McpSettings(servers=json.dumps([config]))).extension()
    model = ticket_model()
    server.chat(GROUP, kind="supergroup")
    server.admins[GROUP] = {ADMIN}
    agent = await start_bot(model, extensions=[tools], agent_options={"trust": Trust()}, trust=TrustRules())
    kinds = observed(agent)

    server.user_says("@daydream_test_bot open a ticket", user_id=MEMBER, chat_id=GROUP)
    notice, answer = await server.wait_replies(2, chat_id=GROUP)
    assert notice.text == (
        "⛔ I did not use tools:open_ticket: it is for the admin tier and above here, and you are member."
    )
    assert "was not run" in answer.text and "reserved to the admin tier" in answer.text
    first = model.requests[0]
    assert "tools:open_ticket" not in first.action_names and 'tier="member"' in first.prompt
    assert "open_ticket" not in first.system  # not listed for a member
    assert not calls.exists()  # the MCP server never got the call
    assert "actions:refused:member" in kinds

    server.user_says("@daydream_test_bot open a ticket", user_id=ADMIN, first_name="Ada", chat_id=GROUP)
    *_, done = await server.wait_replies(3, chat_id=GROUP)
    assert "ticket opened: printer" in done.text
    assert calls.read_text().splitlines() == ["open_ticket printer"]
    admin_prompt = next(r for r in model.requests if 'tier="admin"' in r.prompt)
    assert "tools:open_ticket" in admin_prompt.action_names
    assert len(server.calls_of("getChatAdministrators")) == 1  # kept TRUST_CACHE_SECONDS


async def test_an_owner_is_known_without_asking_and_a_private_chat_is_a_member_s(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    model = ScriptedModel([say("hi"), say("hello")])
    rules = TrustRules(owners=frozenset({f"telegram:{ADMIN}"}))
    await start_bot(model, agent_options={"trust": Trust()}, trust=rules)
    server.user_says("@daydream_test_bot hi", user_id=ADMIN, chat_id=GROUP, kind="group")
    await server.wait_replies(1, chat_id=GROUP)
    server.user_says("hi", user_id=MEMBER)
    await server.wait_replies(1, chat_id=MEMBER)
    assert 'tier="owner"' in model.requests[0].prompt and 'tier="member"' in model.requests[1].prompt
    assert server.calls_of("getChatAdministrators") == []
    # who wrote is told apart by id in a group; a private chat is one person's (issue 51: InputRef.hidden)
    assert f'user_id="{ADMIN}"' in model.requests[0].prompt and "user_id=" not in model.requests[1].prompt


async def test_two_bots_allowed_to_talk_stop_at_the_cap(server: FakeTelegramServer, start_bot: StartBot) -> None:
    model = ScriptedModel(lambda request: say("and you?"))
    rules = TrustRules(bots=frozenset({"telegram:@otherbot"}), bot_replies=3, bot_window=3600)
    agent = await start_bot(model, agent_options={"trust": Trust()}, trust=rules)
    kinds = observed(agent)
    server.chat(GROUP, kind="supergroup")
    server.user_says("@daydream_test_bot hello", user_id=77, is_bot=True, username="strangerbot", chat_id=GROUP)
    last = server.user_says("@daydream_test_bot hello", user_id=88, is_bot=True, username="OtherBot", chat_id=GROUP)
    for turn in range(1, 6):  # the other bot answers each of our replies, as a bot told to would
        await server.wait_for(lambda n=turn: len(server.sent) >= n or "message_ignored:bot_cap" in kinds)
        if "message_ignored:bot_cap" in kinds:
            break
        last = server.user_says(
            "and you?", user_id=88, is_bot=True, username="OtherBot", chat_id=GROUP, reply_to=server.sent[-1].message_id
        )
    assert "message_ignored:bot" in kinds  # a bot the operator did not list
    assert kinds.count("message_ignored:bot_cap") == 1 and len(server.sent) == 3
    assert last["message"]["from"]["is_bot"]
    assert all('tier="bot"' in r.prompt for r in model.requests)


async def test_a_forward_of_the_bot_s_own_message_and_a_quoted_mention_do_not_trigger_it(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    model = ScriptedModel(lambda request: say("answered"))
    agent = await start_bot(model, agent_options={"trust": Trust()}, trust=TrustRules())
    kinds = observed(agent)
    server.chat(GROUP, kind="supergroup")
    bot = dict(server.bot)
    server.user_says("@daydream_test_bot said this", chat_id=GROUP, forward_of=bot)
    server.user_says("@daydream_test_bot look", chat_id=MEMBER, forward_of=bot)  # even in a private chat
    other = server.user_says("lunch?", user_id=5, username="eve", chat_id=GROUP)
    server.user_says(
        "ask @daydream_test_bot about it", chat_id=GROUP, forward_of={"id": 5, "is_bot": False, "first_name": "Eve"}
    )
    server.user_says(
        "good idea", chat_id=GROUP, reply_to=other["message"]["message_id"], quote="ask @daydream_test_bot"
    )
    server.user_says("@daydream_test_bot now", chat_id=GROUP)
    [reply] = await server.wait_replies(1, chat_id=GROUP)
    assert reply.text == "answered"
    [request] = model.requests  # only "now" reached the model
    assert "now" in request.prompt and "said this" not in request.prompt and "good idea" not in request.prompt
    assert kinds.count("message_ignored:own") == 2 and kinds.count("message_ignored:policy") == 3
