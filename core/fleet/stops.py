"""Stop across the fleet: a person presses Stop on whichever gateway received it, and the worker that holds the
conversation stops its run within a second.

A press (``FleetStops.press``, one script) does two things at once:

- it publishes the conversation's id on the channel ``<prefix>stops``. Every worker listens there
  (``FleetStops.listen``, next to its arq loop) and stops the run of that conversation if it runs one
  (``Agent.stop_answer``: the model call is cancelled, what was written is kept with a mark, no later action runs),
  or, when it has just taken the conversation's batch and not begun its run yet, begins it stopped;
- it records the stop with the conversation (``<prefix>{cid}:stop``, kept ``STOP_KEEP`` seconds): the batch taken
  and not acknowledged at that moment, and when the newest input then waiting was stored. A worker that takes a
  batch later reads the record with it (in the same script that hands the batch out) and begins the run stopped
  when the stop covers the whole batch (``covers``): the batch held at the press, run again after its worker died,
  or inputs that were waiting in the inbox when Stop was pressed. A batch with an input sent after the press is
  answered whole (the person wrote again: the new run sees the earlier messages too).

Who may press: the chat's admins (and the only person of a private conversation) stop whatever is there. Anyone
else (``by``) stops the batch held only when one of its inputs is theirs, and covers the inputs waiting only when
all of them are; when nothing of it is theirs the script changes nothing and the press raises ``NotAllowedError``
(a group member no longer stops someone else's answer, issue 49).

A run that begins stopped records its inputs and the stop (the model reads them next time) and answers nothing.
Pub/sub delivers only to workers connected at that moment: one reconnecting misses the message, and the run it
holds goes on (the record still stops what it takes next). The inputs' times are their gateways' clocks: a Stop
covers an input another gateway stored just after the press only if that gateway's clock is behind by more than the
time between the two (a few milliseconds with NTP).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import NotAllowedError
from .backend import RETRY_PAUSE_MAX, RedisBackend, describe

__all__ = ("STOP_KEEP", "FleetStops", "covers")

log = logging.getLogger("core.fleet")

STOP_KEEP = 3600.0
"""Seconds a conversation's Stop is kept for the worker that takes what it covers."""


def covers(record: str | None, batch_id: str, entries: Sequence[dict[str, Any]]) -> bool:
    """Whether the Stop ``record`` (``<batch held>|<time of the newest input waiting>``, or None) covers the batch
    ``batch_id`` made of ``entries``: it was the batch held at the press, or every one of its inputs was stored no
    later than the newest input waiting then."""
    if not record:
        return False
    held, _, waiting = record.partition("|")
    if held and held == batch_id:
        return True
    if not waiting or not entries:
        return False
    try:
        newest = float(waiting)
        return all(float(entry.get("t", 0.0)) <= newest for entry in entries)
    except (TypeError, ValueError):
        return False


class FleetStops:
    """Stops on the process's ``RedisBackend``: gateways press, workers listen."""

    def __init__(self, backend: RedisBackend) -> None:
        self.backend = backend
        """The connection."""
        self.subscribed = asyncio.Event()
        """Set while ``listen`` is subscribed to the channel."""

    async def press(self, cid: str, *, by: str | None = None) -> bool:
        """Stop the answer of ``cid`` on whichever worker holds it, and record it for the worker that takes what
        it covers (a new message that interrupts the answer, ``core.busy``, stops the batch held the same way, in
        the ingest itself). True when a batch was held or inputs waited; raises ``DispatchError`` when Redis
        cannot be reached (tried for ``REDIS_RETRY_SECONDS``). ``by``: who pressed it, when not the chat's admin:
        the batch held is stopped only when one of its inputs is theirs, the inputs waiting covered only when all
        of them are; else ``NotAllowedError`` and nothing is stopped."""
        b = self.backend
        ck = b.keys.context(cid)
        found = await b.call(
            b.stop_answer,
            [ck.batch, ck.inbox, ck.stop],
            [b.keys.stops, cid, int(STOP_KEEP * 1000), by or ""],
            what=f"stopping the answer in {cid}",
        )
        if int(found) < 0:
            raise NotAllowedError(
                f"the answer in {cid} is not for {by}: only its askers and the chat's admins may stop it"
            )
        return bool(found)

    async def listen(self, on_stop: Callable[[str], object], on_arrival: Callable[[str], object] | None = None) -> None:
        """Call ``on_stop(cid)`` for each Stop pressed anywhere in the fleet, and ``on_arrival(cid)`` for each input
        stored for a running conversation (``core.busy`` steer), until cancelled; a lost connection is logged and
        subscribed again (``subscribed`` is clear meanwhile)."""
        channel = self.backend.keys.stops
        arrivals = self.backend.keys.arrivals
        lost_at: float | None = None
        while True:
            try:
                pubsub = self.backend.client.pubsub(ignore_subscribe_messages=True)
                async with contextlib.aclosing(pubsub):
                    await pubsub.subscribe(*((channel, arrivals) if on_arrival is not None else (channel,)))
                    self.subscribed.set()
                    if lost_at is not None:
                        log.warning("the Stop channel is subscribed again after %.1fs", time.monotonic() - lost_at)
                        lost_at = None
                    while True:  # (short reads: a quiet channel is no error)
                        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                        if message is None or message.get("type") != "message":
                            continue
                        handler = on_arrival if message.get("channel") == arrivals else on_stop
                        try:
                            if handler is not None:
                                handler(str(message["data"]))
                        except Exception:
                            log.exception("a Stop or an arrival for %s failed", message["data"])
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # once per outage: subscribing again every half second would log twice a second while Redis is down
                if lost_at is None:
                    lost_at = time.monotonic()
                    log.warning("the Stop channel lost Redis (%s); subscribing again until it answers", describe(exc))
                else:
                    log.debug("the Stop channel still cannot subscribe (%s)", describe(exc))
                await asyncio.sleep(RETRY_PAUSE_MAX)
            finally:
                self.subscribed.clear()
