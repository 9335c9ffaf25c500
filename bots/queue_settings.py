"""``REDIS_*``: the Redis queue that connects ``bots gateway`` to any number of ``bots worker`` processes.

Redis must keep what it acknowledged: run it with ``appendonly yes`` (``appendfsync everysec``, or
``always`` to survive a power cut without losing the last second) and ``maxmemory-policy noeviction``
(an evicted inbox or lease would lose messages). Importing this needs neither redis nor arq.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, SecretStr

if TYPE_CHECKING:
    from core.fleet import QueueConfig

__all__ = ("RedisSettings",)


class RedisSettings(BaseModel):
    """``REDIS_*`` environment variables."""

    url: str = Field(
        default="redis://127.0.0.1:6379/0",
        description="Redis for the queue and memory of gateway and workers (redis:// or rediss://)",
    )
    password: SecretStr | None = Field(default=None, description="Redis password, if not in REDIS_URL (secret)")
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
        default=86_400.0, gt=0, description="Seconds a platform message id is remembered to drop redeliveries"
    )
    handoff_batches: int = Field(
        default=8, ge=1, description="Batches in a row before a busy conversation goes back to the queue"
    )
    batch_size: int = Field(default=50, ge=1, le=1000, description="Messages answered by one run at most")
    max_attempts: int = Field(
        default=3, ge=1, le=100, description="Deliveries of a batch before it moves to the dead-letter list"
    )
    stop_timeout: float = Field(
        default=20.0,
        ge=0,
        description="On SIGTERM, seconds a worker lets running runs finish before handing them back",
    )
    op_timeout: float = Field(default=5.0, gt=0, description="Seconds one Redis command may take")
    retry_seconds: float = Field(
        default=10.0, ge=0, description="Seconds a Redis call is retried while Redis restarts, before failing"
    )

    def to_config(self) -> QueueConfig:
        """The queue layer's configuration (imports ``core.fleet``: needs the redis extra)."""
        from core.fleet import QueueConfig

        return QueueConfig(
            url=self.url,
            password=self.password.get_secret_value() if self.password is not None else None,
            prefix=self.prefix,
            inbox_cap=self.inbox_cap,
            inbox_full=self.inbox_full,
            inbox_wait=self.inbox_wait,
            lease_seconds=self.lease_seconds,
            concurrency=self.worker_concurrency,
            poll_delay=self.poll_delay,
            dedupe_ttl=self.dedupe_ttl,
            handoff_batches=self.handoff_batches,
            batch_size=self.batch_size,
            max_attempts=self.max_attempts,
            stop_timeout=self.stop_timeout,
            op_timeout=self.op_timeout,
            retry_seconds=self.retry_seconds,
        )
