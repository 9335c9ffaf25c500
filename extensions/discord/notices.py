"""The bot's own words in a channel (busy, something went wrong...), in the language the channel chose with
``/language`` (``extensions.chat.i18n``; a thread's channel's where the thread chose nothing)."""

from __future__ import annotations

import uuid

from ..chat.adapter import ChatAdapter
from ..chat.i18n import say
from .definitions import ChannelArgs, discord_channel
from .posting import Poster

__all__ = ("Notices",)


class Notices:
    """Posts the notices of ``extensions.chat.i18n`` as replies, each in its channel's language."""

    def __init__(self, adapter: ChatAdapter, poster: Poster) -> None:
        self.adapter = adapter
        """Reads the channels' languages."""
        self.poster = poster
        """Posts."""

    async def language(self, args: ChannelArgs) -> str | None:
        """The channel's language (None: English, also when the store cannot be read)."""
        return await self.adapter.language(discord_channel, args)

    async def say(self, args: ChannelArgs, key: str, *, reply_to: int | None, **values: object) -> None:
        """Post the notice ``key`` in the channel of ``args`` as a reply to ``reply_to``; a failure is logged."""
        text = say(key, await self.language(args), **values)
        once = f"{key}:{reply_to if reply_to is not None else uuid.uuid4().hex}"  # one notice per message answered
        await self.poster.notice(channel_id=args.channel_id, text=text, reply_to=reply_to, idempotency_key=once)
