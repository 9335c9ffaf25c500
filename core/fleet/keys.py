"""Key names. A context's keys share the hash tag ``{<context id>}`` so they live in one slot.

Per context ``cid`` (prefix ``bots:``)::

    bots:{cid}:inbox        list     inputs waiting, oldest first (JSON entries)
    bots:{cid}:batch        hash     the batch taken and not yet acknowledged: id, attempt, entries
    bots:{cid}:lease        string   "<fencing token>|<drain job id>", expires unless renewed
    bots:{cid}:meta         hash     fence (token counter), seq (batch counter), sched (job responsible),
                                     d:<key> (a dedupe key seen lately: when, in ms; the newest 32 or so),
                                     f:<source> (the highest number of an ordered source dropped from them),
                                     qfirst, qlast, qms (the quiet window of the burst waiting: its first and
                                     newest input, in ms, and the window), busy and quiet (the conversation's
                                     own /busy and /quiet, when it chose them: ``RedisDispatcher.set_controls``)
    bots:{cid}:ledger:<n>   hash     model answers and replies of batch n (idempotent replies), until its ack
    bots:{cid}:mem:<kind>   string   memory store values (``context``, ``shape``, ``working``, ``statelog``)
    bots:{cid}:stop         string   the last Stop pressed: "<batch held>|<t of the newest input waiting>", kept
                                     an hour (``core.fleet.stops``)

Shared by all contexts: ``bots:queue`` (arq's job queue, a sorted set idle workers block on with BZMPOP),
``bots:active`` (sorted set of contexts with work, scored by when the sweeper should look at them), ``bots:dead``
(batches that failed too often), ``bots:visitors`` and ``bots:newcomers:<address>`` (the web chat's visitors: when
each was last seen, and the new ones each address started lately). A drain job is only its id in the queue (arq's
job keys, ``arq:job:<id>``, are not written: the worker runs the job from its id). ``bots:stops`` is a pub/sub
channel: a gateway publishes there the id of a conversation whose Stop was pressed, every worker listens.
``bots:backlog`` (a hash: the inputs waiting, as the worker holding ``bots:backlog:measurer`` last counted them,
for every worker's ``bots_queue_depth``; ``core.fleet.backlog``). ``bots:fleet:data`` (a hash: the marker of the
fleet's data, whose replacement says Redis lost them; ``core.fleet.data_marker``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ("ContextKeys", "Keys")

ARQ_JOB_PREFIX = "arq:job:"
ARQ_RETRY_PREFIX = "arq:retry:"


@dataclass(frozen=True, slots=True)
class ContextKeys:
    """The keys of one context."""

    cid: str
    """The context id (``<type>:<key>``)."""
    base: str
    """``<prefix>{<cid>}:``."""

    @property
    def inbox(self) -> str:
        return self.base + "inbox"

    @property
    def batch(self) -> str:
        return self.base + "batch"

    @property
    def lease(self) -> str:
        return self.base + "lease"

    @property
    def meta(self) -> str:
        return self.base + "meta"

    def dedupe(self, key: str) -> str:
        return self.base + "dd:" + key

    def ledger(self, batch_id: str) -> str:
        return self.base + "ledger:" + batch_id

    def memory(self, kind: str) -> str:
        return self.base + "mem:" + kind

    @property
    def stop(self) -> str:
        """The last Stop pressed in the conversation and what it covers (``core.fleet.stops``)."""
        return self.base + "stop"


@dataclass(frozen=True, slots=True)
class Keys:
    """Key names under one prefix."""

    prefix: str = "bots:"
    """Prefix of every key."""

    def context(self, cid: str) -> ContextKeys:
        """The keys of context ``cid``."""
        return ContextKeys(cid, f"{self.prefix}{{{cid}}}:")

    @property
    def queue(self) -> str:
        """arq's queue (a sorted set of job ids)."""
        return self.prefix + "queue"

    @property
    def active(self) -> str:
        return self.prefix + "active"

    @property
    def dead(self) -> str:
        return self.prefix + "dead"

    @property
    def stops(self) -> str:
        """The pub/sub channel of Stops: a gateway publishes a conversation's id, the workers stop its run."""
        return self.prefix + "stops"

    @property
    def arrivals(self) -> str:
        """The pub/sub channel of inputs stored for a conversation that is running: the worker running it gives them
        to its run (``core.busy`` steer)."""
        return self.prefix + "arrivals"

    @property
    def visitors(self) -> str:
        """The web chat's visitors (a sorted set: each visitor id scored by when it was last seen, in ms), so the
        ones idle ``WEB_VISITOR_IDLE_DAYS`` are forgotten (``RedisVisitorBook``)."""
        return self.prefix + "visitors"

    def newcomers(self, address: str) -> str:
        """The new web visitors ``address`` started lately (a sorted set scored by when, in ms, kept an hour), counted
        by every gateway against ``WEB_NEW_VISITORS_PER_HOUR``."""
        return f"{self.prefix}newcomers:{address}"

    def webhook_seen(self, key: str) -> str:
        """A webhook delivery taken (``<source>:s:<digest of its signature>`` or ``<source>:i:<digest of its id>``),
        kept ``WEBHOOKS_DEDUPE_SECONDS`` so a replay is refused (``core.webhooks.redis_store``)."""
        return f"{self.prefix}webhook:seen:{key}"

    def webhook_rate(self, source: str, window: int) -> str:
        """The signed requests of a webhook source in one minute (a counter kept two minutes: the next minute
        counts part of it)."""
        return f"{self.prefix}webhook:rate:{source}:{window}"

    def task_answer(self, task_id: str) -> str:
        """The answer to a task another bot handed this one (a list of one JSON entry, kept ten minutes for the
        asking worker's ``BLPOP``: ``core.teamwork.fleet``)."""
        return f"{self.prefix}task:{task_id}:answer"

    def lock(self, name: str) -> str:
        """A named single-holder lease (one Telegram poller per token)."""
        return self.prefix + "lock:" + name

    def shards(self, name: str) -> str:
        """The key prefix of one bot's shard leases (``<prefix>shards:<name>:``): ``...lease:<n>``, the
        ``...fences`` hash (fencing token per shard), ``...members`` (live gateways) and ``...identify:<bucket>``."""
        return f"{self.prefix}shards:{name}:"

    def job_id(self, cid: str, unique: str) -> str:
        """A drain job id: unique per scheduling, so arq never confuses two of them."""
        return f"{self.prefix}drain:{cid}:{unique}"

    def cid_of_job(self, job_id: str) -> str:
        """The context a drain job id (``job_id``) drains."""
        start = len(self.prefix) + len("drain:")
        return job_id[start : job_id.rindex(":")]

    @staticmethod
    def arq_job(job_id: str) -> str:
        return ARQ_JOB_PREFIX + job_id

    @staticmethod
    def arq_retry(job_id: str) -> str:
        return ARQ_RETRY_PREFIX + job_id

    def memory(self, key: str) -> str:
        """The Redis key of memory-store key ``key``: ``<kind>:<cid>`` (``context:``, ``working:``,
        ``statelog:``) goes into the context's slot; a key without ``:`` lives under ``<prefix>mem:``."""
        kind, sep, cid = key.partition(":")
        if sep and cid and kind:
            return self.context(cid).memory(kind)
        return self.prefix + "mem:" + key
