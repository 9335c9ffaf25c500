"""What the console reads, gathered in one place: conversations (the history store), usage (the usage store, or the
fleet's counters in Redis), and the run events of the conversations being watched (the live tail)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pydantic

from core.memory.history import HISTORY, ConversationIndex, ConversationInfo, HistoryEntry
from core.usage import CACHED, USAGE, UsageIndex, UsageTotals, last_days

from .charts import Bar, money

if TYPE_CHECKING:
    from core import Host
    from core.definitions import Context
    from core.events import RunEvent

__all__ = ("Tail", "UsageReport", "args_of", "conversation_of", "redis_day_rows", "tail_item", "usage_report")

TAIL_QUEUE = 500
"""Run events waiting for one open tail at most (older ones are dropped)."""


def when(ms: float) -> str:
    """``2026-11-24 06:30:12`` (UTC) of a time in ms since the epoch."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def args_of(context: Context, key: str) -> Any:
    """The arguments naming the instance ``key`` of ``context`` (its schema's fields take the ``:``-separated parts
    of the key in order: ``123:45`` -> ``chat_id=123, thread_id=45``); None when they cannot be rebuilt."""
    model = context.schema.tp
    try:
        if isinstance(model, type) and issubclass(model, pydantic.BaseModel):
            names = list(model.model_fields)
            parts = key.split(":")
            if len(parts) > len(names):
                return None
            return context.schema.validate(dict(zip(names, parts, strict=False)))
        return context.schema.validate(key)
    except Exception:
        return None


def _known_contexts(agent: Host) -> dict[str, Context]:
    """The agent's contexts and the chat platforms' (a gateway's console runs beside one platform's agent, and
    forgets the others' conversations too: their definitions need no client library)."""
    from extensions.discord.definitions import discord_channel
    from extensions.telegram.definitions import telegram_chat
    from extensions.terminal import cli_session
    from extensions.web import web_chat

    known: dict[str, Context] = {c.type: c for c in (telegram_chat, discord_channel, web_chat, cli_session)}
    known.update(agent.contexts)
    return known


def conversation_of(agent: Host, cid: str) -> tuple[Context, Any] | None:
    """The context and arguments of the conversation ``cid`` (``telegram:chat:123``), when they can be rebuilt."""
    for type_, context in _known_contexts(agent).items():
        if cid.startswith(type_ + ":"):
            args = args_of(context, cid[len(type_) + 1 :])
            if args is not None and agent.context_id(context, args) == cid:
                return context, args
    return None


async def conversations(agent: Host, words: str, *, limit: int = 50) -> list[ConversationInfo] | None:
    """The conversations matching ``words`` (None when the history store cannot list them)."""
    history = agent.provided(HISTORY)
    if not isinstance(history, ConversationIndex):
        return None
    return await history.conversations(words=words, limit=limit)


async def transcript(agent: Host, cid: str, *, limit: int = 200) -> list[HistoryEntry]:
    """The newest ``limit`` entries of ``cid``, oldest first."""
    history = agent.provided(HISTORY)
    if history is None:
        return []
    return list(reversed(await history.search(cid, limit=limit)))


async def redis_day_rows(client: Any, prefix: str, days: list[str]) -> list[tuple[str, str, UsageTotals]]:
    """The fleet's usage counters (``core.fleet.RedisUsage``: ``<prefix>usage:<day>:<key>`` hashes) on ``days``."""
    rows: list[tuple[str, str, UsageTotals]] = []
    for day in days:
        head = f"{prefix}usage:{day}:"
        async for name in client.scan_iter(match=head + "*", count=500):
            values = await client.hgetall(name)
            rows.append(
                (
                    day,
                    name[len(head) :],
                    UsageTotals(
                        input_tokens=int(values.get("in", 0)),
                        output_tokens=int(values.get("out", 0)),
                        cost_micros=int(values.get("cost", 0)),
                    ),
                )
            )
    return rows


@dataclass(kw_only=True)
class Near:
    """A user or conversation and its share of its daily token limit."""

    who: str
    used: int
    limit: int

    @property
    def percent(self) -> int:
        return min(100, round(100 * self.used / self.limit)) if self.limit else 0


@dataclass(kw_only=True)
class UsageReport:
    """What the usage page shows."""

    days: list[Bar] = field(default_factory=list)
    models: list[tuple[str, UsageTotals]] = field(default_factory=list)
    users: list[tuple[str, UsageTotals]] = field(default_factory=list)
    chats: list[tuple[str, UsageTotals]] = field(default_factory=list)
    near_users: list[Near] = field(default_factory=list)
    near_chats: list[Near] = field(default_factory=list)
    total: UsageTotals = field(default_factory=UsageTotals)
    cached: dict[str, int] = field(default_factory=dict)
    """Input tokens the provider read from its prompt cache, by ``chat:<id>`` and ``model:<name>``."""
    cached_total: int = 0
    """Input tokens the provider read from its prompt cache, every model."""
    available: bool = True


def _top(totals: dict[str, UsageTotals], count: int = 15) -> list[tuple[str, UsageTotals]]:
    return sorted(totals.items(), key=lambda item: -item[1].tokens)[:count]


async def usage_report(
    agent: Host, *, days: int, user_limit: int, chat_limit: int, redis: tuple[Any, str] | None = None
) -> UsageReport:
    """Tokens and cost per day (the ``model:`` counters added up), per model, user and chat over ``days`` days, and
    today's users and conversations nearest their daily limits."""
    wanted = last_days(days)
    usage = agent.provided(USAGE)  # (the Usage plugin's store)
    if isinstance(usage, UsageIndex):
        rows = await usage.day_rows(wanted)
    elif redis is not None:
        rows = await redis_day_rows(redis[0], redis[1], wanted)
    else:
        return UsageReport(available=False)
    report = UsageReport()
    per_day: dict[str, UsageTotals] = defaultdict(UsageTotals)
    groups: dict[str, dict[str, UsageTotals]] = {"model": {}, "user": {}, "chat": {}}
    today: dict[str, dict[str, int]] = {"user": {}, "chat": {}}
    for day, key, totals in rows:
        kind, _, name = key.partition(":")
        if key.startswith(CACHED):  # (cached:chat:<id>, cached:model:<name>: of their input tokens)
            report.cached[name] = report.cached.get(name, 0) + totals.input_tokens
            if name.startswith("model:"):
                report.cached_total += totals.input_tokens
            continue
        if kind not in groups:
            continue
        groups[kind].setdefault(name, UsageTotals()).add(totals)
        if kind == "model":
            per_day[day].add(totals)
            report.total.add(totals)
        if day == wanted[0] and kind in today:
            today[kind][name] = today[kind].get(name, 0) + totals.tokens
    for day in reversed(wanted):
        t = per_day.get(day, UsageTotals())
        report.days.append(
            Bar(label=day[5:], input=t.input_tokens, output=t.output_tokens, note=money(t.cost) if t.cost else "")
        )
    report.models = _top(groups["model"])
    report.users = _top(groups["user"])
    report.chats = _top(groups["chat"])
    for kind, limit, out in (("user", user_limit, report.near_users), ("chat", chat_limit, report.near_chats)):
        if limit:
            near = [Near(who=who, used=used, limit=limit) for who, used in today[kind].items()]
            out.extend(sorted(near, key=lambda n: -n.used)[:10])
    return report


def tail_item(event: RunEvent) -> dict[str, Any]:
    """A run event as the live tail shows it (JSON)."""
    content = event.content if isinstance(event.content, str) else repr(event.content)
    return {
        "type": event.type.value,
        "step": event.step,
        "output_type": event.output_type,
        "final": event.final,
        "error": event.error,
        "content": content[:2000],
    }


class Tail:
    """The run events of the conversations someone watches, for the live tail (an agent event listener)."""

    def __init__(self) -> None:
        self._watchers: dict[str, set[asyncio.Queue[dict[str, Any]]]] = {}

    def on_event(self, event: RunEvent) -> None:
        """The agent's event listener (synchronous, never raises)."""
        watchers = self._watchers.get(event.context_id)
        if not watchers:
            return
        self.put(event.context_id, tail_item(event))

    def put(self, cid: str, item: dict[str, Any]) -> None:
        """Show ``item`` (a run event, ``tail_item``) to those watching ``cid``."""
        for queue in list(self._watchers.get(cid, ())):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(item)

    @contextlib.contextmanager
    def watch(self, cid: str) -> Iterator[asyncio.Queue[dict[str, Any]]]:
        """A queue of the run events of ``cid`` while the block lasts."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(TAIL_QUEUE)
        self._watchers.setdefault(cid, set()).add(queue)
        try:
            yield queue
        finally:
            watchers = self._watchers.get(cid)
            if watchers is not None:
                watchers.discard(queue)
                if not watchers:
                    del self._watchers[cid]
