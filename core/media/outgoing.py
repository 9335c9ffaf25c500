"""What the bot sends besides text: a picture it made, a spoken reply. An ``Outgoing`` holds the bytes; each
platform posts it its own way (``MediaPoster``: a Telegram photo or voice message, a Discord file, an element of the
web chat, a file the terminal names), registered with the agent by context type (``media_posters``).

In a queued run (a fleet's worker) ``post_once`` makes and posts it exactly once per batch, like a text reply
(``core.reply_ledger``): its ledger entry is taken before it is made, its intent recorded before it is posted and
its place after; a batch run again after a crash finds it posted (or in doubt: its intent recorded, its outcome
not) and neither makes nor posts it again, since a picture shown twice is worse than one missing."""

from __future__ import annotations

import enum
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import PlatformError
from ..slots import Slot

if TYPE_CHECKING:
    from ..definition_types import ContextState, Host, Setup

__all__ = (
    "MediaPoster",
    "MediaPosters",
    "Outgoing",
    "OutgoingKind",
    "media_posters",
    "post_media",
    "post_once",
    "posters_of",
)

log = logging.getLogger("core.media")


class OutgoingKind(enum.StrEnum):
    """What the bot sends."""

    PICTURE = "picture"
    """A picture (Telegram ``sendPhoto``, a Discord image file, an ``<img>`` in the web chat)."""
    VOICE = "voice"
    """A spoken reply, OGG/Opus (Telegram ``sendVoice``, a Discord ``.ogg`` file, an ``<audio>`` in the web chat)."""


@dataclass(frozen=True, kw_only=True)
class Outgoing:
    """One picture or voice message to post in a conversation."""

    kind: OutgoingKind
    """A picture or a voice message."""
    data: bytes
    """The bytes."""
    mime: str
    """Their type: ``image/png``, ``audio/ogg``."""
    name: str
    """A file name for the platforms that show one (``picture.png``)."""
    caption: str = ""
    """Text shown with it (untrusted: the model's words, escaped by each platform)."""


class MediaPoster(Protocol):
    """A platform's way of posting an ``Outgoing`` in one of its conversations."""

    async def post_media(self, state: ContextState[Any], item: Outgoing) -> str:
        """Post ``item`` in the conversation of ``state`` (as a reply to the message the run answers, where the
        platform threads replies); return where it went (a message id, a file path). ``PlatformError`` on failure."""
        ...


class MediaPosters:
    """The posters of an agent's platforms, by the type of the context each serves (``telegram:chat``)."""

    def __init__(self) -> None:
        self._by_type: dict[str, tuple[MediaPoster, str]] = {}

    def add(self, context_type: str, poster: MediaPoster, *, reply_output: str) -> Callable[[], None]:
        """Post the media of ``context_type``'s conversations with ``poster``; ``reply_output`` is the output type
        its answers are (``telegram:message``: what a spoken reply speaks). Returns what takes it back."""
        entry = (poster, reply_output)
        self._by_type[context_type] = entry

        def remove() -> None:
            if self._by_type.get(context_type) is entry:
                del self._by_type[context_type]

        return remove

    def of(self, state: ContextState[Any]) -> MediaPoster | None:
        """The poster of the conversation of ``state`` (a bot's context laid over a platform's has its type)."""
        entry = self._by_type.get(state.context.type)
        return entry[0] if entry is not None else None

    def reply_output(self, state: ContextState[Any]) -> str | None:
        """The output type of the answers in the conversation of ``state``, where media can be posted."""
        entry = self._by_type.get(state.context.type)
        return entry[1] if entry is not None else None


_POSTERS: Slot[MediaPosters] = Slot("media posters")


def media_posters(agent: Setup) -> MediaPosters:
    """The media posters of ``agent`` (made the first time a platform registers one)."""
    posters = agent.provided(_POSTERS)
    if posters is None:
        posters = MediaPosters()
        agent.provide(_POSTERS, posters)
    return posters


def posters_of(agent: Host) -> MediaPosters:
    """The media posters of ``agent`` as a handler reads them (none registered: an empty set)."""
    found = agent.provided(_POSTERS)
    return found if found is not None else MediaPosters()


async def post_media(agent: Host, state: ContextState[Any], item: Outgoing) -> str:
    """Post ``item`` in the conversation of ``state``; ``PlatformError`` when its platform posts no media."""
    poster = posters_of(agent).of(state)
    if poster is None:
        raise PlatformError(
            f"{state.context.type} conversations cannot show a {item.kind.value}: that platform posts no media"
        )
    return await poster.post_media(state, item)


async def post_once(
    agent: Host,
    state: ContextState[Any],
    *,
    kind: OutgoingKind,
    asked: str,
    make: Callable[[str | None], Awaitable[Outgoing]],
) -> str | None:
    """Make (``make``) and post a picture or a spoken reply in the conversation of ``state``, once per batch in a
    queued run. ``asked``: what it was made from (a picture's prompt, the text spoken), which names its ledger
    entry with ``kind``; ``make`` is given that entry's key (stable across the attempts at the batch: the id under
    which a per-day limit counts it), or None outside a queued run. Returns where it went, or None when an earlier
    attempt at the batch posted it (or may have). Raises what ``make`` and the poster raise, and the ledger's
    ``DispatchError`` once this worker no longer answers the batch."""
    ledger = state.ledger
    if ledger is None:
        return await post_media(agent, state, await make(None))
    name = f"{kind.value}.{hashlib.sha256(asked.encode()).hexdigest()[:20]}"
    begin_named = getattr(ledger, "begin_named", None)
    what = f"media:{kind.value}"
    slot = await (begin_named(what, name, name) if begin_named is not None else ledger.begin(what, name))
    if slot.done or slot.pending is not None:
        log.info("the %s %s was posted (or tried) by an earlier attempt: not posted again", kind.value, slot.key)
        return None
    item = await make(slot.key)
    slot.pending, slot.pending_text = 0, item.name
    await ledger.posted(slot, None, done=False)  # the intent, before the post: a crash now leaves it in doubt
    where = await post_media(agent, state, item)
    slot.pending = None
    await ledger.posted(slot, where, done=True)
    return where
