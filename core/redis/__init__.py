"""The Redis + arq dispatcher: per-context inboxes, one run per context across any number of
workers, leases with fencing tokens, crash redelivery, idempotent replies, and a Redis memory store.

Needs the ``redis`` extra (``arq``, ``redis``); nothing outside this package imports them.
"""

from .backend import RedisBackend
from .config import QueueConfig, redact_url
from .dispatcher import RedisDispatcher
from .drain import Drainer, DrainStats
from .ledger import REPLY_LEDGER, LeaseLostError, RedisReplyLedger, ReplayModel, ReplyLedger, ReplySlot
from .limits import RedisLimitStore
from .lock import PlatformLock
from .memory import RedisMemoryStore
from .shards import IdentifySlots, ShardLeases
from .summary_lock import RedisSummaryLock
from .usage import RedisUsage
from .worker import QueueWorker

__all__ = (
    "REPLY_LEDGER",
    "DrainStats",
    "Drainer",
    "IdentifySlots",
    "LeaseLostError",
    "PlatformLock",
    "QueueConfig",
    "QueueWorker",
    "RedisBackend",
    "RedisDispatcher",
    "RedisLimitStore",
    "RedisMemoryStore",
    "RedisReplyLedger",
    "RedisSummaryLock",
    "RedisUsage",
    "ReplayModel",
    "ReplyLedger",
    "ReplySlot",
    "ShardLeases",
    "redact_url",
)
