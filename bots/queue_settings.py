"""``REDIS_*``: the Redis queue that connects ``bots gateway`` to any number of ``bots worker`` processes.

Redis must keep what it acknowledged: run it with ``appendonly yes`` (``appendfsync everysec``, or
``always`` to survive a power cut without losing the last second) and ``maxmemory-policy noeviction``
(an evicted inbox or lease would lose messages). Importing this needs neither redis nor arq.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator

if TYPE_CHECKING:
    from core.fleet import QueueConfig

__all__ = ("RedisSettings", "parse_sentinels")


def parse_sentinels(text: str) -> tuple[tuple[str, int], ...]:
    """``host:port,host:port`` (``REDIS_SENTINELS``; the port defaults to 26379, an IPv6 host goes in
    brackets) as ``((host, port), ...)``; raises ``ValueError`` naming the variable (an entry that looks like a URL
    or holds credentials is not repeated: it may hold a password)."""
    found: list[tuple[str, int]] = []
    for item in text.replace(";", ",").split(","):
        item = item.strip()
        if not item:
            continue
        if "@" in item or "/" in item:
            raise ValueError(
                "REDIS_SENTINELS: an entry is a URL or holds credentials; write host:port only, for example "
                "sentinel-1:26379 (their password goes in REDIS_SENTINEL_PASSWORD)"
            )
        host, port = item, "26379"
        if item.startswith("["):  # [::1]:26379
            host, closed, rest = item[1:].partition("]")
            if not closed or (rest and not rest.startswith(":")):
                host = ""
            port = rest.removeprefix(":") or port
        elif ":" in item:  # a second ":" stays in the port, which is then not a number
            host, _, port = item.partition(":")
        if (
            not host
            or any(c.isspace() for c in host)
            or not (port.isascii() and port.isdigit() and 0 < int(port) < 65536)
        ):
            raise ValueError(
                f"REDIS_SENTINELS: {item!r} is not host:port; write for example sentinel-1:26379 (an IPv6 address "
                "in brackets: [::1]:26379)"
            )
        found.append((host, int(port)))
    return tuple(found)


class RedisSettings(BaseModel):
    """``REDIS_*`` environment variables."""

    url: str = Field(
        default="redis://127.0.0.1:6379/0",
        description="Redis for the queue and memory of gateway and workers (redis:// or rediss://)",
    )
    password: SecretStr | None = Field(default=None, description="Redis password, if not in REDIS_URL (secret)")
    sentinels: str = Field(
        default="",
        description="Redis Sentinels as host:port,host:port: every process asks them where the primary is and "
        "follows a failover (REDIS_URL then gives only the scheme, the database and the credentials); empty: "
        "REDIS_URL is the server",
    )
    sentinel_master: str = Field(
        default="mymaster", min_length=1, description="The name the sentinels monitor the primary under"
    )
    sentinel_password: SecretStr | None = Field(
        default=None, description="The sentinels' own password, if they have one (secret)"
    )
    min_replicas: int = Field(
        default=0,
        ge=0,
        le=16,
        description="Replicas a write must reach (WAIT) before an acknowledgement relying on it leaves: a Telegram "
        "update confirmed, a webhook's 200, a batch acknowledged, a post recorded; 0: no wait (a failover may "
        "lose the last second)",
    )
    replica_timeout: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="Seconds a write waits for REDIS_MIN_REPLICAS replicas; fewer: the acknowledgement is held and "
        "the write tried again, as while Redis is down",
    )
    prefix: str = Field(default="bots:", min_length=1, description="Prefix of every key (several bots, one Redis)")
    inbox_cap: int = Field(
        default=1000, ge=1, description="Inputs waiting per conversation at most; more are refused until it drains"
    )
    inbox_full: Literal["wait", "drop"] = Field(
        default="wait",
        description="A message for a full inbox: wait (kept and tried again for REDIS_INBOX_WAIT seconds, then "
        "dropped) or drop (at once); the chat is told once that the bot is busy, other chats go on (Discord, "
        "Telegram long polling)",
    )
    inbox_wait: float = Field(
        default=30.0, ge=0, le=3600, description="Seconds a message for a full inbox is kept with REDIS_INBOX_FULL=wait"
    )
    lease_seconds: float = Field(
        default=30.0,
        ge=0.2,
        le=3600,
        description="A crashed worker's conversations are taken over this long after its last renewal",
    )
    worker_concurrency: int = Field(default=16, ge=1, le=10_000, description="Conversations one worker runs at once")
    poll_delay: float = Field(
        default=2.0,
        gt=0,
        le=60,
        description="Seconds an idle worker waits for a wake-up before checking the queue anyway",
    )
    dedupe_ttl: float = Field(
        default=60.0,
        gt=0,
        le=2_592_000,  # 30 days
        description="Seconds a platform message id is remembered at least to drop redeliveries (besides the newest "
        "32 of its conversation; Telegram and Discord ids also by the conversation's highest id, kept for good)",
    )
    handoff_batches: int = Field(
        default=8, ge=1, description="Batches in a row before a busy conversation goes back to the queue"
    )
    batch_size: int = Field(
        default=50,
        ge=1,
        le=1000,
        description="Messages answered by one run at most, in one process and in a fleet (the rest of a burst waits "
        "for the next run)",
    )
    max_attempts: int = Field(
        default=3, ge=1, le=100, description="Deliveries of a batch before it moves to the dead-letter list"
    )
    stop_timeout: float = Field(
        default=20.0,
        ge=0,
        le=3600,
        description="On SIGTERM, seconds a worker lets running runs finish before handing them back",
    )
    op_timeout: float = Field(default=5.0, gt=0, le=600, description="Seconds one Redis command may take")
    retry_seconds: float = Field(
        default=10.0, ge=0, le=3600, description="Seconds a Redis call is retried while Redis restarts, before failing"
    )

    @field_validator("sentinels")
    @classmethod
    def _sentinels(cls, value: str) -> str:
        # a ValueError naming REDIS_SENTINELS; only separators (",") name no sentinel: unset
        return value.strip() if parse_sentinels(value) else ""

    def to_config(self) -> QueueConfig:
        """The queue layer's configuration (imports ``core.fleet``: needs the redis extra)."""
        from core.fleet import QueueConfig
        from extensions.platforms import ordered_dedupe

        return QueueConfig(
            url=self.url,
            password=self.password.get_secret_value() if self.password is not None else None,
            sentinels=parse_sentinels(self.sentinels),
            sentinel_master=self.sentinel_master,
            sentinel_password=(
                self.sentinel_password.get_secret_value() if self.sentinel_password is not None else None
            ),
            min_replicas=self.min_replicas,
            replica_timeout=self.replica_timeout,
            prefix=self.prefix,
            inbox_cap=self.inbox_cap,
            inbox_full=self.inbox_full,
            inbox_wait=self.inbox_wait,
            lease_seconds=self.lease_seconds,
            concurrency=self.worker_concurrency,
            poll_delay=self.poll_delay,
            dedupe_ttl=self.dedupe_ttl,
            ordered_dedupe=(*QueueConfig().ordered_dedupe, *ordered_dedupe()),  # (what each platform declares)
            handoff_batches=self.handoff_batches,
            batch_size=self.batch_size,
            max_attempts=self.max_attempts,
            stop_timeout=self.stop_timeout,
            op_timeout=self.op_timeout,
            retry_seconds=self.retry_seconds,
        )
