"""The Prometheus metrics of one process (``/metrics``) and the functions that count them.

Everything is registered on prometheus-client's default registry, next to its process and GC collectors.
Three ways to count:

- the agent's own hooks: ``Ops.attach(agent)`` (``bots.ops``) adds ``observe`` with ``agent.add_observer`` and a
  ``RunTracker`` with ``agent.add_event_listener``, which count runs, model calls, replies and tokens;
- extensions report through the agent, so they never import ``bots``: ``agent.observe(kind, context_id,
  value)`` with a kind of ``KINDS`` (``agent.observe("message_received", "discord:channel:42")``); the
  chat adapters do it through ``extensions.chat.ChatMetrics``, whose ``Ignored`` lists the reasons;
- code in ``bots`` (gateway, worker) calls the functions below directly.

The platform label is the first part of a context id (``telegram`` of ``telegram:chat:42``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from prometheus_client import Counter, Gauge, Histogram

from core import tracing
from core.events import RunEvent, RunEventType
from core.models import ModelRoute
from core.models.base import call_route
from core.trust import AuditEvent

if TYPE_CHECKING:
    from core import Setup

__all__ = (
    "ATTACHMENTS",
    "ATTACHMENT_BYTES",
    "FEEDBACK",
    "GATEWAY_SHARDS",
    "GATEWAY_SHARD_HELD",
    "KINDS",
    "LEASE_EVENTS",
    "LIMITED",
    "MESSAGES_ANSWERED",
    "MESSAGES_FAILED",
    "MESSAGES_IGNORED",
    "MESSAGES_RECEIVED",
    "MODEL_FAILED",
    "MODEL_FORMAT_FAILED",
    "MODEL_RESTARTED",
    "MODEL_SECONDS",
    "MODEL_SKIPPED",
    "PLATFORM_RATE_LIMITED",
    "QUEUE_DEPTH",
    "REDIS_DATA_LOST",
    "REDIS_REPLICAS_IN_SYNC",
    "REDIS_WRITES_WAIT",
    "REPLIES_UNCERTAIN",
    "REPLY_SECONDS",
    "RUN_SECONDS",
    "SCHEDULES",
    "SCHEDULES_LATE",
    "SCHEDULES_PENDING",
    "TOKENS",
    "WORKER_LEASES",
    "WORKER_LEASES_HELD",
    "WORKER_UP",
    "RunTracker",
    "lease",
    "message_answered",
    "message_failed",
    "message_ignored",
    "message_received",
    "observe",
    "platform_of",
    "rate_limited",
    "set_queue_depth",
    "set_replication",
    "set_shards",
)

log = logging.getLogger("bots.metrics")
runs_log = logging.getLogger("bots.runs")
"""One line at INFO per run: how it ended (answered, no reply, failed) and how long it took; never a message's text."""

_LATENCY = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)

MESSAGES_RECEIVED = Counter(
    "bots_messages_received", "Messages that reached the bot from a chat platform", ["platform"]
)
MESSAGES_IGNORED = Counter(
    "bots_messages_ignored",
    "Messages the bot did not answer: filtered by the adapter (reason: own, bot, bot_hops, bot_cap, policy, allowlist, "
    "duplicate, empty, busy, stopping) or the model chose to stay silent (reason: no_reply)",
    ["platform", "reason"],
)
MESSAGES_ANSWERED = Counter(
    "bots_messages_answered", "Runs that delivered at least one reply (a burst of messages joins one run)", ["platform"]
)
MESSAGES_FAILED = Counter("bots_messages_failed", "Runs that ended with an error", ["platform"])
QUEUE_DEPTH = Gauge("bots_queue_depth", "Inputs waiting in the queue", ["queue"])
RUN_SECONDS = Histogram(
    "bots_run_seconds", "Duration of a run, from start to saved memory", ["platform"], buckets=_LATENCY
)
MODEL_SECONDS = Histogram(
    "bots_model_seconds", "Duration of one model call (a step), by the model that answered", ["model"], buckets=_LATENCY
)
MODEL_RESTARTED = Counter(
    "bots_model_calls_restarted",
    "Model calls cancelled and started again because another message of the conversation arrived before the "
    "answer's first word was shown (core.busy)",
)
MODEL_RESTARTED_TOKENS = Counter(
    "bots_model_calls_restarted_tokens",
    "Tokens (estimated, prompt and answer) of the model calls cancelled and started again (core.busy)",
)
MODEL_FAILED = Counter(
    "bots_model_failed",
    "Calls a model of the chain (LLM_FALLBACKS) failed with a timeout, a 429, a 5xx, a refused connection or a "
    "dropped stream; the next model answered the step unless the answer had begun",
    ["model"],
)
MODEL_FORMAT_FAILED = Counter(
    "bots_model_format_failed",
    "Runs that ended with nothing said because the model answered outside the response format (the person is told "
    "the model failed)",
    ["model"],
)
MODEL_SKIPPED = Counter(
    "bots_model_skipped",
    "Calls that passed a model of the chain over while its circuit breaker paused it (LLM_BREAKER_PAUSE)",
    ["model"],
)
REPLY_SECONDS = Histogram(
    "bots_reply_seconds",
    "From the message's arrival to the first reply delivered for it (across the queue)",
    ["platform"],
    buckets=_LATENCY,
)
ATTACHMENTS = Counter(
    "bots_attachments",
    "Attachments of incoming messages by kind (image, audio, file) and outcome (shown to the model, read as "
    "text, transcribed, not_read: over a limit, a type not read, a failed download, no vision or speech to text)",
    ["kind", "outcome"],
)
ATTACHMENT_BYTES = Counter("bots_attachment_bytes", "Bytes of attachments downloaded from the platforms")
TOKENS = Counter("bots_model_tokens", "Tokens the model read (input) and wrote (output)", ["direction"])
MODEL_TOKENS = Counter(
    "bots_usage_tokens", "Tokens by model (a conversation's /model included) and direction", ["model", "direction"]
)
MODEL_COST = Counter("bots_usage_cost_dollars", "Estimated cost in dollars by model (LLM_PRICES)", ["model"])
LIMITED = Counter(
    "bots_limited",
    "Inputs refused by a limit (BOT_MESSAGES_PER_MINUTE, BOT_TOKENS_PER_DAY_*, BOT_MAX_INPUT_CHARS): the model did "
    "not see them",
    ["platform", "limit"],
)
PLATFORM_RATE_LIMITED = Counter(
    "bots_platform_rate_limited", "Requests a chat platform answered with 429 Too Many Requests", ["platform"]
)
FEEDBACK = Counter(
    "bots_feedback",
    "Reactions people put on the bot's answers, by what they say of it (score: up, down; core.usage.feedback)",
    ["platform", "score"],
)
REPLIES_UNCERTAIN = Counter(
    "bots_replies_uncertain",
    "Posts a crashed worker sent and never heard back about, found by the worker that answered the batch again "
    "(outcome: resend, posted again, maybe shown twice; skip, taken as shown, maybe missing)",
    ["platform", "outcome"],
)
SCHEDULES_PENDING = Gauge(
    "bots_schedules_pending", "Active reminders and scheduled messages, all conversations (counted every few seconds)"
)
SCHEDULES = {
    kind: Counter(f"bots_schedules_{kind}", text, ["platform"])
    for kind, text in (
        ("fired", "Occurrences of reminders and scheduled messages fired (sent to their conversation)"),
        ("failed", "Attempts to fire an occurrence that failed (tried again while the claim lasts, then by another)"),
        ("missed", "Occurrences not fired: more than BOT_SCHEDULES_GRACE late when found (the bot was down)"),
        ("dropped", "Schedules cancelled because the platform said the bot may no longer post in their chat"),
    )
}
"""``bots_schedules_<kind>_total{platform}``: what happened to schedules (``core.schedules``)."""
SCHEDULES_LATE = Histogram(
    "bots_schedules_late_seconds",
    "Seconds between an occurrence's due time and its firing",
    ["platform"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600),
)
WORKER_LEASES = Counter(
    "bots_worker_leases", "Context leases of this worker by event (claimed, renewed, lost, released)", ["event"]
)
WORKER_LEASES_HELD = Gauge("bots_worker_leases_held", "Context leases this worker holds now")
WORKER_UP = Gauge(
    "bots_worker_up",
    "1 in a bots worker taking work from the queue, 0 elsewhere (every process exports it: the alert "
    "BotsNoWorker sums it over the fleet)",
)
REDIS_REPLICAS_IN_SYNC = Gauge(
    "bots_redis_replicas_in_sync",
    "Replicas in step with the Redis primary (online, acknowledging within 2 s), as this process last read them",
)
REDIS_WRITES_WAIT = Gauge(
    "bots_redis_writes_wait_for_replica",
    "1 while writes wait for a replica: the primary has fewer replicas in sync than REDIS_MIN_REPLICAS, so every "
    "acknowledgement is held (bots doctor says what to do)",
)
REDIS_DATA_LOST = Counter(
    "bots_redis_data_lost",
    "Times this process found the fleet's Redis data gone: the marker bots:fleet:data it read before replaced (a "
    "Redis server came back without its data and serves as the primary, or Redis was flushed)",
)
GATEWAY_SHARDS = Gauge("bots_gateway_shards", "Shards of a platform in all (DISCORD_SHARD_COUNT)", ["platform"])
GATEWAY_SHARD_HELD = Gauge(
    "bots_gateway_shard_held", "1 for each shard this gateway process holds now", ["platform", "shard"]
)

ACTIONS = {
    event: Counter(f"bots_actions_{event.value}", text, ["platform", "tier"])
    for event, text in (
        (AuditEvent.REFUSED, "Action calls refused: the author's tier may not make them (ACTIONS_POLICY)"),
        (AuditEvent.APPROVAL_REQUESTED, "Action calls handed to the approvers"),
        (AuditEvent.APPROVED, "Action calls an approver accepted"),
        (AuditEvent.DENIED, "Action calls an approver refused"),
        (AuditEvent.EXPIRED, "Action calls nobody approved in time"),
    )
}
"""``bots_actions_<event>_total{platform,tier}``, one per trust decision (``core.trust.AuditEvent``)."""

_AUDIT_EVENTS = frozenset(e.value for e in AuditEvent)

LEASE_EVENTS = ("claimed", "renewed", "lost", "released")
"""The events of ``lease``: ``claimed`` and ``released``/``lost`` move ``bots_worker_leases_held``."""

KINDS = (
    "actions",
    "attachment",
    "attachment_bytes",
    "cached_input_tokens",
    "cost_micros",
    "input_tokens",
    "lease_claimed",
    "lease_lost",
    "lease_released",
    "lease_renewed",
    "feedback",
    "limited",
    "message_ignored",
    "message_received",
    "model_failed",
    "model_call_restarted",
    "model_call_restarted_tokens",
    "model_format_failed",
    "model_seconds",
    "model_skipped",
    "output",
    "output_tokens",
    "queue_depth",
    "rate_limited",
    "reply_seconds",
    "reply_uncertain",
    "run_seconds",
    "schedule_dropped",
    "schedule_failed",
    "schedule_fired",
    "schedule_late_seconds",
    "schedule_missed",
)
"""What ``observe`` counts. ``message_ignored:<reason>`` gives a reason; ``input_tokens:<model>``,
``output_tokens:<model>`` and ``cost_micros:<model>`` the model (totals by model, never by user), as do
``model_failed:<model>``, ``model_format_failed:<model>`` and ``model_skipped:<model>`` (a chain of models,
``LLM_FALLBACKS``);
``queue_depth`` takes the queue's name as ``context_id`` and the depth as value; ``rate_limited`` and
``reply_uncertain:<outcome>`` take a platform or context id; ``attachment:<kind>:<outcome>`` counts one
attachment, ``attachment_bytes`` the bytes downloaded; ``limited:<limit>`` counts an input a limit refused
(``core.limits.LimitKind``); ``actions:<event>:<tier>`` a trust decision on a call (``core.trust.audit``);
``schedule_<fired|failed|missed|dropped>`` one occurrence or schedule, ``schedule_late_seconds`` the lateness of
a firing (``core.schedules``, ``extensions.chat.reminders``)."""


def platform_of(context_id: str) -> str:
    """``discord`` of ``discord:channel:42``; a bare name stays as it is."""
    return context_id.partition(":")[0] or "unknown"


def message_received(platform: str) -> None:
    """A message reached the bot."""
    MESSAGES_RECEIVED.labels(platform=platform).inc()


def message_ignored(platform: str, reason: str) -> None:
    """A message was dropped before a run (``reason``: own, bot, policy, allowlist, duplicate, ...)."""
    MESSAGES_IGNORED.labels(platform=platform, reason=reason).inc()


def message_answered(platform: str) -> None:
    """A run delivered a reply (``RunTracker`` counts this for runs it sees)."""
    MESSAGES_ANSWERED.labels(platform=platform).inc()


def message_failed(platform: str) -> None:
    """A run failed (``RunTracker`` counts this for runs it sees)."""
    MESSAGES_FAILED.labels(platform=platform).inc()


def rate_limited(platform: str) -> None:
    """A platform answered 429."""
    PLATFORM_RATE_LIMITED.labels(platform=platform).inc()


def set_queue_depth(queue: str, depth: float) -> None:
    """Inputs waiting in ``queue`` now."""
    QUEUE_DEPTH.labels(queue=queue).set(depth)


def set_replication(*, in_sync: int, writes_wait: bool) -> None:
    """The Redis primary's replicas in sync, and whether writes wait for one (``core.fleet.replica_stall``)."""
    REDIS_REPLICAS_IN_SYNC.set(in_sync)
    REDIS_WRITES_WAIT.set(1 if writes_wait else 0)


def set_shards(platform: str, *, count: int, held: list[int]) -> None:
    """The shards of ``platform`` this gateway holds now (of ``count``); shards given back disappear."""
    GATEWAY_SHARDS.labels(platform=platform).set(count)
    shown = {labels[1] for labels in _shard_labels() if labels[0] == platform}
    for label in shown - {str(s) for s in held}:
        GATEWAY_SHARD_HELD.remove(platform, label)
    for shard in held:
        GATEWAY_SHARD_HELD.labels(platform=platform, shard=str(shard)).set(1)


def _shard_labels() -> list[tuple[str, str]]:
    return [
        (sample.labels["platform"], sample.labels["shard"])
        for metric in GATEWAY_SHARD_HELD.collect()
        for sample in metric.samples
    ]


def lease(event: str) -> None:
    """A worker's context lease was claimed, renewed, lost or released."""
    if event not in LEASE_EVENTS:
        raise ValueError(f"lease event {event!r}: use one of {', '.join(LEASE_EVENTS)}")
    WORKER_LEASES.labels(event=event).inc()
    if event == "claimed":
        WORKER_LEASES_HELD.inc()
    elif event in ("released", "lost"):
        WORKER_LEASES_HELD.dec()


def observe(kind: str, context_id: str, value: float = 1.0, *, model: str = "") -> None:
    """Count one observation of ``kind`` (see ``KINDS``); unknown kinds are logged at DEBUG and dropped."""
    base, _, detail = kind.partition(":")
    if base == "model_seconds":
        MODEL_SECONDS.labels(model=model or "model").observe(value, _exemplar())
    elif base == "run_seconds":
        RUN_SECONDS.labels(platform=platform_of(context_id)).observe(value, _exemplar())
    elif base == "reply_seconds":
        REPLY_SECONDS.labels(platform=platform_of(context_id)).observe(value, _exemplar())
    elif base == "attachment":
        kind_of, _, outcome = detail.partition(":")
        ATTACHMENTS.labels(kind=kind_of or "file", outcome=outcome or "not_read").inc(value)
    elif base == "attachment_bytes":
        ATTACHMENT_BYTES.inc(max(0.0, value))
    elif base in ("input_tokens", "output_tokens"):
        TOKENS.labels(direction=base.removesuffix("_tokens")).inc(max(0.0, value))
        if detail:
            MODEL_TOKENS.labels(model=detail, direction=base.removesuffix("_tokens")).inc(max(0.0, value))
    elif base == "cached_input_tokens":  # (of the input tokens: read from the provider's prompt cache)
        MODEL_TOKENS.labels(model=detail or "model", direction="cached_input").inc(max(0.0, value))
    elif base == "model_call_restarted":
        MODEL_RESTARTED.inc(value)
    elif base == "model_call_restarted_tokens":
        MODEL_RESTARTED_TOKENS.inc(max(0.0, value))
    elif base == "model_failed":
        MODEL_FAILED.labels(model=detail or "model").inc(value)
    elif base == "model_format_failed":
        MODEL_FORMAT_FAILED.labels(model=detail or "model").inc(value)
    elif base == "model_skipped":
        MODEL_SKIPPED.labels(model=detail or "model").inc(value)
    elif base == "cost_micros":
        MODEL_COST.labels(model=detail or "model").inc(max(0.0, value) / 1_000_000)
    elif base == "message_received":
        MESSAGES_RECEIVED.labels(platform=platform_of(context_id)).inc(value)
    elif base == "message_ignored":
        MESSAGES_IGNORED.labels(platform=platform_of(context_id), reason=detail or "filtered").inc(value)
    elif base == "limited":
        LIMITED.labels(platform=platform_of(context_id), limit=detail or "unknown").inc(value)
    elif base == "actions":
        event, _, tier = detail.partition(":")
        counter = ACTIONS.get(AuditEvent(event)) if event in _AUDIT_EVENTS else None
        if counter is not None:
            counter.labels(platform=platform_of(context_id), tier=tier or "member").inc(value)
    elif base == "schedule_late_seconds":
        SCHEDULES_LATE.labels(platform=platform_of(context_id)).observe(max(0.0, value))
    elif base.startswith("schedule_") and base.removeprefix("schedule_") in SCHEDULES:
        SCHEDULES[base.removeprefix("schedule_")].labels(platform=platform_of(context_id)).inc(value)
    elif base == "feedback":
        FEEDBACK.labels(platform=platform_of(context_id), score=detail or "up").inc(value)
    elif base == "rate_limited":
        PLATFORM_RATE_LIMITED.labels(platform=platform_of(context_id)).inc()
    elif base == "reply_uncertain":
        REPLIES_UNCERTAIN.labels(platform=platform_of(context_id), outcome=detail or "resend").inc(value)
    elif base == "queue_depth":
        QUEUE_DEPTH.labels(queue=context_id or "default").set(value)
    elif base.startswith("lease_") and base.removeprefix("lease_") in LEASE_EVENTS:
        lease(base.removeprefix("lease_"))
    elif base != "output":
        log.debug("unknown metric kind %r dropped", kind)


def _answered_by(route: ModelRoute | None) -> str:
    """The model of a chain that answered the call, named as a provider names itself (``openai:gpt-4o``)."""
    if route is None or not route.answered:
        return ""
    if not route.provider or route.answered.startswith(f"{route.provider}:"):
        return route.answered
    return f"{route.provider}:{route.answered}"


def _exemplar() -> dict[str, str] | None:
    """The trace an observation belongs to, as an exemplar (shown by the OpenMetrics format of /metrics);
    None while tracing is off."""
    ids = tracing.current_ids()
    return {"trace_id": ids[0], "span_id": ids[1]} if ids is not None else None


class RunTracker:
    """Counts each run once: answered (a reply went out), failed (it ended with an error) or ignored with
    reason ``no_reply`` (the model chose silence). One instance per agent: it is both an observer and an
    event listener."""

    def __init__(self, *, model: str = "") -> None:
        self.model = model
        """The model label of ``bots_model_seconds``."""
        self._replied: set[str] = set()
        self._failed: set[str] = set()

    def __call__(self, kind: str, context_id: str, value: float) -> None:
        """The observer: ``agent.add_observer(tracker)``."""
        if kind == "output":
            self._replied.add(context_id)
        elif kind == "run_seconds":
            replied = context_id in self._replied
            self._replied.discard(context_id)
            if context_id in self._failed:
                self._failed.discard(context_id)
                outcome = "failed"
            elif replied:
                message_answered(platform_of(context_id))
                outcome = "answered"
            else:
                message_ignored(platform_of(context_id), "no_reply")
                outcome = "no reply"
            runs_log.info(
                "%s run of %s: %s in %.2fs",
                platform_of(context_id),
                tracing.ident(context_id),
                outcome,
                value,
                extra={"duration_seconds": round(value, 3), "outcome": outcome},
            )
        model = self.model
        if kind == "model_seconds":  # reported in the task that called the model, right after its stream
            model = _answered_by(call_route.get()) or model
        observe(kind, context_id, value, model=model)

    def on_event(self, event: RunEvent) -> None:
        """The event listener: ``agent.add_event_listener(tracker.on_event)``."""
        if event.type is RunEventType.ERROR and event.context_id not in self._failed:
            self._failed.add(event.context_id)
            message_failed(platform_of(event.context_id))

    def install(self, agent: Setup) -> None:
        """Hook into ``agent``'s observers and event listeners."""
        self.model = self.model or agent.model.name or "model"
        agent.add_observer(self)
        agent.add_event_listener(self.on_event)
        for platform in {platform_of(t) for t in agent.contexts}:  # series at 0, so rate() works from the start
            for metric in (MESSAGES_RECEIVED, MESSAGES_ANSWERED, MESSAGES_FAILED, RUN_SECONDS, REPLY_SECONDS):
                metric.labels(platform=platform)
        MODEL_SECONDS.labels(model=self.model)
        for direction in ("input", "output"):
            TOKENS.labels(direction=direction)
