"""A Discord webhook's message is its channel's (issue 49, point 3), through the real discord.py client and the fake
Discord: whatever name a webhook gives itself, what it asks to keep is owned by the channel it posts in, never by
one account every webhook shares; an operator must still let webhooks in (TRUST_BOTS)."""

from __future__ import annotations

import json

from core import ScriptedModel
from core.facts import Facts, remember
from extensions.chat.trust import TrustRules

from .conftest import StartBot, World


async def test_a_webhook_s_message_is_owned_by_its_channel(world: World, start_bot: StartBot) -> None:
    facts = Facts()
    model = ScriptedModel(
        [
            '<response><action_call name="remember">{}</action_call></response>'.replace(
                "{}", json.dumps({"fact": "The deploy window is Friday"})
            ),
            '<response><output type="discord:message">Kept.</output></response>',
        ],
        repeat_last=True,
    )
    await start_bot(
        model,
        agent_options={"plugins": [facts], "actions": [remember]},
        trust=TrustRules(bots=frozenset({"discord:*"})),
    )
    hook = world.fake.user("CI bridge", bot=True)
    await world.fake.say(world.general, "remember the deploy window", author=hook, mention_bot=True, webhook_id=4242)
    await world.fake.wait_posted(world.general, 1)
    kept = await facts.store.of_conversation(f"discord:channel:{world.general}")
    assert [(f.text, f.owner) for f in kept] == [("The deploy window is Friday", f"discord:{world.general}")]
    assert await facts.store.of_owner("discord:4242") == []
