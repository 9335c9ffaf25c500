"""The Redis + arq dispatcher: per-context inboxes, one run per context across any number of
workers, leases with fencing tokens, crash redelivery, idempotent replies, and a Redis memory store.

Needs the ``redis`` extra (``arq``, ``redis``); nothing outside this package imports them.
"""

from .answer_book import RedisAnswerBook, RedisEphemeral
from .approval_store import RedisApprovalStore
from .arq_worker import QueueWorker
from .backend import RedisBackend
from .backlog import Backlog, measure_backlog
from .dispatcher import RedisDispatcher
from .drain import Drainer, DrainStats
from .entry_format import ENTRY_FORMAT
from .fact_store import RedisFactStore
from .limit_store import RedisLimitStore
from .lock import PlatformLock
from .memory_store import RedisMemoryStore
from .options import QueueConfig, redact_url
from .reply_ledger import LeaseLostError, RedisReplyLedger, ReplayModel, ReplyLedger, ReplySlot
from .schedule_store import RedisScheduleStore, ServerClock
from .shard_leases import IdentifySlots, ShardLeases
from .stops import FleetStops
from .summary_lock import RedisSummaryLock
from .usage_store import RedisUsage
from .visitor_book import RedisVisitorBook

__all__ = (
    "ENTRY_FORMAT",
    "Backlog",
    "DrainStats",
    "Drainer",
    "FleetStops",
    "IdentifySlots",
    "LeaseLostError",
    "PlatformLock",
    "QueueConfig",
    "QueueWorker",
    "RedisAnswerBook",
    "RedisApprovalStore",
    "RedisBackend",
    "RedisDispatcher",
    "RedisEphemeral",
    "RedisFactStore",
    "RedisLimitStore",
    "RedisMemoryStore",
    "RedisReplyLedger",
    "RedisScheduleStore",
    "RedisSummaryLock",
    "RedisUsage",
    "RedisVisitorBook",
    "ReplayModel",
    "ReplyLedger",
    "ReplySlot",
    "ServerClock",
    "ShardLeases",
    "measure_backlog",
    "redact_url",
)
