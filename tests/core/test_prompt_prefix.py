"""A long conversation's requests share their first part (issue 51): a provider discounts the prefix of a prompt
it has seen, so the working memory of one request is the start of the next one's, but when its oldest entries
leave, a quarter of it at a time (``WorkingMemory.trim``, ``core.prompt.window``), not one at every message."""

from __future__ import annotations

import itertools

from core import InMemoryStore, ScriptedModel, context, create_agent, output

REPLY = '<response><output type="say">noted</output></response>'
END = "\n</working-memory>"


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
