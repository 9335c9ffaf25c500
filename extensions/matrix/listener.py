"""Every event a sync brings, decided on: a person's message (text or picture) answered or not, a command served,
a redaction forgotten.

A message is counted, checked against the events seen lately (a sync taken again after a crash or a takeover
hands them over again), given its verdict (the allowlists, the reply policy: a room of two is private, a larger
one answers a mention, a command or, with ``/reply always``, everything) and handed over: to the agent as its
input (embedded: in a task the adapter owns; in front of a queue: stored before the sync token moves past it), or
to the bot's commands. A redaction of a person's message takes it out of the conversation's memory and drops the
facts that came from it (``Host.forget_messages``, ``core.facts``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from nio import Event, MatrixRoom, ReactionEvent, RedactionEvent, RoomMessageImage, RoomMessageText

from core.entries import InputRef
from core.errors import BotError
from core.facts import facts_of
from core.media import Attachment, AttachmentKind
from core.trust import TIER_PARAM

from ..chat.adapter import ChatAdapter
from ..chat.backpressure import Incoming
from ..chat.counters import Ignored
from ..chat.policy import Allowlist, ReplyPolicy, should_reply
from .commands import Commands, command_of
from .definitions import MESSAGE, Facts, RoomArgs, matrix_room
from .posting import Poster

if TYPE_CHECKING:
    from core.definitions import Send

__all__ = ("Facts", "Listener", "facts_of_event")

log = logging.getLogger("extensions.matrix")
content_log = logging.getLogger("content.matrix")

THREADS_KEPT = 10_000
"""Threads remembered for redactions at most."""
ADMIN_LEVEL = 50
"""The power level from which a room member administers the room (Matrix's moderators and admins)."""


def _relates(event: Event) -> dict[str, Any]:
    content = event.source.get("content", {}) if isinstance(event.source, dict) else {}
    related = content.get("m.relates_to") if isinstance(content, dict) else None
    return related if isinstance(related, dict) else {}


def _level(room: MatrixRoom, user_id: str) -> int:
    """The power level of ``user_id`` in ``room`` (0 when the room's levels are not known)."""
    return int(room.power_levels.get_user_level(user_id)) if room.power_levels is not None else 0


def facts_of_event(room: MatrixRoom, event: Event, *, me: str, my_name: str, mine: Callable[[str], bool]) -> Facts:
    """The facts of ``event`` (a text or a picture) in ``room``, for the bot ``me`` (display name ``my_name``);
    ``mine(event_id)``: the bot posted that event."""
    related = _relates(event)
    thread = related.get("event_id") if related.get("rel_type") == "m.thread" else None
    replied = related.get("m.in_reply_to", {})
    replied_id = replied.get("event_id") if isinstance(replied, dict) else None
    content = event.source.get("content", {})
    mentions = content.get("m.mentions", {}) if isinstance(content, dict) else {}
    text = str(getattr(event, "body", "") or "")
    attachments: list[Attachment] = []
    if isinstance(event, RoomMessageImage):
        info = content.get("info", {}) if isinstance(content.get("info"), dict) else {}
        attachments.append(
            Attachment(
                kind=AttachmentKind.IMAGE,
                name=str(content.get("filename") or text)[:200],
                mime=str(info.get("mimetype", "")),
                size=info.get("size") if isinstance(info.get("size"), int) else None,
                source="matrix",
                ref=event.url,
            )
        )
        filename = content.get("filename")  # (a caption is a body other than the file's name, where one is given)
        text = text if isinstance(filename, str) and filename and text != filename else ""
    user_ids = mentions.get("user_ids", []) if isinstance(mentions, dict) else []
    lowered = text.lower()
    mentioned = (isinstance(user_ids, list) and me in user_ids) or me.lower() in lowered
    if my_name and my_name.lower() != me.lower() and re.search(rf"(?<!\w){re.escape(my_name)}(?!\w)", text, re.I):
        mentioned = True  # (its display name as a word: how people mention it in clients without mention pills)
    level = _level(room, event.sender)
    return Facts(
        args=RoomArgs(room_id=room.room_id, thread_id=thread if isinstance(thread, str) else None),
        event_id=event.event_id,
        sender=event.sender,
        name=room.user_name(event.sender) or event.sender,
        text=text,
        private=room.member_count <= 2,
        mentioned=mentioned,
        replied_to_bot=isinstance(replied_id, str) and mine(replied_id),
        replied_id=replied_id if isinstance(replied_id, str) else None,
        admin=level >= ADMIN_LEVEL,
        attachments=attachments,
    )


class Listener:
    """Decides on the events of one bot account (``open`` gives it ``agent.send``)."""

    def __init__(
        self,
        adapter: ChatAdapter,
        *,
        me: str,
        queued: bool,
        poster: Poster,
        commands: Commands,
        allowlist: Allowlist,
        default_policy: ReplyPolicy,
        mine: Callable[[str], bool],
        typing: Callable[[RoomArgs], Any],
        until_stored: Callable[[Callable[[], Awaitable[None]], str], Awaitable[None]],
        on_reaction: Callable[..., Awaitable[None]] | None = None,
    ) -> None:
        self.adapter = adapter
        self.me = me
        self.queued = queued
        """In front of a queue: a message is stored before ``on_event`` returns."""
        self.poster = poster
        self.commands = commands
        self.allowlist = allowlist
        self.default_policy = default_policy
        self.mine = mine
        self.typing = typing
        self.until_stored = until_stored
        self.on_reaction = on_reaction
        """A reaction (``MatrixApprovals.on_reaction``: ✅ or ❌ under an approval request is a press)."""
        self.threads: set[RoomArgs] = set()
        """The threads messages came from (a redaction names no thread: its message is forgotten in each)."""
        self._answering: dict[RoomArgs, asyncio.Task[None]] = {}
        self._send: Send | None = None

    def open(self, send: Send) -> None:
        """Hand answered messages to ``send`` (``agent.send``) from now on."""
        self._send = send

    async def on_event(self, room: MatrixRoom, event: Event) -> None:
        """Decide on one event of a room's timeline."""
        if getattr(event, "sender", None) == self.me:
            return
        if isinstance(event, RedactionEvent):
            await self._redacted(room, event)
            return
        if isinstance(event, ReactionEvent):
            if self.on_reaction is not None:
                await self.on_reaction(room, event, admin=_level(room, event.sender) >= ADMIN_LEVEL)
            return
        if not isinstance(event, RoomMessageText | RoomMessageImage):
            return  # (notices are other bots' own messages; state and other events carry no message)
        if isinstance(event, RoomMessageText) and _relates(event).get("rel_type") == "m.replace":
            return  # an edit of a message already answered
        adapter = self.adapter
        facts = facts_of_event(room, event, me=self.me, my_name=room.user_name(self.me) or "", mine=self.mine)
        adapter.metrics.received(matrix_room, facts.args)
        if facts.args.thread_id is not None and len(self.threads) < THREADS_KEPT:
            self.threads.add(facts.args)
        if facts.event_id in adapter.seen:
            log.info("event %s was delivered twice; answering it once", facts.event_id)
            adapter.metrics.ignored(matrix_room, facts.args, Ignored.DUPLICATE)
            return
        if not self.allowlist.allows(chat_ids=[room.room_id], user_id=facts.sender):
            adapter.metrics.ignored(matrix_room, facts.args, Ignored.ALLOWLIST)
            adapter.seen.add(facts.event_id)
            return
        asks_who = facts.replied_id and not (facts.private or facts.mentioned or facts.replied_to_bot)
        # (a reply to a message this process did not post: a worker's, or one from before a restart)
        if asks_who and facts.replied_id and await self.poster.sender_of(room.room_id, facts.replied_id) == self.me:
            facts = dataclasses.replace(facts, replied_to_bot=True)
        command = command_of(facts.text)
        policy = await adapter.reply_policy(matrix_room, facts.args, self.default_policy)
        answer = should_reply(
            policy,
            private=facts.private,
            mentioned=facts.mentioned,
            replied_to_bot=facts.replied_to_bot,
            command=command is not None,
        )
        if not answer or not (facts.text.strip() or facts.attachments):
            adapter.metrics.ignored(matrix_room, facts.args, Ignored.POLICY if not answer else Ignored.EMPTY)
            adapter.seen.add(facts.event_id)
            return
        content_log.info("room %s event %s from %s: %s", room.room_id, facts.event_id, facts.sender, facts.text)
        log.info(
            "room %s%s: %s from %s (event %s, %d characters)",
            room.room_id,
            f"/{facts.args.thread_id}" if facts.args.thread_id else "",
            "command" if command is not None else "answer",
            facts.sender,
            facts.event_id,
            len(facts.text),
        )
        key = f"matrix:{facts.event_id}"
        if command is not None:
            name, arg = command

            async def work() -> None:
                if name in ("reset", "forget"):  # (after the answer in flight here, which would save it back)
                    await self._answered(facts.args)
                await self.commands.serve(facts, name, arg)

            if self.queued:
                await self._guarded(work, facts)
            else:
                adapter.spawn(self._guarded(work, facts), name=f"{key}:command", key=key)
            adapter.seen.add(facts.event_id)
            return
        incoming = self._incoming(facts, key)
        if self.queued:
            await self.until_stored(lambda: adapter.backpressure.submit(incoming), incoming.what)
        else:
            task = adapter.spawn(self._answer(incoming, facts), name=f"{key}:answer", key=key)
            self._answering[facts.args] = task
            task.add_done_callback(functools.partial(self._answer_done, facts.args))
            adapter.seen.add(facts.event_id)

    def _answer_done(self, args: RoomArgs, task: asyncio.Task[None]) -> None:
        if self._answering.get(args) is task:
            del self._answering[args]

    async def _answered(self, args: RoomArgs) -> None:
        """Wait for the answer this process is writing in the conversation ``args`` to end (bounded by the agent's
        ``stop_timeout``)."""
        task = self._answering.get(args)
        agent = self.adapter.agent
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=agent.stop_timeout if agent is not None else 10.0)

    async def _guarded(self, work: Callable[[], Awaitable[None]], facts: Facts) -> None:
        try:
            await work()
        except Exception:
            log.exception("could not serve a command in room %s", facts.args.room_id)

    def _incoming(self, facts: Facts, key: str) -> Incoming:
        assert self._send is not None, "Listener.open was not called"
        send, adapter = self._send, self.adapter
        tier = adapter.trust.tier("matrix", facts.sender, admin=facts.admin)
        params = {"user": facts.name, "user_id": facts.sender, "message_id": facts.event_id, TIER_PARAM: tier.value}
        ref = InputRef(type=MESSAGE, data=facts.text, params=params, attachments=list(facts.attachments))

        async def store() -> None:
            await send(matrix_room, facts.args, ref, dedupe_key=key)

        return Incoming(
            chat=(facts.args.room_id, facts.args.thread_id),
            key=key,
            what=f"event {facts.event_id} in room {facts.args.room_id}",
            store=store,
            tell_busy=lambda: self.commands.say(facts, "busy"),
            tell_failed=lambda: self.commands.say(facts, "run_failed"),
            on_dropped=lambda: adapter.metrics.ignored(matrix_room, facts.args, Ignored.BUSY),
            on_handled=lambda: adapter.seen.add(facts.event_id),
        )

    async def _answer(self, incoming: Incoming, facts: Facts) -> None:
        """Embedded: hand the message to the agent, with "typing..." shown until the run is over."""
        async with self.typing(facts.args):
            await self.adapter.run_here(incoming, context=matrix_room, args=facts.args)

    async def _redacted(self, room: MatrixRoom, event: RedactionEvent) -> None:
        """A message was deleted (redacted): it leaves the working memory, the run in progress and the history,
        and the facts that came from it are dropped. A store that fails is logged."""
        agent = self.adapter.agent
        if agent is None or not event.redacts:
            return
        # (a thread's message is forgotten in the room and in its thread: the redaction does not say which)
        for args in {RoomArgs(room_id=room.room_id), *(t for t in self.threads if t.room_id == room.room_id)}:
            cid = agent.context_id(matrix_room, args)
            try:
                await agent.forget_messages(matrix_room, args, [event.redacts])
            except BotError as exc:
                log.warning("matrix: deleted event %s of %s stays in its memory: %s", event.redacts, cid, exc)
            facts = facts_of(agent)
            if facts is None:
                continue
            try:
                dropped = await facts.store.drop_message(cid, event.redacts)
            except BotError as exc:
                log.warning("matrix: the facts of deleted event %s in %s stay: %s", event.redacts, cid, exc)
                continue
            if dropped:
                log.info("matrix: event %s in %s was deleted; dropped %d fact(s)", event.redacts, cid, len(dropped))
        log.info("matrix: event %s in room %s was deleted by %s", event.redacts, room.room_id, event.sender)
