"""Where events come from: matrix-nio's ``/sync`` long poll, one after another, each from the token the last one
ended at.

The token moves past a sync's events only once each was decided on (stored in its inbox, in front of a queue), and
is then kept in the bot account's own data on the homeserver (account data ``SYNC_TOKEN_TYPE``), so the gateway
that takes over, on any machine, or the same bot after a restart, goes on from there: an event is synced again
rather than lost (and a message synced twice is answered once: the dedupe of its event id). The very first start
reads no history: the rooms' state only (``timeline.limit`` 0), so a new bot does not answer yesterday's messages.

An invite to a room is accepted (in ``MATRIX_ALLOWED_ROOMS`` when the operator lists rooms).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from nio import AsyncClient, Event, JoinError, MatrixRoom, SyncError, SyncResponse
from nio.api import Api

__all__ = ("SYNC_TOKEN_TYPE", "Sync")

log = logging.getLogger("extensions.matrix")

SYNC_TOKEN_TYPE = "io.daydreams.bots.sync"
"""The account data type the bot keeps its sync token in: ``{"next_batch": "..."}``."""
FIRST_FILTER = {"room": {"timeline": {"limit": 0}}}
"""The first sync's filter: the rooms and their state, no messages."""
RETRY_FIRST = 0.5
RETRY_MAX = 10.0
_REFUSED = frozenset({"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"})


class Sync:
    """The sync loop of one account (``start``, ``stop``)."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        timeout: int,
        on_event: Callable[[MatrixRoom, Event], Awaitable[None]],
        on_room: Callable[[MatrixRoom], Awaitable[None]],
        allowed_rooms: Collection[str],
        on_refused_token: Callable[[str], None],
    ) -> None:
        self.client = client
        self.timeout_ms = timeout * 1000
        self.on_event = on_event
        self.on_room = on_room
        self.allowed_rooms = frozenset(allowed_rooms)
        self.on_refused_token = on_refused_token
        self.since: str | None = None
        """The token the next sync starts from."""
        self.receiving = False
        """The first sync succeeded and the loop runs."""
        self._task: asyncio.Task[None] | None = None
        self._deciding = False
        self._stopping = False
        self._decided = asyncio.Event()

    # -- the token -------------------------------------------------------------------------------------

    def _account_data_path(self) -> str:
        path: str = Api._build_path(["user", self.client.user_id, "account_data", SYNC_TOKEN_TYPE])
        return path

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.client.access_token}", "Content-Type": "application/json"}

    async def load(self) -> str | None:
        """The token kept in the account data (None: the first start, or the homeserver could not say)."""
        response = await self.client.send("GET", self._account_data_path(), headers=self._headers())
        async with response:
            if response.status == 404:
                return None
            if response.status != 200:
                log.warning("matrix: could not read the sync token (HTTP %d): starting from now", response.status)
                return None
            body: Any = await response.json(content_type=None)
        token = body.get("next_batch") if isinstance(body, dict) else None
        return token if isinstance(token, str) and token else None

    async def save(self, token: str) -> None:
        """Keep ``token`` in the account data (a failure is logged: a restart then syncs some events again)."""
        data = json.dumps({"next_batch": token})
        try:
            response = await self.client.send("PUT", self._account_data_path(), data, headers=self._headers())
            async with response:
                if response.status != 200:
                    log.warning("matrix: could not keep the sync token (HTTP %d)", response.status)
        except (OSError, TimeoutError) as exc:
            log.warning("matrix: could not keep the sync token: %s", exc)

    # -- the loop --------------------------------------------------------------------------------------

    async def start(self) -> None:
        """The first sync (from the kept token, or the rooms' state only), then the loop in a task of its own."""
        self._stopping = False
        self.since = await self.load()
        if self.since is None:
            first = await self.client.sync(timeout=0, sync_filter=FIRST_FILTER)
            if not isinstance(first, SyncResponse):
                raise _sync_error(first)
            await self._rooms(first, events=False)
            self.since = first.next_batch
            await self.save(first.next_batch)
            log.info("matrix: first sync: %d room(s), history left unread", len(first.rooms.join))
        self.receiving = True
        self._task = asyncio.create_task(self._loop(), name="matrix-sync")

    async def _loop(self) -> None:
        delay = RETRY_FIRST
        while not self._stopping:
            answer = await self.client.sync(timeout=self.timeout_ms, since=self.since)
            if not isinstance(answer, SyncResponse):
                code = getattr(answer, "status_code", None) or "no error code"
                if code in _REFUSED:
                    self.receiving = False
                    self.on_refused_token(code)
                    return
                log.warning("matrix: /sync failed (%s); trying again in %.1fs", code, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            delay = RETRY_FIRST
            self._deciding = True
            self._decided.clear()
            try:
                brought = await self._rooms(answer, events=True)
            finally:
                self._deciding = False
                self._decided.set()
            self.since = answer.next_batch
            if brought:
                await self.save(answer.next_batch)

    async def _rooms(self, answer: SyncResponse, *, events: bool) -> bool:
        """Accept the invites, tell the rooms to ``on_room`` and, with ``events``, their timelines' events to
        ``on_event``, in order. True when anything was there."""
        brought = False
        for room_id in answer.rooms.invite:
            brought = True
            if self.allowed_rooms and room_id not in self.allowed_rooms:
                log.info("matrix: invite to %s left (not in MATRIX_ALLOWED_ROOMS)", room_id)
                continue
            joined = await self.client.join(room_id)
            if isinstance(joined, JoinError):
                log.warning("matrix: could not join %s: %s", room_id, joined.status_code)
            else:
                log.info("matrix: joined %s", room_id)
        for room_id, info in answer.rooms.join.items():
            room = self.client.rooms.get(room_id)
            if room is None:
                continue
            await self.on_room(room)
            if room.encrypted or not events:
                continue  # (an encrypted room's messages are not read: ``MatrixRuntime._on_room``)
            for event in info.timeline.events:
                brought = True
                try:
                    await self.on_event(room, event)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("matrix: could not decide on event %s", getattr(event, "event_id", "?"))
        return brought

    async def stop(self, *, timeout: float) -> None:
        """Sync no more: a long poll is cut; events being decided are given ``timeout`` seconds."""
        self._stopping = True
        self.receiving = False
        task, self._task = self._task, None
        if task is None:
            return
        if self._deciding:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._decided.wait()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _sync_error(answer: SyncError | Any) -> Exception:
    from core.errors import ConfigError, PlatformError

    code = getattr(answer, "status_code", None) or "no error code"
    if code in _REFUSED:
        return ConfigError(
            f"the Matrix homeserver refused MATRIX_ACCESS_TOKEN on /sync ({code}): set it to the bot account's "
            "current access token"
        )
    return PlatformError(f"the first Matrix /sync failed ({code}): check MATRIX_HOMESERVER and the homeserver")
