"""The privacy matrix (issue 49): two people whose messages may be answered by one model call keep their facts,
passages and usage apart, on every platform, with every busy policy, with the quiet window on and off, in one process and
in a fleet.

One run starts the ``bots`` program as the release gate does (``tests.gate.harness.deployed``: ``bots run``, or
``bots gateway`` and two ``bots worker`` on a redis-server and PostgreSQL, where a fleet keeps its knowledge base),
with the built-in assistant, the run's ``BOT_BUSY`` and
``BOT_QUIET_MS``, and a scripted hosted model (``PrivacyModel``), and holds ``hold_privacy`` on Telegram, Discord
and the web chat at once:

0. Before it starts, the operator indexes Ann's notes (``bots knowledge add``, the collection ``ann``) and scopes her
   private chats to them (``bots knowledge scope``); everywhere else ``KNOWLEDGE_COLLECTIONS=default``.
1. Ann asks the bot to keep a private fact (her locker code): it is hers.
2. Ann asks it to keep another (her bike lock code, in a long message) and Bob, right after her, asks what it knows:
   in a Telegram group and a Discord channel they share one conversation, so depending on the busy policy and the
   quiet window one call reads both, or they are queued, or Ann's answer is interrupted; on the web chat (no shared
   room) each speaks in their own conversation at the same moment.
3. Checked: ``/memory`` lists both facts to Ann (the bike's when it was kept) and nothing to Bob; no model call that
   read Bob's question showed Ann's facts or gave them to him from ``recall``, nor a passage of her notes from
   ``search_knowledge`` (which finds them when Ann looks them up in her private chat, and no call elsewhere shows
   them); ``/stats``: Ann's and Bob's tokens add up to the conversation's (every token a person's, none twice), Bob
   is charged for no call that did not read his question and no more than Ann (one call that answers both charges
   each their share).

The platform is not a dimension of the runs: every run holds the scenario on the three platforms at once, so each of
its other values meets every platform. The runs are the pairs of (deployment, busy, quiet) values
(``tests.gate.matrix.pairwise``, the release gate's generator): 8 runs in ``make test``
(``tests/gate/test_privacy.py``). ``python -m tests.gate.privacy --full`` runs the full product (16 runs, every
platform in each: 48 cells); ``--list`` prints the runs (``--markdown``: as the docs show them).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from core.busy import BusyPolicy
from extensions.chat.i18n import say
from tests.apps.support import IDLE, prompt_of
from tests.bots_fleet import env_for
from tests.facts.shown import kept as kept_in
from tests.fakes.openai_server import Reply

from .echo_model import EchoModel
from .harness import BOTS, Cell, _services, cell_folder, deployed, settings_of, settled
from .matrix import pairwise, table
from .platforms import ANN, BOB, DEADLINE, Chat, DiscordChat, TelegramChat, WebChat, started, wait_until

__all__ = (
    "DIMENSIONS",
    "FULL",
    "HEADER",
    "PLATFORMS",
    "QUIET_ON_MS",
    "RUNS",
    "PrivacyModel",
    "hold_privacy",
    "rows_of",
    "run_of",
    "run_privacy",
)

PLATFORMS = ("telegram", "discord", "web")
"""Where every run holds the scenario at once."""
QUIET_ON_MS = "1500"
"""The quiet window of ``quiet=on``: long enough that Ann's and Bob's messages, sent one after the other, are one
turn on a loaded machine (whether they are is the busy policy's path; the checks hold either way)."""
DIMENSIONS: dict[str, tuple[str, ...]] = {
    "deployment": ("process", "fleet"),
    "busy": tuple(policy.value for policy in BusyPolicy),
    "quiet": ("off", "on"),
}
"""The values a run combines (the platforms are all in every run)."""
RUNS: list[dict[str, str]] = pairwise(DIMENSIONS, costly={}, can_run=lambda values: True)
"""The runs of ``make test``: every pair of values in at least one."""
FULL: list[dict[str, str]] = [
    dict(zip(DIMENSIONS, values, strict=True)) for values in itertools.product(*DIMENSIONS.values())
]
"""Every combination (``--full``)."""

CODE = "Ann's locker code is 4711"
BIKE = "Ann's bike lock code is 9"
KEEP_CODE = "please remember my locker code 4711"
KEEP_BIKE = (
    "please remember my bike lock code is 9; I am writing a long message on purpose, so that a call answering Bob "
    "and me together charges most of its tokens to me: a bike, a lock, a code, a rack by the station, rain, a bell"
)
ASK = "what do you know?"
PASSPORT = "ZX778"
NOTES = f"# Passport\n\nAnn's passport number is {PASSPORT}; these are her own notes.\n"
"""Ann's notes: the collection ``ann``, which the operator scoped to Ann's private chats alone."""
LOOKUP = "look up my passport in my notes"
TOKENS_IN = 1000
"""Input tokens the model reports for every call (so a call's charge splits visibly)."""


def _call(name: str, args: Mapping[str, Any]) -> str:
    return f'<response><action_call name="{name}">{json.dumps(dict(args))}</action_call></response>'


@dataclass
class _Call:
    platform: str | None
    prompt: str
    answer: str


class PrivacyModel(EchoModel):
    """Decides from the prompt alone (any worker may ask): keeps Ann's locker code, then her bike code (naming her
    when Bob's question is read too, as a model answering several people must), recalls and searches the documents
    for Bob, searches them for Ann's look-up, and otherwise answers ``ok``. Every call reports ``TOKENS_IN`` input tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[_Call] = []

    async def stream(self, response: web.StreamResponse, reply: Reply, body: dict[str, Any]) -> None:
        prompt = prompt_of(body)
        platform = self.platform_of(prompt)
        kept = kept_in(prompt)
        if platform is None:
            answer = IDLE
        elif KEEP_BIKE in prompt and BIKE not in kept:
            answer = _call("remember", {"fact": BIKE, **({"said_by": "ann"} if ASK in prompt else {})})
        elif KEEP_CODE in prompt and CODE not in kept:
            answer = _call("remember", {"fact": CODE})
        elif ASK in prompt and '<action_result name="recall"' not in prompt:
            answer = _call("recall", {})
        elif (ASK in prompt or LOOKUP in prompt) and '<action_result name="search_knowledge"' not in prompt:
            answer = _call("search_knowledge", {"query": "passport"})
        else:
            answer = f'<response><output type="{platform}:message">ok</output></response>'
        self.calls.append(_Call(platform, prompt, answer))
        await super(EchoModel, self).stream(response, Reply(chunks=(answer,), usage=(TOKENS_IN, 5)), body)

    @staticmethod
    def platform_of(prompt: str) -> str | None:
        found = [p for p in PLATFORMS if f"{p}:message" in prompt]
        return found[0] if len(found) == 1 else None

    def of(self, platform: str) -> list[_Call]:
        return [c for c in self.calls if c.platform == platform]

    def answered_bob(self, platform: str) -> bool:
        """Bob's question was answered: a call that read it and its recall's result wrote the reply."""
        return any(ASK in c.prompt and c.answer.endswith("ok</output></response>") for c in self.of(platform))


@dataclass
class _Usage:
    user_in: int
    chat_in: int


@dataclass
class _People:
    """What each platform needs to run ``/memory`` and ``/stats`` as Ann or Bob."""

    chat: Chat

    async def command(self, person: int, name: str) -> str:
        """``person`` runs ``/name`` where they spoke; the answer meant for them."""
        chat = self.chat
        if isinstance(chat, TelegramChat):
            user_id, first_name, username = chat.people[person]
            before = {p: len(chat.texts(p)) for p in (ANN, BOB)}
            group_before = len(chat.texts(person, group=True))
            chat.fake.user_says(
                f"/{name}", user_id=user_id, first_name=first_name, username=username, chat_id=chat.GROUP,
                kind="group", title="Gate",
            )  # fmt: skip
            if name == "memory":  # (personal: answered in their private chat)
                await wait_until(lambda: len(chat.texts(person)) > before[person], f"telegram /{name}")
                return chat.texts(person)[before[person]]
            prefix = say("stats").split("{", 1)[0] if name == "stats" else ""

            def answered() -> list[str]:  # (after a /memory, its notice in the group may come in between)
                return [t for t in chat.texts(person, group=True)[group_before:] if t.startswith(prefix)]

            await wait_until(lambda: bool(answered()), f"telegram /{name}")
            return answered()[0]
        if isinstance(chat, DiscordChat):
            fake = chat.fake
            await fake.wait_until(lambda: any(c["name"] == name for c in fake.commands), timeout=DEADLINE)
            iid = await fake.slash(name, chat.channel, user=chat.people[person], options=[])
            await chat.fake.wait_until(lambda: iid in chat.fake.interaction_responses, timeout=DEADLINE)
            return str(chat.fake.interaction_responses[iid]["data"]["content"])
        assert isinstance(chat, WebChat)
        visitor = chat.visitors[person]
        headers = {"X-CSRF-Token": visitor.csrf}
        async with visitor.session.post(visitor.url + "chat/send", json={"text": f"/{name}"}, headers=headers) as r:
            assert r.status == 200, await r.text()
            return str((await r.json())["notice"])

    async def usage(self, person: int) -> _Usage:
        text = await self.command(person, "stats")
        user = re.search(r"Your usage today: (\d+) tokens in", text)
        chat = re.search(r"This chat today: (\d+) in", text)
        assert user and chat, text
        return _Usage(int(user.group(1)), int(chat.group(1)))


async def hold_privacy(chat: Chat, model: PrivacyModel) -> str:
    """The scenario (see the module's docstring) on ``chat``; fails at the first thing that does not hold. Returns
    what happened: whether one call read Ann's request and Bob's question together, and each one's tokens."""
    group, name = chat.has_group, chat.name
    people = _People(chat)

    def oks() -> int:
        return sum(t == "ok" for t in chat.texts(ANN, group=group))

    try:
        if isinstance(chat, DiscordChat):  # (a fleet's gateway is listening before its shard has identified)
            fake = chat.fake
            await fake.wait_until(lambda: 0 in fake.connections and fake.shards_connected() == {0}, timeout=DEADLINE)
        await chat.say(ANN, KEEP_CODE, group=group)
        await wait_until(lambda: oks() >= 1, f"{name}: the answer to Ann's first message")
        await chat.say(ANN, KEEP_BIKE, group=group)
        await chat.say(BOB, ASK, group=group)
        await wait_until(lambda: model.answered_bob(name), f"{name}: the answer to Bob's question")
    except AssertionError as exc:
        seen = [chat.texts(p, group=group) for p in (ANN, BOB)]
        raise AssertionError(f"{exc}; the model answered {[c.answer for c in model.of(name)]}; shown {seen}") from None
    for person in (ANN, BOB) if not group else (ANN,):
        await settled(chat, person, group=group)

    joint = [c.prompt for c in model.of(name) if ASK in c.prompt]
    assert joint, f"{name}: Bob's question reached the model"
    for prompt in joint:
        shown = re.search(r"<facts>(.*?)</facts>", prompt, re.S)
        assert shown is None or ("4711" not in shown.group(1) and "bike" not in shown.group(1)), (name, shown)
        for result in re.findall(r'<action_result name="recall"[^>]*>(.*?)</action_result>', prompt, re.S):
            assert "4711" not in result and "bike" not in result, (name, result)

    anns, bobs = await people.command(ANN, "memory"), await people.command(BOB, "memory")
    assert CODE in anns, (name, anns)
    kept_bike = any(BIKE in kept_in(c.prompt) for c in model.of(name))
    assert (BIKE in anns) == kept_bike, (name, anns)
    assert bobs.startswith(say("memory_none")), (name, bobs)

    ann, bob = await people.usage(ANN), await people.usage(BOB)
    if group:  # (every token charged to one of them, none twice)
        assert ann.chat_in == bob.chat_in == ann.user_in + bob.user_in, (name, ann, bob)
    else:  # (each visitor's own conversation)
        assert ann.chat_in == ann.user_in and bob.chat_in == bob.user_in, (name, ann, bob)
    assert 0 < bob.user_in <= TOKENS_IN * len(joint), (name, bob, len(joint))
    assert bob.user_in <= ann.user_in, (name, ann, bob)
    for prompt in joint:
        assert PASSPORT not in prompt, (name, "a passage of Ann's notes reached Bob's conversation")
    if not isinstance(chat, WebChat):  # (her notes are scoped to her private chats: found there, and there only)
        before = sum(t == "ok" for t in chat.texts(ANN))
        await chat.say(ANN, LOOKUP)
        await wait_until(lambda: sum(t == "ok" for t in chat.texts(ANN)) > before, f"{name}: Ann's look-up")
        looked = [c.prompt for c in model.of(name) if LOOKUP in c.prompt and "search_knowledge" in c.prompt]
        assert any(PASSPORT in p for p in looked), (name, "Ann's own notes were not found in her private chat")
    assert not [c for c in model.of(name) if PASSPORT in c.prompt and LOOKUP not in c.prompt], name
    together = any('"said_by"' in c.answer for c in model.of(name))
    return f"{name}: {'one call for both' if together else 'apart'}, tokens in Ann {ann.user_in} Bob {bob.user_in}"


def run_of(values: Mapping[str, str]) -> Cell:
    """The ``Cell`` (``tests.gate.harness``) that starts a run's deployment for the three platforms."""
    env = {"BOT_BUSY": values["busy"], "BOT_QUIET_MS": QUIET_ON_MS if values["quiet"] == "on" else "0"}
    env["DISCORD_SYNC_COMMANDS"] = "true"  # (/memory and /stats are slash commands there)
    env["WEB_VISITOR_TIER"] = "member"  # (a guest may not have facts kept: the operator lets visitors have them)
    env["KNOWLEDGE_ENABLED"] = "true"
    env["KNOWLEDGE_COLLECTIONS"] = "default"  # (everywhere but where the operator scoped Ann's notes)
    return Cell(
        platforms=PLATFORMS,
        deployment=values["deployment"],
        store="postgres" if values["deployment"] == "fleet" else "sqlite",  # (a fleet's knowledge is in PostgreSQL)
        env=tuple(sorted(env.items())),
        labels=(("busy", values["busy"]), ("quiet", values["quiet"])),
    )


async def run_privacy(values: Mapping[str, str], folder: Path, *, database_url: str | None = None) -> list[str]:
    """Start the run ``values`` names in ``folder`` and hold the scenario on the three platforms at once; what
    happened on each (``hold_privacy``). A fleet needs ``database_url``, an empty PostgreSQL database (the knowledge
    base every worker reads, and the memory store)."""
    cell = run_of(values)
    async with contextlib.AsyncExitStack() as stack:
        chats = [await stack.enter_async_context(started(name)) for name in PLATFORMS]
        for chat in chats:
            if isinstance(chat, TelegramChat):
                for user_id, _, _ in chat.people:
                    chat.fake.chat(user_id)  # (both started a private chat with the bot: /memory answers there)
        model = await stack.enter_async_context(PrivacyModel())
        services = await stack.enter_async_context(_services(cell, folder, database_url))
        await _index_anns_notes(env_for(folder, **settings_of(cell, chats, model, services)), chats, folder)
        async with deployed(cell, chats, model, folder, services), asyncio.TaskGroup() as tasks:
            held = [tasks.create_task(hold_privacy(chat, model)) for chat in chats]
    return [task.result() for task in held]


async def _index_anns_notes(env: dict[str, str], chats: Sequence[Chat], folder: Path) -> None:
    """``bots knowledge add`` Ann's notes as the collection ``ann`` and ``bots knowledge scope`` her private chats
    to it, as an operator does before starting the bot."""
    notes = folder / "ann-notes"
    notes.mkdir()
    (notes / "passport.md").write_text(NOTES, encoding="utf-8")
    scoped = [f"telegram:chat:{c.people[ANN][0]}" for c in chats if isinstance(c, TelegramChat)]
    scoped += [f"discord:channel:{c.dms[ANN]}" for c in chats if isinstance(c, DiscordChat)]
    commands = [["add", str(notes), "--collection", "ann"], *(["scope", cid, "ann"] for cid in scoped)]
    for command in commands:
        done = await asyncio.create_subprocess_exec(
            str(BOTS), "knowledge", *command, cwd=folder, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        output, _ = await done.communicate()
        assert done.returncode == 0, (command, output.decode(errors="replace")[-2000:])


def rows_of(runs: Sequence[Mapping[str, str]]) -> list[list[str]]:
    """The rows of the runs' table."""
    return [[str(i), *(run[name] for name in DIMENSIONS), ", ".join(PLATFORMS)] for i, run in enumerate(runs, 1)]


HEADER = ["#", *DIMENSIONS, "platforms"]
"""The columns of the runs' table."""


async def _run_all(runs: Sequence[Mapping[str, str]]) -> list[tuple[str, str]]:
    from tests.postgres_server import PostgresServer

    postgres = PostgresServer() if any(run["deployment"] == "fleet" for run in runs) else None
    if postgres is not None:
        postgres.start()
    results: list[tuple[str, str]] = []
    try:
        for run in runs:
            started_at = time.monotonic()
            database = postgres.create_database() if postgres is not None and run["deployment"] == "fleet" else None
            try:
                held = await run_privacy(run, cell_folder(), database_url=database)
                outcome = "passed: " + "; ".join(held)
            except Exception as exc:  # a failing run is a row of the table, not the end of the run
                outcome = f"FAILED: {type(exc).__name__}: {str(exc)[:160]}"
            results.append((outcome, f"{time.monotonic() - started_at:.0f}"))
            print(f"run {len(results)}/{len(runs)} {run_of(run).name}: {outcome}", file=sys.stderr, flush=True)
    finally:
        if postgres is not None:
            postgres.stop()
            postgres.cleanup()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.gate.privacy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="every combination, not only every pair")
    parser.add_argument("--list", action="store_true", help="print the runs without running them")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    runs = FULL if args.full else RUNS
    rows = rows_of(runs)
    if args.list:
        print(table(rows, HEADER, markdown=args.markdown))
        return 0
    results = asyncio.run(_run_all(runs))
    rows = [[*row, outcome, seconds] for row, (outcome, seconds) in zip(rows, results, strict=True)]
    print(table(rows, [*HEADER, "result", "seconds"], markdown=args.markdown))
    return 0 if all(outcome.startswith("passed") for outcome, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
