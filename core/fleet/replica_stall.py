"""Writes waiting for a replica, explained: with ``REDIS_MIN_REPLICAS`` above 0, every acknowledgement that leaves the
system (a Telegram update confirmed, a webhook's 200, a reply posted, a batch acknowledged) waits until that many
replicas in step with the primary have the write it relies on (``RedisBackend.call(..., confirm=True)``). With one
replica and a primary gone for good, the sentinels promote the replica, which then has none: the fleet answers
nothing until a replica is back. That is by design (answering would risk losing what a later failover drops); this
module says so, with what to do, for ``bots doctor``, readiness and the metric the alert rules read."""

from __future__ import annotations

from typing import Any

from .backend import replicas_in_step

__all__ = ("NONE_IN_SYNC", "replica_stall")

NONE_IN_SYNC = "writes wait for a replica: none is in sync"
"""How the stall is named wherever it is reported (the alert rule's summary starts with it too)."""

_WHAT_TO_DO = (
    "bring the old primary back (its restart makes it a replica of the promoted one within seconds), or start a "
    "new replica of the primary (redis-server --replicaof <primary host> <port>; with Kubernetes, scale the Redis "
    "StatefulSet back up), or, to answer without one meanwhile, set REDIS_MIN_REPLICAS=0 (a later failover may then "
    "lose the last writes)"
)


def replica_stall(info: Any, *, min_replicas: int, primary: str = "") -> str | None:
    """What is wrong, and what to do, when the primary's ``INFO replication`` (``info``) shows fewer replicas in step
    than ``min_replicas`` (``REDIS_MIN_REPLICAS``); None when writes need not wait (or no replica is asked for)."""
    if min_replicas <= 0:
        return None
    in_sync = replicas_in_step(info)
    if in_sync >= min_replicas:
        return None
    connected = int(info.get("connected_slaves", 0)) if isinstance(info, dict) else 0
    where = f"the primary {primary}" if primary else "the primary"
    if in_sync == 0:
        head = NONE_IN_SYNC
    else:
        head = f"writes wait for a replica: {in_sync} in sync, REDIS_MIN_REPLICAS={min_replicas}"
    return (
        f"{head} ({where} has {connected} replicas connected, {in_sync} in step; REDIS_MIN_REPLICAS={min_replicas}): "
        f"every acknowledgement is held and nothing is answered; {_WHAT_TO_DO}"
    )
