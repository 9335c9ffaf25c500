"""Per-user and per-conversation limits, checked before the model is called.

Three limits (each off at 0): messages per minute per user, model tokens per day per user and per conversation, and
the length of one input. The step loop asks ``Limiter.check`` about every new input before a step: a refused input is
not shown to the model (it is dropped from working memory), and the user gets one short, polite answer per limit and
window (``Refusal.notice``), saying when to try again. Admin users (``LimitConfig.admins``) are never refused.

The tokens are not counted here: the limits read today's totals of the agent's ``core.usage.UsageStore`` (the
counters ``/stats`` shows, under ``user:<platform:id>`` and ``chat:<context id>``), which adds each model call once
by its charge id (the batch and the step), so a batch run again after a crash charges nothing twice. In Redis mode
that store is shared by every worker, so the limits hold across the fleet.

The rest lives in a ``LimitStore``: the messages of each window and the notices already given; ``InMemoryLimitStore``
in one process, ``core.fleet.RedisLimitStore`` when workers share Redis. A message counts once however many times its
batch is run (it is counted by its id, and keeps its place in its window), so a worker killed after counting it
neither loses nor double-counts it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from ..entries import InputRef, now_ms
from ..slots import Slot
from ..trust.tiers import TIER_PARAM, Tier
from ..usage import UsageStore, day_of, user_of

__all__ = (
    "LIMITER",
    "InMemoryLimitStore",
    "LimitConfig",
    "LimitKind",
    "LimitStore",
    "Limiter",
    "Refusal",
)

LIMITER: Slot[Limiter] = Slot("limiter")
"""The limits the ``Limits`` plugin holds inputs to (``agent.provided(LIMITER)``; None: no limits)."""

_MINUTE_MS = 60_000


class LimitKind(enum.StrEnum):
    """Which limit refused an input (the ``limit`` label of the metric)."""

    INPUT_LENGTH = "input_length"
    """The message is longer than ``max_input_chars``."""
    MESSAGES = "messages"
    """The user sent more than ``messages_per_minute`` this minute."""
    USER_TOKENS = "user_tokens"
    """The user's model tokens today reached ``tokens_per_day_user``."""
    CONVERSATION_TOKENS = "conversation_tokens"
    """The conversation's model tokens today reached ``tokens_per_day_conversation``."""


@dataclass(frozen=True, kw_only=True)
class LimitConfig:
    """The limits (0: off)."""

    messages_per_minute: int = 0
    """Messages one user may send per minute (fixed one-minute windows)."""
    tokens_per_day_user: int = 0
    """Model tokens (input and output) spent answering one user per UTC day."""
    tokens_per_day_conversation: int = 0
    """Model tokens spent in one conversation per UTC day."""
    max_input_chars: int = 0
    """Characters of one input at most."""
    message_window: int = 60
    """Seconds of the window ``messages_per_minute`` counts in (a minute; tests take a longer one)."""
    admins: frozenset[str] = frozenset()
    """Platform-qualified user ids (``telegram:123``, ``discord:456``) that no limit applies to."""

    @property
    def active(self) -> bool:
        """True when at least one limit is on."""
        return bool(
            self.messages_per_minute
            or self.tokens_per_day_user
            or self.tokens_per_day_conversation
            or self.max_input_chars
        )


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """Why an input is not answered, and what its author is told."""

    kind: LimitKind
    """The limit."""
    notice: str
    """The short answer for the user."""
    notice_key: str
    """Who is told once per window: the limit, the user or conversation, the window."""
    until_ms: int
    """When the window ends (ms since the epoch): no second notice before."""


class LimitStore(Protocol):
    """Where the message counts and the notices given are kept (the tokens are the agent's ``UsageStore``)."""

    async def count_message(self, *, user: str, message_id: str, minute: int, ttl_ms: int = 120_000) -> int:
        """Record ``message_id`` of ``user`` in the window numbered ``minute`` (idempotent), kept ``ttl_ms``; return
        its position (1-based) among the window's distinct messages, in the order they were first counted: the same
        answer however often it is asked, so a batch run again decides as the first time."""
        ...

    async def notice_due(self, *, key: str, until_ms: int) -> bool:
        """True the first time ``key`` is asked before ``until_ms``; False again until then."""
        ...


@dataclass(kw_only=True)
class InMemoryLimitStore:
    """The counters of one process (lost when it stops)."""

    messages: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)
    """Message ids and their positions by (user, window)."""
    notices: dict[str, int] = field(default_factory=dict)
    """Notice keys and when they expire."""

    async def count_message(self, *, user: str, message_id: str, minute: int, ttl_ms: int = 120_000) -> int:
        """See ``LimitStore``."""
        for key in [k for k in self.messages if k[1] < minute - 1]:
            del self.messages[key]
        ids = self.messages.setdefault((user, minute), {})
        return ids.setdefault(message_id, len(ids) + 1)

    async def notice_due(self, *, key: str, until_ms: int) -> bool:
        """See ``LimitStore``."""
        now = now_ms()
        if self.notices.get(key, 0) > now:
            return False
        self.notices[key] = until_ms
        return True


def _next_day_ms(ms: int) -> int:
    day = datetime.fromtimestamp(ms / 1000, tz=UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return int((day + timedelta(days=1)).timestamp() * 1000)


def _wait_text(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} seconds"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} minutes"
    return f"{round(seconds / 3600)} hours"


class Limiter:
    """Applies a ``LimitConfig`` with the message counts of a ``LimitStore`` and the tokens of a ``UsageStore``."""

    def __init__(self, config: LimitConfig, store: LimitStore | None = None) -> None:
        self.config = config
        """The limits."""
        self.store: LimitStore = store if store is not None else InMemoryLimitStore()
        """The message counts and the notices given."""

    def is_admin(self, user: str | None) -> bool:
        """True for a user listed in ``BOT_ADMIN_USERS``."""
        return bool(user) and user in self.config.admins

    def exempt(self, ref: InputRef) -> bool:
        """True for an operator's input, which no limit applies to: its user is listed (``is_admin``), or the
        input comes as the owner's (``tier``: the person at the terminal, a webhook the operator made the owner's)."""
        return self.is_admin(user_of(ref)) or ref.params.get(TIER_PARAM) == Tier.OWNER

    async def check(self, ref: InputRef, *, conversation: str, text: str, usage: UsageStore) -> Refusal | None:
        """Count ``ref`` and say whether it is over a limit (None: answer it). ``text`` is what the model would
        read of it; the day's tokens are read from ``usage`` (the agent's counters: ``user:<platform:id>`` and
        ``chat:<conversation>``)."""
        cfg = self.config
        user = user_of(ref)
        if not cfg.active or self.exempt(ref):
            return None
        now = now_ms()
        if cfg.max_input_chars and len(text) > cfg.max_input_chars:
            return Refusal(
                kind=LimitKind.INPUT_LENGTH,
                notice=(
                    f"Sorry, your message is too long for me ({len(text):,} characters; I read at most "
                    f"{cfg.max_input_chars:,}). Please send a shorter one."
                ),
                notice_key=f"{LimitKind.INPUT_LENGTH}:{user or ref.id}:{now // _MINUTE_MS}",  # once a minute each
                until_ms=now + _MINUTE_MS,
            )
        if cfg.messages_per_minute and user:
            window_ms = max(1, cfg.message_window) * 1000
            minute = ref.timestamp // window_ms
            position = await self.store.count_message(user=user, message_id=ref.id, minute=minute, ttl_ms=2 * window_ms)
            if position > cfg.messages_per_minute:
                until = (minute + 1) * window_ms
                per = "a minute" if window_ms == _MINUTE_MS else f"in {_wait_text(window_ms / 1000)}"
                return Refusal(
                    kind=LimitKind.MESSAGES,
                    notice=(
                        f"You are sending messages faster than I can answer (at most {cfg.messages_per_minute} "
                        f"{per}). Please try again in {_wait_text((until - now) / 1000)}."
                    ),
                    notice_key=f"{LimitKind.MESSAGES}:{user}:{minute}",
                    until_ms=until,
                )
        if cfg.tokens_per_day_user or cfg.tokens_per_day_conversation:
            day = day_of(now)
            for kind, limit, who, spent in await self._spent_today(user, conversation, usage, day):
                if spent >= limit:
                    until = _next_day_ms(now)
                    later = f"Please try again after midnight UTC (in about {_wait_text((until - now) / 1000)})."
                    used_up = (
                        "you have used up what I can answer you"
                        if kind is LimitKind.USER_TOKENS
                        else "this conversation has used up what I can answer"
                    )
                    return Refusal(
                        kind=kind,
                        notice=f"Sorry, {used_up} today. {later}",
                        notice_key=f"{kind}:{who}:{day}",
                        until_ms=until,
                    )
        return None

    async def _spent_today(
        self, user: str | None, conversation: str, usage: UsageStore, day: str
    ) -> list[tuple[LimitKind, int, str | None, int]]:
        """Each token budget that is on (per user, per conversation): who it is for, and what they spent ``day``."""
        cfg = self.config
        found = []
        for kind, limit, prefix, who in (
            (LimitKind.USER_TOKENS, cfg.tokens_per_day_user if user else 0, "user", user),
            (LimitKind.CONVERSATION_TOKENS, cfg.tokens_per_day_conversation, "chat", conversation),
        ):
            if limit:
                found.append((kind, limit, who, (await usage.totals(f"{prefix}:{who}", [day])).tokens))
        return found

    async def check_call(
        self, *, tokens: int, user: str | None, conversation: str, usage: UsageStore
    ) -> Refusal | None:
        """Whether a model call that sends ``tokens`` fits in what is left today of ``user``'s and ``conversation``'s
        token budgets (None: make it). A burst of messages answered by one call counts whole: a call that would
        pass a budget is not made, however little of the budget was spent before it."""
        cfg = self.config
        if not (cfg.tokens_per_day_user or cfg.tokens_per_day_conversation) or self.is_admin(user):
            return None
        now = now_ms()
        day = day_of(now)
        for kind, limit, who, spent in await self._spent_today(user, conversation, usage, day):
            if spent + tokens > limit:
                until = _next_day_ms(now)
                whose = "your" if kind is LimitKind.USER_TOKENS else "this conversation's"
                return Refusal(
                    kind=kind,
                    notice=(
                        f"Sorry, answering this would take about {tokens:,} tokens, more than what is left of {whose} "
                        f"daily budget ({max(0, limit - spent):,} of {limit:,}). Please send less at once, or try "
                        f"again after midnight UTC (in about {_wait_text((until - now) / 1000)})."
                    ),
                    notice_key=f"{kind}:call:{who}:{day}:{spent}",
                    until_ms=until,
                )
        return None

    async def notice_due(self, refusal: Refusal) -> bool:
        """True when the user was not told about this limit in this window yet (then they are, now)."""
        return await self.store.notice_due(key=refusal.notice_key, until_ms=refusal.until_ms)
