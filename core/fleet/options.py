"""What the Redis dispatcher needs to know, independent of how ``bots`` reads its settings."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from ..url_secrets import mask_query

__all__ = ("QueueConfig", "redact_url")


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` and its query values masked (redis-py reads ``?password=``
    too), for logs and error messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable REDIS_URL>"
    if parts.password is None:
        return mask_query(url)
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return mask_query(urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, parts.fragment)))


BUSY_POLICIES = ("steer", "collect", "queue", "interrupt")
"""The values of ``QueueConfig.busy`` (``core.busy.BusyPolicy``)."""


@dataclass(frozen=True, kw_only=True)
class QueueConfig:
    """Settings of the Redis queue layer (``bots`` fills it from the ``REDIS_*`` variables)."""

    url: str = "redis://127.0.0.1:6379/0"
    """Where Redis is (``REDIS_URL``)."""
    password: str | None = None
    """Password, when it is not part of the URL (``REDIS_PASSWORD``)."""
    prefix: str = "bots:"
    """Prefix of every key, so several bots can share one Redis (``REDIS_PREFIX``)."""
    inbox_cap: int = 1000
    """Inputs waiting per context at most; more are refused with ``BackpressureError``."""
    lease_seconds: float = 30.0
    """How long a worker holds a context without renewing; a crashed worker's contexts are
    taken over this long after its last renewal."""
    concurrency: int = 16
    """Contexts one worker process runs at the same time."""
    poll_delay: float = 2.0
    """Seconds an idle worker waits for a wake-up before looking at the queue anyway."""
    dedupe_ttl: float = 60.0
    """Seconds a platform message id is remembered at least, however many come after it (besides the newest 32 of
    its conversation, and for ``ordered_dedupe`` keys the high-water mark of the conversation, kept for good)."""
    ordered_dedupe: tuple[str, ...] = ("schedule:",)
    """Dedupe key prefixes whose trailing number grows per conversation (``core.fleet.dedupe_fields``): a schedule's
    occurrence here; ``bots`` adds each platform's that declares it (a Telegram update id, a Discord snowflake)."""
    handoff_batches: int = 8
    """Batches one drain job runs before it hands a still-busy context back to the queue."""
    batch_size: int = 50
    """Inputs taken into one run at most."""
    quiet_ms: int = 0
    """A conversation's batch is taken once no input came for this long (``core.busy``: a burst is one turn; the
    window is kept in Redis, so any worker may take it; 0: at once; ``BOT_QUIET_MS``), unless the conversation chose
    its own (``/quiet``, kept with its inbox: ``RedisDispatcher.set_controls``) or the operator pinned one."""
    busy: str = "collect"
    """What an input stored while its conversation's batch runs does (``core.busy.BusyPolicy``; ``BOT_BUSY``, whose
    default, ``steer``, ``bots`` gives gateways and workers; ``collect``, the default here, is what a queue did before
    there was a choice: it waits for the next batch), unless the conversation chose its own (``/busy``) or the
    operator pinned one."""
    max_attempts: int = 3
    """Deliveries of one batch at most; a batch that keeps failing goes to the dead-letter list."""
    stop_timeout: float = 20.0
    """Seconds a stopping worker lets running runs finish before it hands them back."""
    connect_timeout: float = 3.0
    """Seconds to wait for a connection to Redis."""
    op_timeout: float = 5.0
    """Seconds one Redis command may take."""
    retry_seconds: float = 10.0
    """How long a failed Redis call (Redis restarting) is retried before the error is raised."""
    inbox_full: str = "wait"
    """What a listener does with a message for a full inbox (``REDIS_INBOX_FULL``): ``wait`` keeps it and
    tries again for up to ``inbox_wait`` seconds, then drops it; ``drop`` drops it at once. Either way the
    conversation is told once that the bot is busy, and the other conversations go on."""
    inbox_wait: float = 30.0
    """Seconds a message for a full inbox is kept before it is dropped, with ``inbox_full="wait"``."""
    sentinels: tuple[tuple[str, int], ...] = ()
    """Redis Sentinels to ask where the primary is (``REDIS_SENTINELS``); empty: ``url`` is the server.
    With sentinels, ``url`` gives only the scheme (``rediss://``: TLS), the database and the credentials."""
    sentinel_master: str = "mymaster"
    """The name the sentinels monitor the primary under (``REDIS_SENTINEL_MASTER``)."""
    sentinel_password: str | None = None
    """The sentinels' own password (``REDIS_SENTINEL_PASSWORD``), if they have one."""
    min_replicas: int = 0
    """Replicas a write must reach before an acknowledgement that relies on it leaves the system (a
    Telegram update confirmed, a webhook's 200, a batch acknowledged, a post recorded): ``WAIT`` after it.
    0: no wait (a failover may lose the last writes the old primary acknowledged)."""
    replica_timeout: float = 1.0
    """Seconds one ``WAIT`` gives the replicas; when fewer answer, the write counts as failed (retried like
    a write while Redis is down, and the acknowledgement held meanwhile)."""

    def __post_init__(self) -> None:
        checks = (
            (self.inbox_cap >= 1, "REDIS_INBOX_CAP must be at least 1"),
            (self.lease_seconds >= 0.2, "REDIS_LEASE_SECONDS must be at least 0.2"),
            (self.concurrency >= 1, "REDIS_WORKER_CONCURRENCY must be at least 1"),
            (self.poll_delay > 0, "REDIS_POLL_DELAY must be positive"),
            (self.dedupe_ttl > 0, "REDIS_DEDUPE_TTL must be positive"),
            (self.handoff_batches >= 1, "REDIS_HANDOFF_BATCHES must be at least 1"),
            (self.batch_size >= 1, "REDIS_BATCH_SIZE must be at least 1"),
            (self.quiet_ms >= 0, "BOT_QUIET_MS must not be negative"),
            (self.busy in BUSY_POLICIES, "BOT_BUSY must be steer, collect, queue or interrupt"),
            (self.max_attempts >= 1, "REDIS_MAX_ATTEMPTS must be at least 1"),
            (self.stop_timeout >= 0, "REDIS_STOP_TIMEOUT must not be negative"),
            (self.inbox_full in ("wait", "drop"), "REDIS_INBOX_FULL must be wait or drop"),
            (self.inbox_wait >= 0, "REDIS_INBOX_WAIT must not be negative"),
            (self.min_replicas >= 0, "REDIS_MIN_REPLICAS must not be negative"),
            (self.replica_timeout > 0, "REDIS_REPLICA_TIMEOUT must be positive"),
            (bool(self.sentinel_master.strip()), "REDIS_SENTINEL_MASTER must not be empty"),
        )
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    @property
    def full_wait(self) -> float:
        """Seconds a message for a full inbox may be kept (0: drop it at once)."""
        return self.inbox_wait if self.inbox_full == "wait" else 0.0

    @property
    def lease_ms(self) -> int:
        """The lease length in milliseconds."""
        return int(self.lease_seconds * 1000)

    @property
    def claim_check_ms(self) -> int:
        """How often the sweeper looks at a context whose drain job is waiting in the queue. A job a
        worker popped and died before claiming is rescheduled after this long: the lease length, as for
        a worker that died holding the lease (at least 3 s, so a busy queue is not checked constantly)."""
        return max(self.lease_ms, 3000)

    @property
    def renew_interval(self) -> float:
        """Seconds between lease renewals of a running context."""
        return self.lease_seconds / 3

    @property
    def sweep_interval(self) -> float:
        """Seconds between two sweeps of one worker."""
        return min(1.0, max(0.05, self.lease_seconds / 4))

    @property
    def shown_url(self) -> str:
        """Where Redis is, for logs and errors: the URL with any password masked, or the sentinels and the
        primary's name."""
        if self.sentinels:
            where = ",".join(f"{host}:{port}" for host, port in self.sentinels)
            return f"sentinels {where} (primary {self.sentinel_master!r})"
        return redact_url(self.url)

    @property
    def settings_hint(self) -> str:
        """The variables to check when Redis does not answer."""
        if self.sentinels:
            return "REDIS_SENTINELS, REDIS_SENTINEL_MASTER (and REDIS_SENTINEL_PASSWORD, REDIS_PASSWORD)"
        return "REDIS_URL (and REDIS_PASSWORD)"
