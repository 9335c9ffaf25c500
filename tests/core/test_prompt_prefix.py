"""A long conversation's requests share their first part (issue 51): a provider discounts the prefix of a prompt
it has seen, so each request, up to the end of its working memory (its new entries included: they are shown in
place, the last entries of the working memory), is the start of the next one, within a run (after an action's
result) and from one message to the next; but when the oldest entries leave, a quarter of the window at a time
(``WorkingMemory.trim``, ``core.prompt.window``), not one at every message."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

from core import InMemoryStore, ModelRequest, ScriptedModel, action, context, create_agent, output
from core.testing import updates_of

REPLY = '<response><output type="say">noted</output></response>'
END = "\n</working-memory>"


def _whole(request: ModelRequest) -> str:
    """What a provider reads, in order: the system part, then the prompt part."""
    return f"{request.system}\n\n{request.prompt}"


def _kept_in_next(prompts: list[str]) -> list[bool]:
    """For each request from the second on: the one before, up to the end of its working memory, starts it."""
    return [nxt.startswith(prev[: prev.index(END)]) for prev, nxt in itertools.pairwise(prompts)]


async def test_past_its_limit_the_working_memory_moves_a_quarter_at_a_time_and_the_prompt_keeps_its_start() -> None:
    chat = context(type="chat", schema=str, key=lambda s: s, max_working_memory=40, keep_logs=40)  # as `bots run`
    model = ScriptedModel(lambda request: REPLY)
    agent = create_agent(
        model=model,
        contexts=[chat],
        outputs=[output(type="say", handler=lambda data, ctx, agent: None)],
        memory=InMemoryStore(),
    )
    async with agent:
        for n in range(40):  # two entries a message: past the limit after 20
            await agent.send(chat, "room", {"type": "say", "data": f"message {n}"})
    prompts = [request.prompt for request in model.requests]
    kept = _kept_in_next(prompts)
    assert len(kept) == 39
    assert all(kept[:20])  # the window only grows
    moved = [i for i, same in enumerate(kept) if not same]
    assert len(moved) == 4, moved  # ten entries (five messages) leave at once: once in five requests, not each time
    assert all(b - a == 5 for a, b in itertools.pairwise(moved))


async def test_a_window_smaller_than_what_is_kept_moves_a_quarter_at_a_time_too() -> None:
    chat = context(type="chat", schema=str, key=lambda s: s, max_working_memory=20, keep_logs=200)
    model = ScriptedModel(lambda request: REPLY)
    agent = create_agent(
        model=model,
        contexts=[chat],
        outputs=[output(type="say", handler=lambda data, ctx, agent: None)],
        memory=InMemoryStore(),
    )
    async with agent:
        for n in range(30):
            await agent.send(chat, "room", {"type": "say", "data": f"message {n}"})
    kept = _kept_in_next([request.prompt for request in model.requests])
    moved = [i for i, same in enumerate(kept) if not same]
    assert all(kept[:10])  # (twenty entries: all shown)
    assert len(moved) == 8, moved  # five entries at once: every two or three messages, not at each one
    assert all(b - a >= 2 for a, b in itertools.pairwise(moved))


async def test_each_request_up_to_the_end_of_its_working_memory_is_the_start_of_the_next_one() -> None:
    """Four messages, the second answered after an action's result: every request, its new input or result
    included, is the start of the next one; what follows its working memory is the count of its updates and
    the footer, nothing more."""
    chat = context(type="chat", schema=str, key=lambda s: s)
    lookup = action(
        name="lookup", description="Looks a word up", schema=str, handler=lambda word, ctx, agent: "a fruit"
    )

    def reply(request: ModelRequest) -> str:
        new = updates_of(request.prompt)
        if "what is a mango" in new:
            return (
                '<response><reasoning>look it up</reasoning><action_call name="lookup">"mango"</action_call></response>'
            )
        if "<action_result" in new:
            return '<response><output type="say">A mango is a fruit.</output></response>'
        return REPLY

    model = ScriptedModel(reply)
    agent = create_agent(
        model=model,
        contexts=[chat],
        actions=[lookup],
        outputs=[output(type="say", handler=lambda data, ctx, agent: None)],
        memory=InMemoryStore(),
    )
    async with agent:
        for text in ("hello", "what is a mango?", "thanks", "bye"):
            await agent.send(chat, "room", {"type": "say", "data": text})
    requests = [_whole(request) for request in model.requests]
    assert len(requests) == 5  # (the mango: a call, then the answer with its result)
    assert [updates_of(r.prompt).count("\n") + 1 for r in model.requests] == [1, 1, 1, 1, 1]
    assert "what is a mango?</input>" in updates_of(model.requests[1].prompt)
    assert "a fruit</action_result>" in updates_of(model.requests[2].prompt)
    for before, after in itertools.pairwise(requests):
        end = before.rindex(END)
        assert after.startswith(before[:end])
        assert before[end:] == f'{END}\n\n<updates count="1"/>'  # (the footer is in the system part)
    # what the second request adds to the first: its input's answer... here, the call and its result
    added = requests[2][requests[1].rindex(END) :]
    assert added.startswith("\n<thought") and "<action_call" in added and "<action_result" in added


class _Held:
    """A model whose first call waits (no word shown) until ``release``; every call answers ``REPLY``."""

    name = "held"
    model = ""
    vision = False
    last_usage = None

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.requests.append(request)
        self.started.set()
        if len(self.requests) == 1:
            await self.release.wait()
        yield REPLY


async def test_a_message_that_starts_the_call_again_is_counted_with_the_first_and_keeps_its_start() -> None:
    """A second message before the first word: the call starts again with both as updates (issue 51), and the
    cancelled request, up to the end of its working memory, is the start of the new one."""
    chat = context(type="chat", schema=str, key=lambda s: s)
    model = _Held()
    agent = create_agent(model=model, contexts=[chat], outputs=[output(type="say")])
    async with agent:
        first = asyncio.create_task(agent.send(chat, "room", {"type": "say", "data": "one"}))
        await model.started.wait()
        second = asyncio.create_task(agent.send(chat, "room", {"type": "say", "data": "two"}))
        while len(model.requests) < 2:
            await asyncio.sleep(0)
        model.release.set()
        await asyncio.gather(first, second)
    cancelled, again = (_whole(r) for r in model.requests)
    assert '<updates count="1"/>' in cancelled and '<updates count="2"/>' in again
    assert updates_of(again).count("<input ") == 2
    assert again.startswith(cancelled[: cancelled.rindex(END)])
