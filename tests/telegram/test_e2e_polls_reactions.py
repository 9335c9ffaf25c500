"""End to end: reactions on the bot's answers recorded as feedback (never answered), and polls the model posts
whose votes come back to it as inputs; the real python-telegram-bot client against the fake Bot API."""

from __future__ import annotations

import asyncio

from core import InMemoryUsage, ScriptedModel
from core.usage import USAGE, day_of
from extensions.telegram.definitions import POLL
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import RunWatcher, StartBot, answer


class Feedback:
    """The agent's ``feedback:*`` metrics, waited for without sleeping."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self._event = asyncio.Event()

    def __call__(self, kind: str, context_id: str, value: float) -> None:
        if kind.startswith("feedback:"):
            self.seen.append((kind, context_id))
            self._event.set()

    async def wait(self, count: int) -> None:
        async with asyncio.timeout(10):
            while len(self.seen) < count:
                self._event.clear()
                await self._event.wait()


async def test_a_reaction_on_an_answer_is_feedback_and_never_answered(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    model = ScriptedModel([answer("Paris."), answer("Still Paris.")], repeat_last=True)
    agent = await start_bot(model, agent_options={"usage": InMemoryUsage()})  # (the Usage plugin keeps the scores)
    feedback = Feedback()
    agent.observers.append(feedback)
    asked = server.user_says("capital of France?")
    [reply] = await server.wait_replies(1)
    server.user_reacts(1001, asked["message"]["message_id"], "👎")  # on the user's own message: not feedback
    server.user_reacts(1001, reply.message_id, "👎")
    await feedback.wait(1)
    assert feedback.seen == [("feedback:down", "telegram:chat:1001")]
    server.user_reacts(1001, reply.message_id, "👎")  # delivered again: counted once
    server.user_reacts(1001, reply.message_id, "👍", user_id=1002, first_name="Bob")
    await feedback.wait(3)
    day = [day_of()]
    assert (await agent.provided(USAGE).totals("feedback:down:chat:telegram:chat:1001", day)).output_tokens == 1
    assert (await agent.provided(USAGE).totals("feedback:down:user:telegram:1001", day)).output_tokens == 1
    assert (await agent.provided(USAGE).totals("feedback:up:chat:telegram:chat:1001", day)).output_tokens == 1
    assert server.allowed_updates is not None and "message_reaction" in server.allowed_updates
    # the reactions reached the model as nothing: the next message is its second request, without them
    server.user_says("and of Italy?")
    await server.wait_replies(2)
    assert len(model.requests) == 2
    assert "👎" not in model.requests[1].prompt and "👍" not in model.requests[1].prompt


async def test_a_poll_is_posted_answered_and_its_result_read_by_the_bot(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    poll = '{"question": "Tea or coffee?", "options": ["Tea", "Coffee"]}'
    model = ScriptedModel(
        [f'<response><output type="{POLL}">{poll}</output></response>', answer("Tea it is, Ann.")],
        repeat_last=True,
    )
    agent = await start_bot(model)
    runs = RunWatcher(agent)
    asked = server.user_says("ask me tea or coffee")
    await runs.wait(1)  # the poll is posted, and the bot heard back that it was
    [(poll_id, sent)] = server.polls.items()
    assert sent["question"] == "Tea or coffee?" and [o["text"] for o in sent["options"]] == ["Tea", "Coffee"]
    assert sent["is_anonymous"] is False  # so that Telegram tells the bot who chose what
    [create] = server.calls_of("sendPoll")
    assert create.params["reply_parameters"]["message_id"] == asked["message"]["message_id"]
    server.user_answers_poll(poll_id, [0])
    [reply] = await server.wait_replies(1)
    assert reply.text == "Tea it is, Ann."
    assert reply.reply_to == server.poll_messages[poll_id][1]  # threaded under the poll
    prompt = model.requests[1].prompt
    assert (
        'type="telegram:poll_answer" user="Ann"' in prompt and "Ann chose 'Tea' in the poll 'Tea or coffee?'" in prompt
    )
    assert server.polls[poll_id]["options"][0]["voter_count"] == 1
