"""The spoken-replies plugin: when a run answers a voice message, its answer is also posted as a voice message,
spoken by a speech endpoint (``core.media.generate.OpenAISpeech``, ``TTS_*``) or the offline engine
(``core.media.espeak.EspeakSpeech``, ``TTS_ENGINE=espeak``), at most ``max_chars`` characters of it (cut at a word).
A conversation chooses with ``/voice`` (``ChatSettings.voice``): ``on``, every answer is also spoken (a text message's
too); ``off``, none is. The characters spoken are counted in the usage store under ``speech:user:<id>`` and
``speech:chat:<context id>``, and held to their own per-day limits (``chars_per_day_user``, ``chars_per_day_chat``,
``TTS_CHARS_PER_DAY_*``): past one, the answers are text only that day. In a queued run the spoken reply is posted
once per batch (``post_once``). A failure is logged: the text answer is delivered already."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from ..definition_types import Host, Setup
from ..entries import InputRef, Log, OutputRef
from ..plugin import Plugin, RunHooks, RunView
from ..slots import Slot
from ..usage import InMemoryUsage, UsageStore, day_of
from .attachment import AttachmentKind
from .outgoing import Outgoing, OutgoingKind, post_once, posters_of

__all__ = ("Speaker", "SpokenReplies", "speakable", "speaks")

log = logging.getLogger("core.media")


class Speaker(Protocol):
    """What speaks text as OGG/Opus (``OpenAISpeech``)."""

    async def speak(self, text: str) -> bytes:
        """``text`` spoken."""
        ...


_MARKS = str.maketrans({"*": None, "`": None, "#": None, "_": " ", "~": None, ">": None})


def speakable(text: str, max_chars: int) -> str:
    """``text`` as it is read aloud: without Markdown's marks, at most ``max_chars`` characters, cut at a word."""
    plain = " ".join(text.translate(_MARKS).split())
    if len(plain) <= max_chars:
        return plain
    cut = plain[: max_chars - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars // 2 else cut).rstrip(" ,;:") + "…"


_SPOKEN: Slot[SpokenReplies] = Slot("spoken replies")


def speaks(agent: Host) -> bool:
    """True when ``agent`` can speak its answers (it has the ``SpokenReplies`` plugin: ``/voice`` has a meaning)."""
    return agent.provided(_SPOKEN) is not None


class SpokenReplies(Plugin):
    """Speaks the answer to a voice message with ``speaker``, at most ``max_chars`` characters, counted in
    ``usage``."""

    name = "spoken-replies"

    def __init__(
        self,
        speaker: Speaker,
        *,
        usage: UsageStore | None = None,
        max_chars: int = 1000,
        chars_per_day_user: int = 0,
        chars_per_day_chat: int = 0,
    ) -> None:
        self.speaker = speaker
        """What speaks."""
        self.usage: UsageStore = usage if usage is not None else InMemoryUsage()
        """Where the characters spoken are counted."""
        self.max_chars = max_chars
        """Characters of an answer spoken at most (``TTS_MAX_CHARS``)."""
        self.chars_per_day_user = chars_per_day_user
        """Characters spoken to one person per UTC day at most (0: no limit; ``TTS_CHARS_PER_DAY_USER``)."""
        self.chars_per_day_chat = chars_per_day_chat
        """Characters spoken in one conversation per UTC day at most (0: no limit; ``TTS_CHARS_PER_DAY_CHAT``)."""

    async def allowed(self, *, user: str | None, conversation: str, chars: int) -> bool:
        """Whether speaking ``chars`` more characters for ``user`` in ``conversation`` today stays within the
        per-day limits (a store that cannot be read: no, the answer is text only)."""
        day = day_of()
        for key, limit in (
            (f"speech:user:{user}", self.chars_per_day_user),
            (f"speech:chat:{conversation}", self.chars_per_day_chat),
        ):
            if not limit or (key.startswith("speech:user:") and user is None):
                continue
            try:
                spent = (await self.usage.totals(key, [day])).output_tokens
            except Exception as exc:
                log.warning("could not read the speech spent under %s (%s): the answer is text only", key, exc)
                return False
            if spent + chars > limit:
                return False
        return True

    def attach(self, host: Setup) -> None:
        host.provide(_SPOKEN, self)

    def begin(self, run: RunView) -> RunHooks:
        return _Speak(self, run)


class _Speak(RunHooks):
    __slots__ = ("plugin", "run", "voice")

    def __init__(self, plugin: SpokenReplies, run: RunView) -> None:
        self.plugin = plugin
        self.run = run
        self.voice = False
        """An input of this run was a voice message."""

    def joined(self, ref: InputRef) -> None:
        if any(a.kind is AttachmentKind.AUDIO for a in ref.attachments):
            self.voice = True

    async def ended(self, chain: Sequence[Log]) -> None:
        run = self.run
        state, host = run.state, run.host
        chosen = state.chat.voice  # /voice: on, off, or None (the answers to voice messages)
        if chosen == "off" or not (self.voice or chosen == "on"):
            return
        reply_type = posters_of(host).reply_output(state)
        if reply_type is None:
            return
        said = [
            e.data if isinstance(e.data, str) else e.content
            for e in chain
            if isinstance(e, OutputRef) and e.type == reply_type and e.error is None
        ]
        text = speakable("\n".join(s for s in said if s), self.plugin.max_chars)
        if not text:
            return
        if not await self.plugin.allowed(user=run.asker, conversation=state.id, chars=len(text)):
            log.info("%s: the day's speech limit is reached: the answer is text only", state.id)
            run.observe("speech_limited")
            return
        speaker = self.plugin.speaker

        async def make(_key: str | None) -> Outgoing:
            data = await speaker.speak(text)
            return Outgoing(kind=OutgoingKind.VOICE, data=data, mime="audio/ogg", name="reply.ogg")

        try:
            where = await post_once(host, state, kind=OutgoingKind.VOICE, asked=text, make=make)
        except Exception as exc:
            log.warning("could not post the spoken reply in %s: %s", state.id, exc)
            run.observe("speech_failed")
            return
        if where is None:  # (an earlier attempt at the batch posted it, and counted it)
            return
        run.observe("speech_chars", len(text))
        keys = [f"speech:chat:{state.id}"]
        if run.asker is not None:
            keys.insert(0, f"speech:user:{run.asker}")
        try:
            await self.plugin.usage.add(day=day_of(), keys=keys, input_tokens=0, output_tokens=len(text), cost=0)
        except Exception:
            log.exception("could not count the speech of %s", state.id)
