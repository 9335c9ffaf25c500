"""What the bot writes in Matrix, through matrix-nio: messages (in a thread, quoting the message answered), edits
of an answer being written (``m.replace``), redactions, pictures (uploaded, then ``m.image``) and "typing...".

Matrix's errors become ours here (``translate``): a refusal to post (``M_FORBIDDEN``: the bot was removed from
the room or may not write there) is a ``ChatGoneError``, anything else a ``PlatformError``.
"""

from __future__ import annotations

import io
import logging
from html import escape
from typing import Any

from markdown_it import MarkdownIt
from nio import (
    AsyncClient,
    ErrorResponse,
    RoomGetEventResponse,
    RoomRedactResponse,
    RoomSendResponse,
    UploadResponse,
)

from core.errors import ChatGoneError, PlatformError

from ..chat.split import split_message
from .definitions import RoomArgs

__all__ = ("MESSAGE_LIMIT", "MatrixSink", "Poster", "formatted", "pieces", "relation", "translate")

log = logging.getLogger("extensions.matrix")
content_log = logging.getLogger("content.matrix")

MESSAGE_LIMIT = 4_000
"""Characters in one message: an event holds 65,536 bytes of JSON, and a character may take six there (a control
character escaped as ``\\u0000``), so 4,000 fit with the envelope and an edit's two copies of the text."""
_GONE = frozenset({"M_FORBIDDEN", "M_NOT_FOUND"})
"""Error codes that mean the bot may no longer post in the room."""


_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])
"""CommonMark with strikethrough and tables; raw HTML in the text is escaped, never passed on."""


def formatted(text: str) -> dict[str, str]:
    """The HTML body of ``text`` read as Markdown (``format``, ``formatted_body``), for clients that show it; empty
    when it is plain text (one paragraph with no markup): its ``body`` says it all."""
    html = _MARKDOWN.render(text).strip()
    if html == f"<p>{escape(text.strip(), quote=False)}</p>":
        return {}
    return {"format": "org.matrix.custom.html", "formatted_body": html}


def pieces(text: str) -> list[str]:
    """``text`` cut into messages (``MESSAGE_LIMIT``), on safe boundaries."""
    return split_message(text, MESSAGE_LIMIT)


def translate(error: ErrorResponse, *, doing: str, room_id: str) -> PlatformError:
    """Our error for one matrix-nio returned, saying what happened (never the access token)."""
    code = error.status_code or "no error code"
    message = f"Matrix refused to {doing} in room {room_id}: {code} {error.message or ''}".rstrip()
    if error.status_code in _GONE:
        return ChatGoneError(message + " (the bot was removed from the room or may not write there)")
    if error.status_code == "M_LIMIT_EXCEEDED":
        return PlatformError(message + " (rate limited: the homeserver's limits are lower than the bot's traffic)")
    return PlatformError(message)


def relation(args: RoomArgs, reply_to: str | None) -> dict[str, Any] | None:
    """The ``m.relates_to`` of a message posted in the conversation ``args``: in its thread (quoting
    ``reply_to`` there), or a reply to ``reply_to`` in the room; None for neither."""
    if args.thread_id is not None:
        return {
            "rel_type": "m.thread",
            "event_id": args.thread_id,
            "is_falling_back": reply_to is None,
            "m.in_reply_to": {"event_id": reply_to or args.thread_id},
        }
    if reply_to is not None:
        return {"m.in_reply_to": {"event_id": reply_to}}
    return None


class Poster:
    """Posts in the rooms of one bot account (``client``: matrix-nio's, logged in)."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    async def _send(self, room_id: str, content: dict[str, Any], *, doing: str) -> str:
        answer = await self.client.room_send(room_id, "m.room.message", content, ignore_unverified_devices=True)
        if isinstance(answer, RoomSendResponse):
            return str(answer.event_id)
        assert isinstance(answer, ErrorResponse)
        raise translate(answer, doing=doing, room_id=room_id)

    async def post(
        self,
        args: RoomArgs,
        text: str,
        *,
        reply_to: str | None,
        notice: bool = False,
        extra: dict[str, Any] | None = None,
    ) -> str:
        """Post one message (already cut to fit) in the conversation ``args``; returns its event id. A notice
        (``m.notice``: the bot's own messages, no answer) is what other bots do not answer; ``extra``: more
        content fields (an approval request's id)."""
        content: dict[str, Any] = {"msgtype": "m.notice" if notice else "m.text", "body": text}
        if not notice:  # (the bot's own notices are plain text)
            content.update(formatted(text))
        content.update(extra or {})
        related = relation(args, reply_to)
        if related is not None:
            content["m.relates_to"] = related
        content_log.info("room %s reply: %s", args.room_id, text)
        return await self._send(args.room_id, content, doing="post a message")

    async def post_all(self, args: RoomArgs, text: str, *, reply_to: str | None, notice: bool = False) -> list[str]:
        """Post ``text`` cut into messages, the first quoting ``reply_to``; returns their event ids."""
        sent: list[str] = []
        for piece in pieces(text):
            sent.append(await self.post(args, piece, reply_to=reply_to if not sent else None, notice=notice))
        return sent

    async def edit(self, room_id: str, event_id: str, text: str, *, notice: bool = False) -> None:
        """Make the message ``event_id`` show ``text`` (an ``m.replace`` edit; ``notice``: of one of the bot's
        notices, kept plain text)."""
        msgtype = "m.notice" if notice else "m.text"
        content = {
            "msgtype": msgtype,
            "body": f"* {text}",
            "m.new_content": {"msgtype": msgtype, "body": text, **({} if notice else formatted(text))},
            "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
        }
        await self._send(room_id, content, doing="edit a message")

    async def redact(self, room_id: str, event_id: str, *, reason: str | None = None) -> None:
        """Delete (redact) the bot's message ``event_id``."""
        answer = await self.client.room_redact(room_id, event_id, reason=reason)
        if not isinstance(answer, RoomRedactResponse):
            assert isinstance(answer, ErrorResponse)
            raise translate(answer, doing="delete a message", room_id=room_id)

    async def post_file(
        self, args: RoomArgs, data: bytes, *, mime: str, name: str, msgtype: str, caption: str, reply_to: str | None
    ) -> str:
        """Upload ``data`` to the homeserver's media repository, then post it as ``msgtype`` (``m.image``,
        ``m.audio``) in the conversation ``args``; returns the event id."""
        answer, _ = await self.client.upload(io.BytesIO(data), content_type=mime, filename=name, filesize=len(data))
        if not isinstance(answer, UploadResponse):
            assert isinstance(answer, ErrorResponse)
            raise translate(answer, doing="upload a file", room_id=args.room_id)
        content: dict[str, Any] = {
            "msgtype": msgtype,
            "body": caption or name,
            "filename": name,
            "url": answer.content_uri,
            "info": {"mimetype": mime, "size": len(data)},
        }
        related = relation(args, reply_to)
        if related is not None:
            content["m.relates_to"] = related
        return await self._send(args.room_id, content, doing=f"post {name}")

    async def typing(self, room_id: str, *, seconds: float) -> None:
        """Show "typing..." in the room for ``seconds`` (best effort: a failure is only logged)."""
        answer = await self.client.room_typing(room_id, typing_state=True, timeout=int(seconds * 1000))
        if isinstance(answer, ErrorResponse):
            log.debug("matrix: could not show typing in %s: %s", room_id, answer.status_code)

    async def event(self, room_id: str, event_id: str) -> tuple[str, dict[str, Any]] | None:
        """Who posted the event ``event_id``, and its content (None when the homeserver does not say)."""
        answer = await self.client.room_get_event(room_id, event_id)
        if not isinstance(answer, RoomGetEventResponse):
            return None
        source = answer.event.source if isinstance(answer.event.source, dict) else {}
        content = source.get("content", {})
        return str(answer.event.sender), content if isinstance(content, dict) else {}

    async def sender_of(self, room_id: str, event_id: str) -> str | None:
        """Who posted the event ``event_id`` (None when the homeserver does not say)."""
        found = await self.event(room_id, event_id)
        return found[0] if found is not None else None

    async def react(self, room_id: str, event_id: str, key: str) -> str:
        """React to ``event_id`` with ``key`` (an emoji: an ``m.annotation``); returns the reaction's event id."""
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        answer = await self.client.room_send(room_id, "m.reaction", content)
        if not isinstance(answer, RoomSendResponse):
            assert isinstance(answer, ErrorResponse)
            raise translate(answer, doing="react to a message", room_id=room_id)
        return str(answer.event_id)

    async def download(self, mxc: str) -> bytes:
        """The bytes of the media ``mxc`` (``mxc://server/id``) from the homeserver."""
        answer = await self.client.download(mxc=mxc)
        body = getattr(answer, "body", None)
        if isinstance(body, bytes):
            return body
        code = getattr(answer, "status_code", None) or "no error code"
        raise PlatformError(f"Matrix could not hand over the file {mxc}: {code}")


class MatrixSink:
    """Posts, edits and deletes the messages of one answer in one conversation (``extensions.chat.stream``)."""

    def __init__(self, poster: Poster, args: RoomArgs, *, reply_to: str | None) -> None:
        self.poster = poster
        self.args = args
        self.reply_to = reply_to

    async def post(self, text: str, *, index: int) -> str:
        return await self.poster.post(self.args, text, reply_to=self.reply_to if index == 0 else None)

    async def edit(self, handle: Any, text: str) -> None:
        await self.poster.edit(self.args.room_id, str(handle), text)

    async def delete(self, handle: Any) -> None:
        await self.poster.redact(self.args.room_id, str(handle))
