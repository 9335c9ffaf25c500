"""The pictures plugin: the ``make_picture`` action, which has a picture made by an images endpoint
(``core.media.generate.OpenAIImages``, ``IMAGES_*``) and posts it in the conversation (``post_media``). Each picture
is counted in the usage store under ``pictures:user:<id>`` and ``pictures:chat:<context id>`` (its own keys: a
picture is not tokens), and a user makes at most ``per_day_user`` a day. Like any action it is behind the trust
tiers and approvals (its address is its name)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field

from ..definition_types import ActionContext, Host
from ..definitions import Extension, action, extension
from ..entries import InputRef
from ..errors import ActionError
from ..plugin import Plugin
from ..usage import InMemoryUsage, UsageStore, day_of, user_of
from .outgoing import Outgoing, OutgoingKind, post_media

__all__ = ("PICTURE_ACTION", "PictureMaker", "Pictures", "picture_keys")

log = logging.getLogger("core.media")

PICTURE_ACTION = "make_picture"
"""The action's name (and its address in ``ACTIONS_POLICY``)."""

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
    counted in ``usage``, at most ``per_day_user`` pictures per user and day (0: no limit)."""

    name = "pictures"

    def __init__(self, maker: PictureMaker | None, *, usage: UsageStore | None = None, per_day_user: int = 10) -> None:
        self.maker = maker
        """What makes the pictures (None: not configured)."""
        self.usage: UsageStore = usage if usage is not None else InMemoryUsage()
        """Where pictures are counted."""
        self.per_day_user = per_day_user
        """Pictures one user may have made a day (0: no limit)."""

    async def make_picture(self, args: PictureArgs, ctx: ActionContext, agent: Host) -> str:
        """The action's handler: refuse, or make the picture, post it and count it."""
        if self.maker is None:
            raise ActionError(
                "pictures are not set up on this bot (the operator sets IMAGES_BASE_URL): tell the user you cannot "
                "make pictures here"
            )
        state = ctx.state
        user = _asker(state.working_memory.logs)
        day = day_of()
        if self.per_day_user and user is not None:
            made = await self.usage.totals(f"pictures:user:{user}", [day])
            if made.output_tokens >= self.per_day_user:
                raise ActionError(
                    f"this user has had the {self.per_day_user} pictures a day allowed (IMAGES_PER_DAY_USER): "
                    "tell them to ask again tomorrow"
                )
        data, mime = await self.maker.make(args.prompt)
        item = Outgoing(
            kind=OutgoingKind.PICTURE,
            data=data,
            mime=mime,
            name=f"picture.{_EXTENSIONS.get(mime, 'png')}",
            caption=args.caption,
        )
        where = await post_media(agent, state, item)
        try:
            await self.usage.add(day=day, keys=picture_keys(state.id, user), input_tokens=0, output_tokens=1, cost=0)
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
