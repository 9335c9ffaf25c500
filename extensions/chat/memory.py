"""``/memory`` in every chat, written once: what the bot keeps about the person asking (their facts in every
conversation, the reminders they set, their usage), and deleting one item of it or all of it. It reads the
shared stores (``core.facts``, ``core.schedules``, the usage counters), so in a fleet the gateway answers it for
what every worker kept.

What it lists is the asker's alone: each platform shows the answer to them only (Discord: an ephemeral reply;
Telegram: in their private chat with the bot, never in a group; the web chat's visitor is alone in theirs).

The usage counters are shown and not deleted: the per-day token limits read them (``core.limits``), and they hold
numbers, not what anyone said.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.facts import Fact, FactScope, facts_of
from core.usage import USAGE, USAGE_DAYS, InMemoryUsage, last_days

from .i18n import say
from .reminders import describe, schedules_or_none

if TYPE_CHECKING:
    from core import Host
    from core.schedules import Schedule

__all__ = ("SHOWN", "Kept", "kept_about", "memory_text")

log = logging.getLogger("extensions.chat")

SHOWN = 30
"""Items ``/memory`` lists at most (``/memory delete N`` reaches the others all the same)."""
TEXT_CHARS = 200
"""Characters of a fact shown in the list at most."""


@dataclass(frozen=True, kw_only=True)
class Kept:
    """One item of what the bot keeps about someone: a fact or a reminder."""

    at: int
    """When it was kept, in ms since the epoch (the list is in this order, so numbers stay put as items come)."""
    fact: Fact | None = None
    """The fact, for a fact."""
    schedule: Schedule | None = None
    """The reminder, for a reminder."""


async def kept_about(agent: Host, user: str) -> list[Kept] | None:
    """Every fact ``user`` owns and every reminder they set, oldest first; None when the bot keeps neither."""
    facts, schedules = facts_of(agent), schedules_or_none(agent)
    if facts is None and schedules is None:
        return None
    found: list[Kept] = []
    if facts is not None:
        found.extend(Kept(at=f.at, fact=f) for f in await facts.store.of_owner(user))
    if schedules is not None:
        for schedule in await schedules.by_creator(user):
            found.append(Kept(at=int(schedule.created_at.timestamp() * 1000), schedule=schedule))
    return sorted(found, key=lambda k: (k.at, k.fact.id if k.fact else k.schedule.id if k.schedule else ""))


def _line(n: int, item: Kept, *, here: str, lang: str | None, quote: Callable[[str], str]) -> str:
    if item.fact is not None:
        fact = item.fact
        where = say("memory.here", lang) if fact.conversation == here else fact.conversation
        scope = say("memory.private" if fact.scope is FactScope.PRIVATE else "memory.group", lang)
        text = fact.text if len(fact.text) <= TEXT_CHARS else fact.text[: TEXT_CHARS - 1] + "…"
        return say("memory.fact", lang, n=n, where=where, scope=scope, text=quote(text))
    assert item.schedule is not None
    schedule = item.schedule
    where = say("memory.here", lang) if schedule.conversation == here else schedule.conversation
    return say("memory.reminder", lang, n=n, where=where, text=describe(schedule, lang=lang, quote=quote))


async def _usage(agent: Host, user: str, lang: str | None) -> str:
    usage = agent.provided(USAGE)  # (the Usage plugin's store; without it nothing was counted)
    if usage is None:
        usage = InMemoryUsage()
    today = await usage.totals(f"user:{user}", last_days(1))
    month = await usage.totals(f"user:{user}", last_days(30))
    return say(
        "memory_usage",
        lang,
        today=today.tokens,
        cost_today=f"{today.cost:.4f}",
        month=month.tokens,
        cost_month=f"{month.cost:.4f}",
        days=USAGE_DAYS,
    )


async def _delete(agent: Host, items: list[Kept]) -> tuple[int, int]:
    """Delete ``items``: ``(facts, reminders)`` deleted."""
    facts, schedules = facts_of(agent), schedules_or_none(agent)
    by_conversation: dict[str, list[str]] = {}
    for item in items:
        if item.fact is not None:
            by_conversation.setdefault(item.fact.conversation, []).append(item.fact.id)
    deleted_facts = deleted_reminders = 0
    if facts is not None:
        for conversation, ids in by_conversation.items():
            deleted_facts += len(await facts.store.delete(conversation, ids))
    if schedules is not None:
        for item in items:
            if item.schedule is not None and await schedules.cancel(item.schedule.id) is not None:
                deleted_reminders += 1
    return deleted_facts, deleted_reminders


async def memory_text(
    agent: Host, user: str, arg: str | None, *, here: str, lang: str | None, quote: Callable[[str], str] = str
) -> tuple[str, bool]:
    """The answer to ``/memory [arg]`` by ``user`` in the conversation ``here``, and whether something was deleted:
    the list (numbered, oldest first, with the usage), or ``delete N`` / ``delete all``."""
    action, _, rest = (arg or "").strip().partition(" ")
    action, rest = action.lower(), rest.strip().lower().removeprefix("#")
    if action not in ("", "list", "delete") or (action == "delete" and not rest):
        return say("memory_usage_hint", lang), False
    items = await kept_about(agent, user)
    if items is None:
        return say("memory_unavailable", lang), False
    if action == "delete" and rest == "all":
        facts, reminders = await _delete(agent, items)
        log.info("%s deleted what the bot kept about them: %d fact(s), %d reminder(s)", user, facts, reminders)
        return say("memory_deleted_all", lang, facts=facts, reminders=reminders), True
    if action == "delete":
        number = int(rest) if rest.isascii() and rest.isdigit() and len(rest) <= 6 else 0  # (never ², ٣ or １)
        if not 1 <= number <= len(items):
            return say("memory_unknown", lang, n=quote(rest[:16])), False
        item = items[number - 1]
        shown = _line(number, item, here=here, lang=lang, quote=quote)
        await _delete(agent, [item])
        return say("memory_deleted", lang, item=shown), True
    usage = await _usage(agent, user, lang)
    if not items:
        return f"{say('memory_none', lang)}\n\n{usage}", False
    lines = [_line(n, item, here=here, lang=lang, quote=quote) for n, item in enumerate(items[:SHOWN], start=1)]
    if len(items) > SHOWN:
        lines.append(say("reminders_more", lang, count=len(items) - SHOWN))
    listed = say("memory_list", lang, count=len(items), items="\n".join(lines))
    return f"{listed}\n\n{usage}\n{say('memory_how', lang)}", False
