"""Approvals in Matrix, ``bots run`` as a process: an MCP tool whose rule says ``approve`` is asked for with a notice
the bot reacts to with ✅ and ❌; a member's ✅ is refused, a moderator's runs the call once and the request shows
the decision."""

from __future__ import annotations

import json
from pathlib import Path

from extensions.chat.i18n import say
from tests.approvals.support import POLICY
from tests.bots_fleet import stop_all
from tests.fakes.matrix_server import FakeHomeserver
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.mcp.support import logged_config

from .conftest import ANN, StartRun
from .test_e2e_features import answer, model_env

MOD = "@mod:example.org"
FIELD = "io.daydreams.bots.approval"


async def test_a_moderators_reaction_approves_the_call_and_a_members_is_refused(
    homeserver: FakeHomeserver, start_run: StartRun, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.log"
    ticket = '<response><action_call name="tools:open_ticket">{"title": "printer"}</action_call></response>'
    replies = [Reply(chunks=(ticket,)), Reply(chunks=(answer("Waiting for an admin."),))]
    replies.append(Reply(chunks=(answer("Approved and done."),)))
    async with FakeOpenAIServer(replies=replies, default=Reply(chunks=(answer("OK."),))) as llm:
        room = homeserver.room("Team", {ANN: "Ann", MOD: "Mod"}, moderators=(MOD,))
        bot = await start_run(
            **model_env(llm.url), MCP_SERVERS=json.dumps([logged_config(calls)]), ACTIONS_POLICY=POLICY
        )
        homeserver.say(room, ANN, "open a ticket for the printer", mention=True)

        def request() -> str | None:
            found = [s.event["event_id"] for s in homeserver.bot_messages(room) if FIELD in s.content]
            return found[0] if found else None

        await homeserver.wait_for(lambda: request() is not None, "the approval request")
        asked = request()
        assert asked is not None
        await homeserver.wait_for(lambda: len(homeserver.bot_reactions(room)) == 2, "the bot's reactions")
        assert sorted(key for _, key in homeserver.bot_reactions(room)) == sorted(["✅", "❌"])
        await homeserver.wait_for(lambda: "Waiting for an admin." in homeserver.shown(room), "the waiting answer")
        shown = len(homeserver.shown(room))
        homeserver.react(room, ANN, asked, "✅")  # a member may not approve
        await homeserver.wait_for(lambda: len(homeserver.shown(room)) > shown, "the refusal")
        assert homeserver.shown(room)[-1] == say("approval.not_allowed") and not calls.exists()
        homeserver.react(room, MOD, asked, "✅")
        await homeserver.wait_for(lambda: "Approved and done." in homeserver.shown(room), "the answer after it ran")
        assert len(calls.read_text().splitlines()) == 1
        await homeserver.wait_for(
            lambda: any(t.endswith(say("approval.approved", who="Mod")) for t in homeserver.shown(room)),
            "the request showing the decision",
        )
        await homeserver.wait_for(lambda: not homeserver.bot_reactions(room), "the bot's reactions taken away")
        await stop_all(bot)
