"""Bots that work together: ``ask_bot`` hands a task to another bot and returns its answer.

The bot that asks (``Teamwork(peers=...)``) stores the task as an input of the other bot's ``task`` context
(``core.teamwork.model``): in this process (``LocalPeer``) or in the other bot's Redis inboxes, where its workers
take it (``core.teamwork.fleet.FleetPeer``). The other bot (``Teamwork`` too, without peers if it asks no one)
answers with the ``task:answer`` output, and the answer comes back through an ``AnswerBox``.

Bounds: a task carries its ``depth`` (1 when a bot a person talks to asks; a bot asked at ``max_depth`` may ask no
further: no chains of bots without end), the caller waits ``timeout`` seconds at most, and the task may spend
``task_tokens`` tokens (the model calls past it are not made and the answer says so). The tokens it spent are
charged to the person the caller was answering (``user:<platform>:<id>`` in the caller's usage), so they count in
that person's daily budget (``BOT_TOKENS_PER_DAY_USER``); and the task acts with that person's trust tier.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, Field

from ..definitions import action, extension, output
from ..entries import InputRef, Log, OutputRef
from ..plugin import ModelCall, Plugin, RunHooks
from ..trust.tiers import TIER_PARAM
from ..usage import USAGE, day_of, user_of
from .boxes import AnswerBox, MemoryAnswerBox
from .model import ANSWER_OUTPUT, TASK_INPUT, Answer, TaskArgs, task_context, task_input

if TYPE_CHECKING:
    from ..definition_types import ActionContext, Extension, Host, Setup
    from ..models.base import ModelRequest
    from ..plugin import RunView

__all__ = ("ASK_BOT", "AskBotArgs", "LocalPeer", "Peer", "Teamwork")

log = logging.getLogger("core.teamwork")

ASK_BOT = "ask_bot"
"""The action's name."""


class Peer(Protocol):
    """Another bot tasks can be handed to."""

    @property
    def box(self) -> AnswerBox:
        """Where its answers come back."""
        ...

    async def hand(self, task_id: str, ref: InputRef) -> None:
        """Give it the task ``ref`` (raises when it cannot be handed over)."""
        ...


class AskBotArgs(BaseModel):
    """Arguments of ``ask_bot``."""

    bot: str = Field(min_length=1, max_length=64, description="The bot to ask (one of those listed)")
    task: str = Field(min_length=1, max_length=8000, description="The task, complete: the other bot sees nothing else")


@dataclass(slots=True)
class _RunInfo:
    depth: int = 0
    asker: str | None = None
    tier: str | None = None
    task: str | None = None
    budget: int = 0
    used_in: int = 0
    used_out: int = 0
    answer: str | None = None
    error: str | None = None


class Teamwork(Plugin):
    """Tasks for this bot (its ``task`` context and ``task:answer`` output, answers put in ``box``) and, with
    ``peers``, the ``ask_bot`` action that hands tasks to them."""

    name = "teamwork"

    def __init__(
        self,
        *,
        bot: str,
        peers: Mapping[str, Peer] | None = None,
        box: AnswerBox | None = None,
        max_depth: int = 2,
        timeout: float = 60.0,
        task_tokens: int = 8000,
    ) -> None:
        self.bot = bot
        """This bot's name, as the bots it asks see it."""
        self.peers: dict[str, Peer] = dict(peers or {})
        """The bots it may ask, by name."""
        self.box: AnswerBox = box if box is not None else MemoryAnswerBox()
        """Where this bot's answers to tasks go."""
        self.max_depth = max_depth
        self.timeout = timeout
        self.task_tokens = task_tokens
        self.host: Setup | None = None
        self._runs: dict[str, _RunInfo] = {}

    def attach(self, host: Setup) -> None:
        self.host = host

    def extension(self) -> Extension:
        answer = output(
            type=ANSWER_OUTPUT,
            description="Your answer to the task another bot handed you (it reads only this).",
            handler=lambda data, ctx, agent: None,
            context=task_context,
        )
        actions = []
        if self.peers:
            names = ", ".join(sorted(self.peers))
            actions.append(
                action(
                    name=ASK_BOT,
                    description=f"Hands a task to another bot and returns its answer. The bots: {names}.",
                    instructions="Use it when a task is another bot's field. Write the task completely: the other "
                    "bot sees nothing of this conversation.",
                    schema=AskBotArgs,
                    handler=self._ask,
                    timeout=self.timeout + 10,
                )
            )
        return extension(name="teamwork", contexts=[task_context], outputs=[answer], actions=actions)

    async def stop(self) -> None:
        for peer in self.peers.values():  # (a fleet's peers hold a Redis connection each)
            close = getattr(peer, "close", None)
            if close is not None:
                await close()

    def begin(self, run: RunView) -> RunHooks:
        info = self._runs[run.state.id] = _RunInfo()
        return _TeamRun(self, run, info)

    async def _ask(self, args: AskBotArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
        peer = self.peers.get(args.bot)
        if peer is None:
            raise ValueError(f"no bot {args.bot[:64]!r} to ask; ask one of {', '.join(sorted(self.peers))}")
        info = self._runs.get(ctx.state.id) or _RunInfo()
        if info.depth >= self.max_depth:
            raise ValueError(
                f"this task was handed on {info.depth} times already (the limit is {self.max_depth}): answer it "
                "yourself"
            )
        task_id = uuid.uuid4().hex
        ref = task_input(
            task=args.task,
            caller=self.bot,
            depth=info.depth + 1,
            budget=min(self.task_tokens, info.budget or self.task_tokens),
            asker=info.asker,
            tier=info.tier,
        )
        await peer.hand(task_id, ref)
        log.info("%s: task %s handed to %s (depth %d)", ctx.state.id, task_id[:12], args.bot, info.depth + 1)
        answer = await peer.box.wait(task_id, self.timeout)
        if answer is None:
            raise ValueError(f"{args.bot} gave no answer within {self.timeout:g}s")
        await self._charge(agent, ctx.state.id, info, args.bot, task_id, answer)
        if answer.error:
            raise ValueError(f"{args.bot} did not answer: {answer.error}")
        return {"bot": args.bot, "answer": answer.text}

    async def _charge(self, agent: Host, cid: str, info: _RunInfo, bot: str, task_id: str, answer: Answer) -> None:
        if not (answer.input_tokens or answer.output_tokens):
            return
        keys = [f"chat:{cid}", f"model:bot:{bot}"]
        if info.asker:
            keys.insert(0, f"user:{info.asker}")
        usage = agent.provided(USAGE)  # (the Usage plugin's store; without it nothing counts tokens)
        if usage is None:
            return
        try:
            await usage.add(
                day=day_of(),
                keys=keys,
                input_tokens=answer.input_tokens,
                output_tokens=answer.output_tokens,
                cost=0,
                charge=f"task:{task_id}",
            )
        except Exception:
            log.exception("could not count the tokens of task %s", task_id[:12])

    async def _settle(self, cid: str, info: _RunInfo) -> None:
        self._runs.pop(cid, None)
        if info.task is None:
            return
        found = Answer(
            text=info.answer or "",
            input_tokens=info.used_in,
            output_tokens=info.used_out,
            error=None if info.answer else info.error or "the bot ended its run without an answer",
        )
        try:
            await self.box.put(info.task, found)
        except Exception:
            log.exception("could not give back the answer of task %s", info.task[:12])


class _TeamRun(RunHooks):
    __slots__ = ("info", "plugin", "run")

    def __init__(self, plugin: Teamwork, run: RunView, info: _RunInfo) -> None:
        self.plugin, self.run, self.info = plugin, run, info

    def joined(self, ref: InputRef) -> None:
        info = self.info
        if ref.type == TASK_INPUT:
            params = ref.params
            info.task = self.run.state.key
            info.depth = max(info.depth, _number(params.get("depth"), 1))
            given = _number(params.get("budget"), self.plugin.task_tokens)
            info.budget = min(given, self.plugin.task_tokens)  # (the asker's budget, within this bot's own cap)
        asker = user_of(ref)
        if asker:
            info.asker = asker
        if ref.params.get(TIER_PARAM):
            info.tier = ref.params[TIER_PARAM]

    async def allow(self, request: ModelRequest, updates: list[Log]) -> bool:
        info = self.info
        if info.task is not None and info.used_in + info.used_out >= info.budget:
            info.error = f"its token budget of {info.budget} was spent"
            return False
        return True

    async def charged(self, call: ModelCall) -> None:
        self.info.used_in += call.input_tokens
        self.info.used_out += call.output_tokens

    def delivered(self, output_type: str, text: str) -> None:
        if output_type == ANSWER_OUTPUT and self.info.answer is None:
            self.info.answer = text

    async def ended(self, chain: Sequence[Log]) -> None:
        info = self.info
        if info.task is not None and info.answer is None:
            found = [e for e in chain if isinstance(e, OutputRef) and e.type == ANSWER_OUTPUT and not e.error]
            if found:
                info.answer = found[0].content
        await self.plugin._settle(self.run.state.id, info)


def _number(value: str | None, default: int) -> int:
    return int(value) if value and value.isascii() and value.isdigit() and len(value) < 10 else default


class LocalPeer:
    """Another bot in this process: ``team`` is its ``Teamwork`` plugin (its agent built)."""

    def __init__(self, team: Teamwork) -> None:
        self.team = team
        self.box = team.box
        self._tasks: set[asyncio.Task[Any]] = set()

    async def hand(self, task_id: str, ref: InputRef) -> None:
        host = self.team.host
        if host is None:
            raise RuntimeError(f"the bot {self.team.bot} is not built: create its agent first")
        task = asyncio.get_running_loop().create_task(host.send(task_context, TaskArgs(id=task_id), ref))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
