"""Two bots in one process hand tasks to each other: the answer comes back to the bot that asked, the tokens the
other bot spent are charged to the person it was asked for, and the depth, time and token limits hold."""

from __future__ import annotations

import json
import re
from typing import Any

from core import InMemoryStore, ModelRequest, ScriptedModel, context, create_agent, output
from core.teamwork import ASK_BOT, MemoryAnswerBox, Teamwork, task_context
from core.teamwork.plugin import LocalPeer
from core.testing import updates_of
from core.usage import USAGE, day_of
from core.usage.plugin import Usage

chat = context(type="chat", schema=str, key=lambda s: s)
_RESULT = re.compile(r"<action_result [^>]*>(.*?)</action_result>", re.S)


def said(text: str = "what is six times seven?") -> dict[str, Any]:
    return {"type": "chat:message", "data": text, "params": {"user_id": "7", "platform": "telegram", "tier": "member"}}


def updates(request: ModelRequest) -> str:
    return updates_of(request.prompt)


def asker(to: str, task: str) -> Any:
    """A model that asks ``to`` once, then says what came back (in a chat, or as the answer to its own task)."""

    def reply(request: ModelRequest) -> str:
        results = _RESULT.findall(updates(request))
        where = "task:answer" if "task:answer" in request.output_types else "chat:message"
        if results:
            return f'<response><output type="{where}">{to} says: {results[-1].strip()[:200]}</output></response>'
        call = json.dumps({"bot": to, "task": task})
        return f'<response><action_call name="{ASK_BOT}">{call}</action_call></response>'

    return reply


def answerer(text: str) -> Any:
    return lambda request: f'<response><output type="task:answer">{text}</output></response>'


def bot(model: Any, team: Teamwork, posted: list[str] | None = None) -> Any:
    into = posted if posted is not None else []
    outs = [output(type="chat:message", handler=lambda data, ctx, ag: into.append(data), context=chat)]
    return create_agent(
        model=ScriptedModel(model), contexts=[chat], outputs=outs, memory=InMemoryStore(), plugins=[team]
    )


async def test_a_bot_hands_a_task_to_another_and_says_its_answer() -> None:
    expert = Teamwork(bot="expert")
    expert_agent = bot(answerer("42"), expert)
    posted: list[str] = []
    front = Teamwork(bot="front", peers={"expert": LocalPeer(expert)})
    front_agent = create_agent(
        model=ScriptedModel(asker("expert", "What is 6 * 7?")),
        contexts=[chat],
        outputs=[output(type="chat:message", handler=lambda data, ctx, ag: posted.append(data), context=chat)],
        memory=InMemoryStore(),
        plugins=[front, Usage()],
    )
    async with expert_agent, front_agent:
        await front_agent.send(chat, "room", said())
    assert len(posted) == 1 and posted[0].startswith("expert says:") and "42" in posted[0]
    [task] = expert_agent.model.requests
    assert "What is 6 * 7?" in task.prompt and 'tier="member"' in task.prompt
    usage = front_agent.provided(USAGE)
    charged = await usage.totals("user:telegram:7", [day_of()])
    mine = await usage.totals("model:bot:expert", [day_of()])
    own = await usage.totals(f"model:{front_agent.model.name}", [day_of()])
    assert mine.input_tokens > 0 and charged.tokens == mine.tokens + own.tokens  # the expert's tokens, the person's


async def test_a_chain_of_bots_stops_at_the_depth_limit() -> None:
    # front asks a, a asks b, b would ask a again: past max_depth=2 it must answer itself
    a = Teamwork(bot="a", max_depth=2)
    b = Teamwork(bot="b", max_depth=2)
    a.peers["b"], b.peers["a"] = LocalPeer(b), LocalPeer(a)
    front = Teamwork(bot="front", peers={"a": LocalPeer(a)}, max_depth=2)
    posted: list[str] = []
    agents = [bot(asker("b", "go on"), a), bot(asker("a", "and on"), b), bot(asker("a", "start"), front, posted)]
    async with agents[0], agents[1], agents[2]:
        await agents[2].send(chat, "room", said())
    assert len(posted) == 1 and posted[0].startswith("a says:")
    refused = [r for r in agents[1].model.requests if "handed on 2 times already" in updates(r)]
    assert len(refused) == 1  # b, at depth 2, was not let ask a: it answered with the refusal
    assert "handed on 2 times already" in posted[0]  # which came back up the chain
    assert len(agents[0].model.requests) == 2 and len(agents[2].model.requests) == 2


async def test_no_answer_within_the_time_limit() -> None:
    class Silent:
        box = MemoryAnswerBox()

        async def hand(self, task_id: str, ref: Any) -> None:
            return None

    posted: list[str] = []
    front = Teamwork(bot="front", peers={"quiet": Silent()}, timeout=0.2)
    agent = bot(asker("quiet", "anyone?"), front, posted)
    async with agent:
        await agent.send(chat, "room", said())
    assert len(posted) == 1 and "gave no answer within 0.2s" in posted[0]


async def test_a_task_stops_at_its_token_budget() -> None:
    def busy(request: ModelRequest) -> str:  # calls ask_bot of nobody forever: each call is another model call
        return '<response><action_call name="nothing">{}</action_call></response>'

    expert = Teamwork(bot="expert", task_tokens=1)
    expert_agent = bot(busy, expert)
    posted: list[str] = []
    front = Teamwork(bot="front", peers={"expert": LocalPeer(expert)})
    agent = bot(asker("expert", "spend"), front, posted)
    async with expert_agent, agent:
        await agent.send(chat, "room", said())
    assert len(expert_agent.model.requests) == 1
    assert len(posted) == 1 and "token budget of 1 was spent" in posted[0]
    assert task_context.type == "task" and task_context.schema.json_schema["required"] == ["id"]
