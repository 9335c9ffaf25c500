"""The pictures plugin: the ``make_picture`` action, which has a picture made by an images endpoint
(``core.media.generate.OpenAIImages``, ``IMAGES_*``) and posts it in the conversation (``post_media``). Each picture
is counted in the usage store under ``pictures:user:<id>`` and ``pictures:chat:<context id>`` (its own keys: a
picture is not tokens), and a user makes at most ``per_day_user`` a day, the admins (``BOT_ADMIN_USERS``) as many as
they like. The day's count is taken atomically in the limits' counter store (``core.limits.LimitStore``: one Redis
script in a fleet, so two workers making pictures for one user at once cannot both pass the last one), each picture
under the id of its ledger entry, so a batch run again counts it once; the usage store's count of the day, kept
across restarts, is checked too. In a queued run a picture is made and posted once per batch (``post_once``). Like
any action it is behind the trust tiers and approvals (its address is its name)."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field

from ..definition_types import ActionContext, Host
from ..definitions import Extension, action, extension
from ..entries import InputRef, now_ms
from ..errors import ActionError
from ..limits import InMemoryLimitStore, LimitStore
from ..plugin import Plugin
from ..usage import InMemoryUsage, UsageStore, day_of, user_of
from .outgoing import Outgoing, OutgoingKind, post_once

__all__ = ("PICTURE_ACTION", "PictureMaker", "Pictures", "picture_keys")

log = logging.getLogger("core.media")

PICTURE_ACTION = "make_picture"
"""The action's name (and its address in ``ACTIONS_POLICY``)."""

DAY_MS = 86_400_000
"""A day, in the window numbers of the per-day count (days since the epoch, UTC)."""

_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


class PictureMaker(Protocol):
    """What makes a picture from words (``OpenAIImages``)."""

    async def make(self, prompt: str) -> tuple[bytes, str]:
        """The picture's bytes and type."""
        ...


class PictureArgs(BaseModel):
    """Arguments of ``make_picture``."""

    prompt: str = Field(min_length=1, max_length=2000, description="What the picture shows, in detail")
    caption: str = Field(default="", max_length=500, description="A short caption posted with it (optional)")


def picture_keys(context_id: str, user: str | None) -> list[str]:
    """The usage keys a picture is counted under."""
    keys = [f"pictures:chat:{context_id}"]
    if user is not None:
        keys.insert(0, f"pictures:user:{user}")
    return keys


def _asker(state_logs: Sequence[Any]) -> str | None:
    for entry in reversed(state_logs):
        if isinstance(entry, InputRef) and (user := user_of(entry)) is not None:
            return user
    return None


class Pictures(Plugin):
    """``make_picture`` through ``maker`` (None: the action refuses, saying the operator has set no endpoint),
    counted in ``usage``, at most ``per_day_user`` pictures per user and day (0: no limit) counted in ``limits``
    (this process's memory by default; Redis in a fleet), except for the ``admins`` (``BOT_ADMIN_USERS``)."""

    name = "pictures"

    def __init__(
        self,
        maker: PictureMaker | None,
        *,
        usage: UsageStore | None = None,
        per_day_user: int = 10,
        limits: LimitStore | None = None,
        admins: frozenset[str] = frozenset(),
    ) -> None:
        self.maker = maker
        """What makes the pictures (None: not configured)."""
        self.usage: UsageStore = usage if usage is not None else InMemoryUsage()
        """Where pictures are counted."""
        self.per_day_user = per_day_user
        """Pictures one user may have made a day (0: no limit)."""
        self.limits: LimitStore = limits if limits is not None else InMemoryLimitStore()
        """Where the day's pictures of each user are counted, atomically."""
        self.admins = admins
        """Users without a limit (platform-qualified ids, ``telegram:42``)."""

    async def _admit(self, user: str | None, key: str | None) -> None:
        """Refuse (``ActionError``) a picture over ``user``'s limit of the day; ``key``: the picture's id in the
        count (its ledger entry's: the same in every attempt at a batch)."""
        if not self.per_day_user or user is None or user in self.admins:
            return
        refusal = ActionError(
            f"this user has had the {self.per_day_user} pictures a day allowed (IMAGES_PER_DAY_USER): "
            "tell them to ask again tomorrow"
        )
        made = await self.usage.totals(f"pictures:user:{user}", [day_of()])
        if made.output_tokens >= self.per_day_user:
            raise refusal
        place = await self.limits.count_message(
            user=f"pictures:{user}",
            message_id=key or secrets.token_hex(8),
            minute=now_ms() // DAY_MS,
            ttl_ms=2 * DAY_MS,
        )
        if place > self.per_day_user:
            raise refusal

    async def make_picture(self, args: PictureArgs, ctx: ActionContext, agent: Host) -> str:
        """The action's handler: refuse, or make the picture, post it and count it."""
        maker = self.maker
        if maker is None:
            raise ActionError(
                "pictures are not set up on this bot (the operator sets IMAGES_BASE_URL): tell the user you cannot "
                "make pictures here"
            )
        state = ctx.state
        user = _asker(state.working_memory.logs)

        async def make(key: str | None) -> Outgoing:
            await self._admit(user, key)
            data, mime = await maker.make(args.prompt)
            return Outgoing(
                kind=OutgoingKind.PICTURE,
                data=data,
                mime=mime,
                name=f"picture.{_EXTENSIONS.get(mime, 'png')}",
                caption=args.caption,
            )

        asked = f"{args.prompt}\n{args.caption}"
        where = await post_once(agent, state, kind=OutgoingKind.PICTURE, asked=asked, make=make)
        if where is None:
            return "the picture was posted in the conversation already: say so in a few words"
        try:
            await self.usage.add(
                day=day_of(), keys=picture_keys(state.id, user), input_tokens=0, output_tokens=1, cost=0
            )
        except Exception:
            log.exception("could not count a picture of %s", state.id)
        agent.observe("pictures", state.id)
        return f"the picture is posted in the conversation ({where}): say so in a few words"

    def extension(self) -> Extension:
        make = action(
            name=PICTURE_ACTION,
            description="Make a picture from a description and post it in this conversation",
            instructions="Call it when someone asks for a picture, a drawing or an image; then say it is posted.",
            schema=PictureArgs,
            handler=self.make_picture,
            timeout=180.0,
        )
        return extension(name="pictures", actions=[make])
