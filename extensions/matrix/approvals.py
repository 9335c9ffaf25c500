"""Approvals in Matrix (``core.approvals``): a call that waits for an admin is asked for with a notice in its
conversation (or in the operator's room, ``ACTIONS_APPROVAL_CHATS=matrix:<room id>``) that the bot reacts to with
✅ and ❌; an approver's reaction is their press. Matrix has no buttons: the reactions are where people click.

The request carries its approval's id in its content (``APPROVAL_FIELD``), so whichever process sees a reaction (a
fleet's gateway, not the worker that asked) finds the approval by asking the homeserver for the reacted event,
and believes the field only on an event the bot itself posted. The presser's tier is computed in the room they
reacted in (its moderators are admins), like a message's author's.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from nio import MatrixRoom, ReactionEvent

from core.approvals import Approval, Pressed
from core.errors import PlatformError

from ..chat.approvals import ChatApprovals, button_labels, press_answer, request_text, settled_text
from .definitions import RoomArgs

if TYPE_CHECKING:
    from ..chat.trust import TrustRules
    from .posting import Poster

__all__ = ("APPROVAL_FIELD", "APPROVE", "DENY", "MatrixApprovals")

log = logging.getLogger("extensions.matrix")

APPROVAL_FIELD = "io.daydreams.bots.approval"
"""The content field of a request: the approval's id."""
APPROVE, DENY = "✅", "❌"
"""The reactions that approve and deny."""


class MatrixApprovals(ChatApprovals):
    """The Matrix side of the agent's approvals (``core.approvals.Asker``) and the reactions to its requests."""

    platform = "matrix"

    def __init__(
        self,
        *,
        poster: Callable[[], Poster],
        me: str,
        rules: Callable[[], TrustRules],
        timeout: float,
        language: Callable[[Approval], Awaitable[str | None]] | None = None,
    ) -> None:
        super().__init__(rules=rules, timeout=timeout, language=language)
        self.poster = poster
        self.me = me

    # -- core.approvals.Asker -------------------------------------------------------------------------

    async def ask(self, approval: Approval, *, target: str | None) -> str | None:
        args = _where(approval, target)
        language = await self.language_of(approval)
        approve, deny = button_labels(language)
        text = f"{request_text(approval, language)}\n\n{APPROVE} {approve}    {DENY} {deny}"
        poster = self.poster()
        event_id = await poster.post(args, text, reply_to=None, notice=True, extra={APPROVAL_FIELD: approval.id})
        reactions: list[str] = []
        for key in (APPROVE, DENY):
            try:
                reactions.append(await poster.react(args.room_id, event_id, key))
            except PlatformError as exc:  # (the request stands: a person can still react with the same emoji)
                log.warning("could not add %s under approval %s: %s", key, approval.id, exc)
        return "|".join([args.room_id, event_id, *reactions])  # (where it is, and the bot's reactions under it)

    async def settle(self, approval: Approval) -> None:
        await self._show_decision(approval, await self.language_of(approval))

    async def _show_decision(self, approval: Approval, language: str | None) -> None:
        """Edit the request to what became of it, and take the bot's ✅ and ❌ away (best effort)."""
        if approval.prompt is None:
            return
        room_id, event_id, *reactions = approval.prompt.split("|")
        poster = self.poster()
        try:
            await poster.edit(room_id, event_id, settled_text(approval, language), notice=True)
            for reaction in reactions:
                await poster.redact(room_id, reaction)
        except PlatformError as exc:
            log.warning("could not show the decision on approval %s: %s", approval.id, exc)

    # -- a reaction -----------------------------------------------------------------------------------

    async def on_reaction(self, room: MatrixRoom, event: ReactionEvent, *, admin: bool) -> None:
        """A reaction in ``room``: ✅ or ❌ on one of the bot's requests is a press (by a moderator when
        ``admin``); any other reaction is left."""
        desk = self.desk()
        if desk is None or event.key not in (APPROVE, DENY) or event.sender == self.me:
            return
        poster = self.poster()
        found = await poster.event(room.room_id, event.reacts_to)
        if found is None or found[0] != self.me or not isinstance(found[1].get(APPROVAL_FIELD), str):
            return
        approval_id: str = found[1][APPROVAL_FIELD]
        posted = f"{room.room_id}|{event.reacts_to}"
        pressed, approval = await desk.press(
            approval_id,
            approve=event.key == APPROVE,
            by=f"matrix:{event.sender}",
            name=room.user_name(event.sender) or event.sender,
            tier=self.rules().tier("matrix", event.sender, admin=admin),
            asked_here=lambda asked: (
                asked.platform == "matrix" and (asked.prompt is None or f"{asked.prompt}|".startswith(f"{posted}|"))
            ),
        )
        language = await self.language_of(approval)
        try:
            if pressed is not Pressed.DECIDED:  # (not allowed, decided already, unknown: said to the room)
                await poster.post(
                    RoomArgs(room_id=room.room_id),
                    press_answer(pressed, approval, language),
                    reply_to=None,
                    notice=True,
                )
        except PlatformError as exc:
            log.warning("could not answer a reaction on approval %s: %s", approval_id, exc)
        if approval is not None and pressed in (Pressed.DECIDED, Pressed.ALREADY) and approval.decision:
            await self._show_decision(approval, language)


def _where(approval: Approval, target: str | None) -> RoomArgs:
    """The conversation the request of ``approval`` goes to: the operator's room, or the approval's own."""
    if target:
        room, _, thread = target.partition("/")
        return RoomArgs(room_id=room, thread_id=thread or None)
    args: Any = approval.args if isinstance(approval.args, dict) else {}
    return RoomArgs(room_id=str(args["room_id"]), thread_id=args.get("thread_id"))
