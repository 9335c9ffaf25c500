"""Posting in Discord over REST: replies split at 2,000 characters with idempotent nonces, answers shown while
they are written (live edits), notices, "typing...", reactions, and downloading what people attached.

Every post carries an idempotency key that becomes the message nonce (``enforce_nonce``), so a retried post is
not shown twice. In a queued run (``bots worker``) a reply follows the run's ledger (``extensions.chat.exactly_once``)
and its nonces come from the ledger's stable keys, the same in every attempt at the batch: a batch run again after a
crash posts nothing that was posted. With ``DISCORD_STREAM_REPLIES`` an answer is shown while it is written: posted
when its first words arrive, edited at most once per ``DISCORD_STREAM_INTERVAL``, continued in a new message past
2,000 characters, and finished by the output handler with the exact final text (``deliver``); the
platform-independent part is ``extensions.chat.stream``. The first message of an answer being written carries a
Stop button (``STOP_BUTTON``, answered by ``SlashCommands.on_stop_button``), taken off once the answer is delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import io
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from core import tracing
from core.errors import PlatformError
from core.media import Attachment

from ..chat.adapter import ChatAdapter
from ..chat.commands import STOP_BUTTON
from ..chat.exactly_once import ReplyRecord
from ..chat.i18n import say
from ..chat.polls import PollBook, PollRecord
from ..chat.split import split_message
from ..chat.stream import LiveReply, ReplyKey
from ._lib import discord
from .definitions import REPLY_TO, ChannelArgs, PollArgs, discord_channel
from .layout import layout_of, picture_layout
from .platform_errors import NETWORK_ERRORS, platform_error
from .settings import DiscordSettings
from .voice_message import VoiceMessage

if TYPE_CHECKING:
    from typing import Any

    from core.definitions import ContextState
    from core.events import RunEvent
    from core.fleet.reply_ledger import ReplyLedger
    from core.media import Outgoing

__all__ = ("MESSAGE", "MESSAGE_LIMIT", "Poster", "nonce_for")

log = logging.getLogger("extensions.discord")
content_log = logging.getLogger("content.discord")
"""Message text, silent unless the operator opts in (``LOG_CONTENT``)."""

MESSAGE = "discord:message"
"""The output the bot answers with."""
MESSAGE_LIMIT = 2000
"""Characters Discord accepts in one message."""


def nonce_for(idempotency_key: str, index: int) -> str:
    """The message nonce of chunk ``index`` of the reply keyed ``idempotency_key`` (Discord allows 25 chars)."""
    return hashlib.blake2b(f"{idempotency_key}#{index}".encode(), digest_size=12).hexdigest()


def _split(text: str) -> list[str]:
    return split_message(text, MESSAGE_LIMIT)


class _Sink:
    """Posts, edits and deletes the messages of one answer being written in one channel."""

    def __init__(
        self,
        poster: Poster,
        *,
        channel_id: int,
        reply_to: int | None,
        key: str,
        record: ReplyRecord | None = None,
        stop_label: str | None = None,
    ) -> None:
        self.poster = poster
        self.channel_id = channel_id
        self.reply_to = reply_to
        self.key = key
        self.record = record
        self.stop_label = stop_label
        """The label of the Stop button the first message carries (None: no button)."""
        self.buttoned: int | None = None
        """The message posted with the Stop button."""
        self.posts = 0

    async def post(self, text: str, *, index: int) -> int:
        self.posts += 1  # every post its own nonce (a repost after a failed edit is a new message)
        label = self.stop_label if index == 0 and self.buttoned is None else None
        nonce = nonce_for(self.key, self.posts - 1) if self.record is None else self.record.next_key()
        message = await self.poster.send(
            channel_id=self.channel_id,
            text=text,
            reply_to=self.reply_to if index == 0 else None,
            nonce=nonce,  # in a queued run the same in every attempt at the batch
            stop_label=label,
        )
        if label is not None:
            self.buttoned = message.id
        if self.record is not None and message.content.strip() != text.strip():  # posted by an earlier attempt
            await self.edit(message.id, text)
        return message.id

    async def edit(self, handle: int, text: str) -> None:
        await self.poster.edit_message(channel_id=self.channel_id, message_id=handle, text=text)

    async def delete(self, handle: int) -> None:
        await self.poster.delete_message(channel_id=self.channel_id, message_id=handle)


class Poster:
    """Everything the bot writes in Discord, through the REST client ``client()`` gives (None before the login
    and after the stop); live replies, the ledger and "typing..." are the ``adapter``'s (``extensions.chat``)."""

    def __init__(
        self, adapter: ChatAdapter, settings: DiscordSettings, *, client: Callable[[], discord.Client | None]
    ) -> None:
        self.adapter = adapter
        """The shared part of the adapter: live replies, the reply ledger, typing loops."""
        self.settings = settings
        """The ``DISCORD_*`` settings."""
        self._client = client
        self.polls = PollBook(prefix="discord:poll:", args=ChannelArgs)
        """The polls posted, by message id (their votes go back to their conversations)."""

    def _require_client(self) -> discord.Client:
        client = self._client()
        if client is None:
            raise PlatformError("the Discord client is not running: call await agent.start() first")
        return client

    async def post_reply(self, *, channel_id: int, text: str, reply_to: int | None, idempotency_key: str) -> list[int]:
        """Post ``text`` to the channel, split at 2,000 characters (code fences re-opened), the first chunk
        as a reply to ``reply_to``; no mention pings. Chunk ``i`` carries the nonce ``nonce_for(key, i)``
        with ``enforce_nonce``, so posting again with the same key does not duplicate. Returns the ids."""
        ids: list[int] = []
        for index, chunk in enumerate(split_message(text, MESSAGE_LIMIT)):
            ids.append(
                await self.send_message(
                    channel_id=channel_id,
                    text=chunk,
                    reply_to=reply_to if index == 0 else None,
                    nonce=nonce_for(idempotency_key, index),
                )
            )
        return ids

    async def post_answer(self, *, channel_id: int, text: str, reply_to: int | None, idempotency_key: str) -> list[int]:
        """Post an answer posted whole: laid out with components v2 when it has structure (``layout.py``,
        ``DISCORD_COMPONENTS_V2``), as plain messages (``post_reply``) otherwise or where Discord refuses the
        layout. Returns the ids."""
        view = layout_of(text) if self.settings.components_v2 else None
        if view is not None:
            client = self._require_client()
            channel = client.get_partial_messageable(channel_id)
            reference = None
            if reply_to is not None:
                reference = channel.get_partial_message(reply_to).to_reference(fail_if_not_exists=False)
            try:
                async with _traced("create_message", channel_id), asyncio.timeout(self.settings.request_timeout):
                    sent = await channel.send(
                        view=view,
                        nonce=nonce_for(idempotency_key, 0),
                        reference=reference,  # type: ignore[arg-type]
                        allowed_mentions=discord.AllowedMentions.none(),
                    )
            except discord.HTTPException as exc:
                if exc.status != 400:
                    raise platform_error(exc, f"post a message in channel {channel_id}", in_channel=True) from exc
                log.info("discord: channel %s refused the laid-out answer (%s); posting it as text", channel_id, exc)
            except NETWORK_ERRORS as exc:
                raise platform_error(exc, f"post a message in channel {channel_id}", in_channel=True) from exc
            else:
                return [sent.id]
            finally:
                view.stop()
        return await self.post_reply(
            channel_id=channel_id, text=text, reply_to=reply_to, idempotency_key=idempotency_key
        )

    async def notice(self, *, channel_id: int, text: str, reply_to: int | None, idempotency_key: str) -> None:
        """Post one of the bot's own notices (busy...); a failure is logged, never raised."""
        try:
            await self.post_reply(channel_id=channel_id, text=text, reply_to=reply_to, idempotency_key=idempotency_key)
        except PlatformError as exc:
            log.warning("discord: could not post a notice in channel %s: %s", channel_id, exc)

    async def send_message(self, *, channel_id: int, text: str, reply_to: int | None, nonce: str) -> int:
        """Post one message (at most 2,000 characters) with ``nonce`` enforced, as a reply to ``reply_to``
        if given; no mention pings. Returns its id."""
        message = await self.send(channel_id=channel_id, text=text, reply_to=reply_to, nonce=nonce)
        return message.id

    async def send(
        self, *, channel_id: int, text: str, reply_to: int | None, nonce: str, stop_label: str | None = None
    ) -> discord.Message:
        """``send_message``, returning the message Discord answered with: with a nonce Discord saw before
        (``enforce_nonce``), the message posted then, whatever it shows. ``stop_label``: with a Stop button."""
        client = self._require_client()
        channel = client.get_partial_messageable(channel_id)
        reference = None
        if reply_to is not None:
            reference = channel.get_partial_message(reply_to).to_reference(fail_if_not_exists=False)
        view = discord.utils.MISSING
        if stop_label is not None:
            view = discord.ui.View(timeout=None)
            view.add_item(
                discord.ui.Button(style=discord.ButtonStyle.secondary, label=stop_label, custom_id=STOP_BUTTON)
            )
        try:
            async with _traced("create_message", channel_id), asyncio.timeout(self.settings.request_timeout):
                sent = await channel.send(
                    text,
                    nonce=nonce,
                    reference=reference,  # type: ignore[arg-type]
                    allowed_mentions=discord.AllowedMentions.none(),
                    view=view,
                )
        except NETWORK_ERRORS as exc:
            raise platform_error(exc, f"post a message in channel {channel_id}", in_channel=True) from exc
        finally:
            if view is not discord.utils.MISSING:
                view.stop()  # a press goes to the client's component hook, whichever process receives it
        return sent

    async def post_media(self, state: ContextState[Any], item: Outgoing) -> str:
        """Post a picture or a spoken reply in the channel of ``state``, replying to the message the run answers
        (``core.media.MediaPoster``): a picture as a message with the file attached, in a media gallery where the
        layout is on (``_post_file``), the caption posted as written, no mention pings; a spoken reply as Discord's
        voice message (``voice_message``; a plain ``.ogg`` file when its duration cannot be read). Returns the
        message's id."""
        client = self._require_client()
        channel_id: int = state.platform_args.channel_id
        channel = client.get_partial_messageable(channel_id)
        reply_to = state.values.get(REPLY_TO)
        reference = None
        if reply_to is not None:
            reference = channel.get_partial_message(reply_to).to_reference(fail_if_not_exists=False)
        voice = VoiceMessage.of(item.data) if item.kind.value == "voice" and not item.caption else None
        try:
            async with _traced("create_message", channel_id), asyncio.timeout(self.settings.request_timeout):
                if voice is not None:  # Discord's voice message: its player and waveform
                    sent_id = await voice.send(client, channel_id, reference=reference)
                else:
                    sent_id = await self._post_file(channel, item, reference=reference)
        except NETWORK_ERRORS as exc:
            raise platform_error(exc, f"post a {item.kind.value} in channel {channel_id}", in_channel=True) from exc
        shown = "a voice message" if voice is not None else f"a {item.kind.value} file"
        log.info("discord: channel %s: posted %s of %d bytes", channel_id, shown, len(item.data))
        return f"message {sent_id}"

    async def _post_file(
        self, channel: discord.PartialMessageable, item: Outgoing, *, reference: discord.MessageReference | None
    ) -> int:
        """Post ``item`` as a file: a picture laid out with components v2 (``layout.picture_layout``: in a media
        gallery, its caption beside it; ``DISCORD_COMPONENTS_V2``), or the file with its caption as the message's
        text, as before, otherwise and where Discord refuses the layout (400). Returns the message's id."""
        if self.settings.components_v2 and item.kind.value == "picture":
            view = picture_layout(item.name, item.caption)
            try:
                sent = await channel.send(
                    view=view,
                    file=discord.File(io.BytesIO(item.data), filename=item.name),
                    reference=reference,  # type: ignore[arg-type]
                    allowed_mentions=discord.AllowedMentions.none(),
                )
            except discord.HTTPException as exc:
                if exc.status != 400:
                    raise
                log.info("discord: channel %s refused the laid-out picture (%s); posting it as a file", channel.id, exc)
            else:
                return sent.id
            finally:
                view.stop()
        sent = await channel.send(
            item.caption[:MESSAGE_LIMIT] or None,
            file=discord.File(io.BytesIO(item.data), filename=item.name),
            reference=reference,  # type: ignore[arg-type]
            allowed_mentions=discord.AllowedMentions.none(),
        )
        return sent.id

    async def drop_stop_button(self, *, channel_id: int, message_id: int) -> None:
        """Take the Stop button off a message (its answer is delivered); a failure is logged (a press then says
        there is nothing to stop)."""
        message = self._require_client().get_partial_messageable(channel_id).get_partial_message(message_id)
        try:
            async with _traced("edit_message", channel_id), asyncio.timeout(self.settings.request_timeout):
                await message.edit(view=None)
        except NETWORK_ERRORS as exc:
            log.warning("discord: could not take the Stop button off message %s: %s", message_id, exc)

    async def lay_out(self, *, channel_id: int, message_id: int, text: str) -> bool:
        """Edit the message ``message_id`` (the whole answer, posted as text) into the components v2 layout of
        ``text`` when it has structure (Discord lets an edit set ``IS_COMPONENTS_V2``, the content emptied, never
        take it back); True when it shows the layout. A refusal is logged and leaves the text."""
        view = layout_of(text)
        if view is None:
            return False
        message = self._require_client().get_partial_messageable(channel_id).get_partial_message(message_id)
        try:
            async with _traced("edit_message", channel_id), asyncio.timeout(self.settings.request_timeout):
                await message.edit(content=None, view=view, allowed_mentions=discord.AllowedMentions.none())
        except NETWORK_ERRORS as exc:
            log.info("discord: message %s in channel %s was left as text: %s", message_id, channel_id, exc)
            return False
        finally:
            view.stop()
        return True

    async def edit_message(self, *, channel_id: int, message_id: int, text: str) -> None:
        """Replace the text of one of the bot's messages; no mention pings."""
        message = self._require_client().get_partial_messageable(channel_id).get_partial_message(message_id)
        try:
            async with _traced("edit_message", channel_id), asyncio.timeout(self.settings.request_timeout):
                await message.edit(content=text, allowed_mentions=discord.AllowedMentions.none())
        except NETWORK_ERRORS as exc:
            raise platform_error(exc, f"edit message {message_id} in channel {channel_id}") from exc

    async def delete_message(self, *, channel_id: int, message_id: int) -> None:
        """Delete one of the bot's messages."""
        message = self._require_client().get_partial_messageable(channel_id).get_partial_message(message_id)
        try:
            async with _traced("delete_message", channel_id), asyncio.timeout(self.settings.request_timeout):
                await message.delete()
        except NETWORK_ERRORS as exc:
            raise platform_error(exc, f"delete message {message_id} in channel {channel_id}") from exc

    async def post_poll(
        self, *, args: ChannelArgs, poll: PollArgs, reply_to: int | None, idempotency_key: str
    ) -> list[int]:
        """Post a poll the model wrote (``discord:poll``), with the nonce of ``idempotency_key`` enforced (a batch
        run again finds it posted); its votes come back to the conversation of ``args``. Returns its id."""
        channel = self._require_client().get_partial_messageable(args.channel_id)
        made = discord.Poll(
            question=poll.question, duration=datetime.timedelta(hours=poll.hours), multiple=poll.multiple
        )
        for option in poll.options:
            made.add_answer(text=option)
        reference = None
        if reply_to is not None:
            reference = channel.get_partial_message(reply_to).to_reference(fail_if_not_exists=False)
        try:
            async with _traced("create_message", args.channel_id), asyncio.timeout(self.settings.request_timeout):
                sent = await channel.send(
                    poll=made,
                    nonce=nonce_for(idempotency_key, 0),
                    reference=reference,  # type: ignore[arg-type]
                    allowed_mentions=discord.AllowedMentions.none(),
                )
        except NETWORK_ERRORS as exc:
            raise platform_error(exc, f"post a poll in channel {args.channel_id}", in_channel=True) from exc
        record = PollRecord(args=args, question=poll.question, options=tuple(poll.options), message_id=sent.id)
        try:
            await self.polls.add(str(sent.id), record)
        except Exception as exc:  # (Redis down: the poll is posted; its votes will be left)
            log.warning("discord: poll %s not noted, its votes will be left: %s", sent.id, exc)
        log.info("discord: posted a poll of %d answers in channel %s", len(poll.options), args.channel_id)
        return [sent.id]

    async def add_reaction(self, *, channel_id: int, message_id: int, emoji: str) -> None:
        """React to a message with ``emoji`` (unicode, or ``<:name:id>`` for a server emoji)."""
        message = self._require_client().get_partial_messageable(channel_id).get_partial_message(message_id)
        try:
            async with asyncio.timeout(self.settings.request_timeout):
                await message.add_reaction(emoji)
        except NETWORK_ERRORS as exc:
            raise platform_error(exc, f"react with {emoji!r} to message {message_id}") from exc

    async def dm_channel(self, user_id: int) -> int:
        """The id of the DM channel between the bot and ``user_id`` (Discord opens it, or gives the one open)."""
        client = self._require_client()
        try:
            async with asyncio.timeout(self.settings.request_timeout):
                data = await client.http.start_private_message(user_id)
        except NETWORK_ERRORS as exc:
            raise platform_error(exc, f"open a DM channel with user {user_id}") from exc
        return int(data["id"])

    async def fetch_attachment(self, attachment: Attachment) -> bytes:
        """The bytes of a file someone posted, from its attachment URL (Discord's CDN)."""
        client = self._require_client()
        try:
            return await client.http.get_from_cdn(attachment.ref)
        except NETWORK_ERRORS as exc:
            raise platform_error(exc, f"download the attachment {attachment.name!r}") from exc

    def typing(self, channel_id: int) -> AbstractAsyncContextManager[None]:
        """Keep "typing..." alive in the channel while the block lasts: one loop per channel however many hold
        it (the listener while it hands a message over, the run while it answers, here or in a worker)."""
        return self.adapter.typing_loops.hold(channel_id, lambda: self._send_typing(channel_id))

    async def _send_typing(self, channel_id: int) -> None:
        await self._require_client().get_partial_messageable(channel_id).typing()

    # -- answers shown while they are written ----------------------------------------------------------

    def start_live(self, event: RunEvent) -> LiveReply | None:
        """The live reply for an answer that starts streaming (an event listener: runs in the run's task)."""
        agent = self.adapter.agent
        if agent is None:
            return None
        state = agent.state_of(event.context_id)
        if state is None or not state.context.includes(discord_channel) or self._client() is None:
            return None
        reply_to = state.values.get(REPLY_TO)
        # stable for one answer to one message (in a queued run the ledger's keys are used instead)
        key = f"live:{event.context_id}:{reply_to or uuid.uuid4().hex}:{event.step}:{event.output_index}"
        record = self.adapter.record(state.ledger, MESSAGE, streamed=True)
        label = say("stop_button", state.chat.language or agent.chat_policy.default_language)
        return self._live_reply(
            channel_id=state.platform_args.channel_id, reply_to=reply_to, key=key, record=record, stop_label=label
        )

    def _live_reply(
        self,
        *,
        channel_id: int,
        reply_to: int | None,
        key: str,
        record: ReplyRecord | None,
        stop_label: str | None = None,
    ) -> LiveReply:
        sink = _Sink(self, channel_id=channel_id, reply_to=reply_to, key=key, record=record, stop_label=stop_label)
        return LiveReply(sink=sink, split=_split, interval=self.settings.stream_interval, record=record)

    async def deliver(
        self,
        *,
        key: ReplyKey,
        channel_id: int,
        text: str,
        reply_to: int | None,
        idempotency_key: str,
        ledger: ReplyLedger | None = None,
    ) -> list[int]:
        """Deliver an answer: finish its live reply if it was shown while written (``key`` is the output's
        ``(context id, step, index)``), else post it. With a queued run's ``ledger`` the answer is posted
        exactly once across attempts at the batch (``extensions.chat.exactly_once``). An answer with structure that
        was not posted whole (shown while written, or following the ledger) and is one message ends in the
        components v2 layout (``lay_out``). Returns its messages' ids."""
        streamed = self.adapter.live is not None
        whole: list[bool] = []  # (set when the answer was posted whole, laid out where it could be)

        async def post_whole() -> list[int]:
            whole.append(True)
            return await self.post_answer(
                channel_id=channel_id, text=text, reply_to=reply_to, idempotency_key=idempotency_key
            )

        def following(ledger: ReplyLedger) -> LiveReply:  # posted at once, following the ledger as a live reply does
            record = self.adapter.record(ledger, MESSAGE, streamed=streamed)
            return self._live_reply(channel_id=channel_id, reply_to=reply_to, key=idempotency_key, record=record)

        content_log.info("channel %s reply: %s", channel_id, text)
        live = self.adapter.live.get(key) if self.adapter.live is not None else None
        ids = await self.adapter.deliver_with(
            key,
            text,
            ledger=ledger,
            live_reply=following,
            post=post_whole,
        )
        laid_out = False
        if self.settings.components_v2 and not whole and len(ids) == 1:
            laid_out = await self.lay_out(channel_id=channel_id, message_id=ids[0], text=text)
        buttoned = live.sink.buttoned if live is not None and isinstance(live.sink, _Sink) else None
        # delivered: nothing left to stop (beside the run, not in it); a layout replaced the Stop button already
        if buttoned is not None and buttoned in ids and not laid_out:
            self.adapter.spawn(
                self.drop_stop_button(channel_id=channel_id, message_id=buttoned),
                name=f"discord:unbutton:{buttoned}",
                key=idempotency_key,
            )
        log.info(
            "discord: channel %s: replied to message %s (%d characters in %d messages)",
            channel_id,
            reply_to,
            len(text),
            len(ids),
        )
        return ids


@contextlib.asynccontextmanager
async def _traced(operation: str, channel_id: int) -> AsyncIterator[None]:
    """One span per post, edit or deletion with Discord's answer status (discord.py waits out 429s itself, inside
    the span). Nothing while tracing is off."""
    if not tracing.active():
        yield
        return
    with tracing.span(f"discord {operation}", kind="client") as span:
        span.set_attributes(
            {
                "messaging.system": "discord",
                "messaging.operation.name": operation,
                "bots.chat.id": tracing.ident(channel_id),
            }
        )
        try:
            yield
        except Exception as exc:  # discord.py's HTTPException carries the status
            status = getattr(exc, "status", None)
            if isinstance(status, int):
                span.set_attribute("http.response.status_code", status)
            raise
        span.set_attribute("http.response.status_code", 200)
