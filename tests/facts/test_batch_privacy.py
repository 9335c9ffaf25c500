"""Two members' messages read by one model call (issue 49, point 1): with a quiet window and with every busy
policy, in one process, a new fact is the member's who asked for it, the facts shown and recalled in a call that
answers both are only those both may see (the group's), and each member's tokens are their own messages'."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from core import AgentOptions, InMemoryStore, ModelRequest, context, create_agent, output
from core.busy import BusyPolicy
from core.entries import InputRef, Log
from core.facts import Fact, Facts, FactScope, recall, remember
from core.plugin import Plugin, RunHooks, RunView
from core.testing import updates_of
from core.usage import day_of, user_of
from core.usage.plugin import Usage
from tests.facts.shown import results

ROOM = context(type="room", schema=str, key=lambda s: s, max_steps=4)
ALICE, BOB = "room:alice", "room:bob"
ALICE_SECRET, BOB_SECRET, GROUP_FACT = "Alice's locker code is 4711", "Bob's PIN is 1234", "The party is on Friday"
ASKS_TO_KEEP, ASKS_WHAT = "remember my bike lock code is 9", "what do you know about us?"


def said(text: str, user: str, message: str) -> dict[str, Any]:
    return {"type": "room:message", "data": text, "params": {"user": user, "user_id": user, "message_id": message}}


class Party:
    """A model that keeps Alice's code when it reads her asking (naming her, as a model answering several people
    must), recalls when it reads Bob asking, and otherwise answers; its first call waits for ``release`` (Bob
    writes while the bot is busy)."""

    name = model = "party"
    vision = False
    last_usage = None

    def __init__(self, *, gated: bool) -> None:
        self.gated = gated
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.requests: list[ModelRequest] = []
        self.kept = self.recalled = False

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.requests.append(request)
        updates = updates_of(request.prompt)
        if len(self.requests) == 1 and self.gated:
            yield '<response><output type="room:message">A moment'
            self.started.set()
            await self.release.wait()
            yield "</output></response>"
            return
        if ASKS_TO_KEEP in updates and not self.kept:
            self.kept = True
            args = {"fact": "Alice's bike lock code is 9", "said_by": "alice"}
            yield f'<response><action_call name="remember">{json.dumps(args)}</action_call></response>'
        elif ASKS_WHAT in request.prompt and not self.recalled:
            self.recalled = True
            yield '<response><action_call name="recall">{}</action_call></response>'
        else:
            yield '<response><output type="room:message">ok</output></response>'


class Seen(Plugin):
    """Before each model call (after the facts plugin): who the call answers (the people of the turn it answers:
    ``RunView.turn``) and which facts it shows."""

    name = "seen"

    def __init__(self) -> None:
        self.calls: list[tuple[set[str], list[str]]] = []

    def begin(self, run: RunView) -> RunHooks:
        calls = self.calls

        class _Hooks(RunHooks):
            async def admit(self, updates: list[Log]) -> list[Log]:
                inputs: Sequence[Log] = [*run.turn, *updates]
                answers = {
                    u
                    for e in inputs
                    if isinstance(e, InputRef) and (e.processed or e in updates) and (u := user_of(e)) is not None
                }
                facts = run.state.sections.get("facts")
                calls.append((answers, list(facts.known) if facts is not None else []))
                return updates

        return _Hooks()


CASES = [(policy, 0) for policy in BusyPolicy] + [(policy, 400) for policy in BusyPolicy]


@pytest.mark.parametrize(("policy", "quiet_ms"), CASES, ids=[f"{p.value}-quiet{q}" for p, q in CASES])
async def test_two_members_in_one_batch_keep_their_facts_and_usage_apart(policy: BusyPolicy, quiet_ms: int) -> None:
    model, facts, usage, seen = Party(gated=not quiet_ms), Facts(), Usage(), Seen()
    agent = create_agent(
        model=model,
        contexts=[ROOM],
        actions=[remember, recall],
        outputs=[output(type="room:message", handler=lambda data, c, a: None)],
        plugins=[facts, usage, seen],
        memory=InMemoryStore(),
        options=AgentOptions(busy=policy, quiet_ms=quiet_ms),
    )
    async with agent:
        for text, owner, scope in (
            (ALICE_SECRET, ALICE, FactScope.PRIVATE),
            (BOB_SECRET, BOB, FactScope.PRIVATE),
            (GROUP_FACT, ALICE, FactScope.GROUP),
        ):
            await facts.store.add(Fact(conversation="room:r", text=text, owner=owner, scope=scope), limit=50)
        alice = asyncio.create_task(agent.send(ROOM, "r", said(ASKS_TO_KEEP, "alice", "1")))
        if quiet_ms:
            await asyncio.sleep(0.05)  # Bob writes within Alice's quiet window
        else:
            await asyncio.wait_for(model.started.wait(), 5)  # Bob writes while the bot answers Alice
        bob = asyncio.create_task(agent.send(ROOM, "r", said(ASKS_WHAT, "bob", "2")))
        await asyncio.sleep(0.05)
        if policy is not BusyPolicy.INTERRUPT:
            model.release.set()
        await asyncio.wait_for(asyncio.gather(alice, bob), 10)
        if not model.kept:  # (interrupted before it was kept: Alice asks again, alone)
            model.release.set()
            await agent.send(ROOM, "r", said(ASKS_TO_KEEP, "alice", "3"))
        kept = await facts.store.of_conversation("room:r")
        day = day_of()
        chat = await usage.store.totals("chat:room:r", [day])
        per_user = [await usage.store.totals(f"user:{who}", [day]) for who in (ALICE, BOB)]

    new = [f for f in kept if "bike" in f.text]
    assert [(f.owner, f.scope) for f in new] == [(ALICE, FactScope.PRIVATE)]  # hers, whoever wrote last
    private = {ALICE_SECRET: ALICE, BOB_SECRET: BOB, new[0].text: ALICE}
    for answers, shown in seen.calls:
        for text in shown:
            if text in private:  # a member's private fact only in a call that answers them alone
                assert answers == {private[text]}, (answers, shown)
    for request in model.requests:  # and what reached the model is what the facts plugin allowed
        facts_shown = re.search(r"<facts>(.*?)</facts>", request.system + request.prompt, re.S)
        if facts_shown and ASKS_WHAT in updates_of(request.prompt):
            assert ALICE_SECRET not in facts_shown.group(1)
    recalled = [r for request in model.requests for r in results(request.prompt, "recall")]
    assert recalled, "Bob's question was answered with recall"
    for result in recalled:
        assert ALICE_SECRET not in result and "bike" not in result
    assert per_user[1].input_tokens > 0  # Bob's question was read, and charged to him
    assert per_user[0].input_tokens + per_user[1].input_tokens == chat.input_tokens  # nobody else's tokens
    assert per_user[0].output_tokens + per_user[1].output_tokens == chat.output_tokens


async def test_a_fact_asked_for_in_a_batch_of_two_members_is_its_asker_s_not_the_last_writer_s() -> None:
    """The failure of the review: Bob writes within 400 ms after Alice, and her new fact became his."""
    model, facts = Party(gated=False), Facts()
    agent = create_agent(
        model=model,
        contexts=[ROOM],
        actions=[remember, recall],
        outputs=[output(type="room:message", handler=lambda data, c, a: None)],
        plugins=[facts],
        memory=InMemoryStore(),
        options=AgentOptions(quiet_ms=400),
    )
    async with agent:
        alice = asyncio.create_task(agent.send(ROOM, "r", said(ASKS_TO_KEEP, "alice", "1")))
        await asyncio.sleep(0.05)
        await asyncio.gather(alice, agent.send(ROOM, "r", said("hello all", "bob", "2")))
        kept = await facts.store.of_conversation("room:r")
    assert [(f.owner, f.message) for f in kept] == [(ALICE, "1")]
    assert await facts.store.of_owner(BOB) == []


async def test_remember_in_a_batch_of_two_members_without_said_by_is_refused() -> None:
    """Never given to whoever wrote last: the model reads that it must say who said it."""
    calls = iter(
        [
            '<response><action_call name="remember">{"fact": "a code is 9"}</action_call></response>',
            '<response><output type="room:message">ok</output></response>',
        ]
    )

    class Blind(Party):
        async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
            self.requests.append(request)
            yield next(calls, '<response><output type="room:message">ok</output></response>')

    model, facts = Blind(gated=False), Facts()
    agent = create_agent(
        model=model,
        contexts=[ROOM],
        actions=[remember],
        outputs=[output(type="room:message", handler=lambda data, c, a: None)],
        plugins=[facts],
        memory=InMemoryStore(),
        options=AgentOptions(quiet_ms=400),
    )
    async with agent:
        alice = asyncio.create_task(agent.send(ROOM, "r", said(ASKS_TO_KEEP, "alice", "1")))
        await asyncio.sleep(0.05)
        await asyncio.gather(alice, agent.send(ROOM, "r", said("hello all", "bob", "2")))
        kept = await facts.store.of_conversation("room:r")
    assert kept == []
    assert "said_by" in model.requests[1].prompt


class Unseen:
    """A model whose first two calls show nothing and wait for ``release[n]`` (an input that joins meanwhile starts
    the call again, ``core.busy``); the third answers."""

    name = model = "unseen"
    vision = False
    last_usage = None

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []
        self.waiting = [asyncio.Event(), asyncio.Event()]

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.requests.append(request)
        n = len(self.requests)
        if n <= 2:
            self.waiting[n - 1].set()
            await asyncio.Event().wait()  # (cancelled by the restart)
        yield '<response><output type="room:message">ok</output></response>'


async def test_a_model_call_started_again_charges_the_people_it_had_read_not_the_newest() -> None:
    """A call cancelled because an input joined before its first word (``core.busy``) is charged as estimated
    tokens to the people whose messages it had read, each their share: Alice's long message and Bob's short one were
    read by the second call when Carol's joined, so Bob is not charged Alice's part of it (he was, as the newest
    author read)."""
    model, usage = Unseen(), Usage()
    agent = create_agent(
        model=model,
        contexts=[ROOM],
        outputs=[output(type="room:message", handler=lambda data, c, a: None)],
        plugins=[usage],
        memory=InMemoryStore(),
        options=AgentOptions(busy=BusyPolicy.STEER, quiet_ms=0),
    )
    long = "Alice asks a long question: " + "why " * 500
    async with agent:
        sends = [asyncio.create_task(agent.send(ROOM, "r", said(long, "alice", "1")))]
        await asyncio.wait_for(model.waiting[0].wait(), 10)
        sends.append(asyncio.create_task(agent.send(ROOM, "r", said("and me?", "bob", "2"))))
        await asyncio.wait_for(model.waiting[1].wait(), 10)
        sends.append(asyncio.create_task(agent.send(ROOM, "r", said("me too", "carol", "3"))))
        await asyncio.wait_for(asyncio.gather(*sends), 10)
        day = day_of()
        bob = await usage.store.totals("user:room:bob", [day])
    assert len(model.requests) == 3
    second = model.requests[1]
    assert long in second.prompt and "and me?" in second.prompt  # (the call Carol's message cancelled)
    estimated = (len(second.system) + len(second.prompt)) // 4
    assert 0 < bob.input_tokens < estimated // 10, (bob.input_tokens, estimated)


async def test_a_message_that_joins_once_an_answer_is_out_is_answered_as_its_author_s_own_turn() -> None:
    """Bob is answered; while the run still finishes (its usage written), Alice asks for her own code: her message
    joins that run (busy policy steer), and the step that answers it is hers alone: her private fact is shown, Bob's
    is not (the run had read two people's messages, so it once showed the group's facts only and she missed her
    own); a fact she asks to keep is hers without naming her."""
    finishing, go_on = asyncio.Event(), asyncio.Event()

    class Slow(Plugin):  # the run of Bob's answer is still finishing when Alice writes
        name = "slow"

        def begin(self, run: RunView) -> RunHooks:
            class _Hooks(RunHooks):
                async def charged(self, call: Any) -> None:
                    if run.steps == 1:  # (Bob's answer is out, its call being charged)
                        finishing.set()
                        await asyncio.wait_for(go_on.wait(), 5)

            return _Hooks()

    class Keeper:
        name = model = "keeper"
        vision = False
        last_usage = None

        def __init__(self) -> None:
            self.requests: list[ModelRequest] = []

        async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
            self.requests.append(request)
            if len(self.requests) == 2:
                yield '<response><action_call name="remember">{"fact": "Alice bikes to work"}</action_call></response>'
            else:
                yield '<response><output type="room:message">ok</output></response>'

    model, facts, seen = Keeper(), Facts(), Seen()
    agent = create_agent(
        model=model,
        contexts=[ROOM],
        actions=[remember, recall],
        outputs=[output(type="room:message", handler=lambda data, c, a: None)],
        plugins=[facts, seen, Slow()],
        memory=InMemoryStore(),
        options=AgentOptions(busy=BusyPolicy.STEER, quiet_ms=0),
    )
    async with agent:
        for text, owner in ((ALICE_SECRET, ALICE), (BOB_SECRET, BOB)):
            fact = Fact(conversation="room:r", text=text, owner=owner, scope=FactScope.PRIVATE)
            await facts.store.add(fact, limit=50)
        bob = asyncio.create_task(agent.send(ROOM, "r", said("hi all", "bob", "1")))
        await asyncio.wait_for(finishing.wait(), 5)
        alice = asyncio.create_task(agent.send(ROOM, "r", said("what is my locker code?", "alice", "2")))
        await asyncio.sleep(0.05)  # (it joins the run)
        go_on.set()
        chains = await asyncio.wait_for(asyncio.gather(bob, alice), 10)
        kept = [f for f in await facts.store.of_conversation("room:r") if "bikes" in f.text]
    assert chains[0] is chains[1], "Alice's message joined the run that answered Bob"
    shown_to_alice = re.search(r"<facts>(.*?)</facts>", model.requests[1].system + model.requests[1].prompt, re.S)
    assert shown_to_alice is not None and ALICE_SECRET in shown_to_alice.group(1)
    assert BOB_SECRET not in shown_to_alice.group(1)
    assert [(f.owner, f.scope) for f in kept] == [(ALICE, FactScope.PRIVATE)]
