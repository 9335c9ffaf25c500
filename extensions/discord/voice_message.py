"""A spoken reply as Discord's own voice message (the player with its waveform), not a file to download.

Discord shows a message as a voice message when it carries the ``IS_VOICE_MESSAGE`` flag (``1 << 13``), no text,
and one OGG/Opus attachment whose metadata gives ``duration_secs`` and ``waveform`` (base64 of at most 256
amplitudes, 0-255). discord.py 2.7 reads voice messages but does not send them: its ``Messageable.send`` takes no
flags and its ``File`` writes no such metadata. So the message is built with discord.py's own
``handle_message_parameters`` (the flag) and a ``File`` that adds the metadata, and sent with its HTTP client's
``send_message``: the same request, limits and errors as any post. The duration and waveform come from the OGG
stream itself (``core.media.ogg``: the last page's granule position; the packets' sizes, no decoding). Audio whose
duration cannot be read is posted as a plain ``.ogg`` file instead (``VoiceMessage.of`` answers None).
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import Any

from core.media.ogg import ogg_duration, ogg_waveform

from ._lib import discord

__all__ = ("VOICE_FLAG", "VoiceMessage")

VOICE_FLAG = 1 << 13
"""``IS_VOICE_MESSAGE`` among a message's flags."""


class _VoiceFile(discord.File):
    """An attachment with a voice message's metadata."""

    def __init__(self, data: bytes, *, filename: str, duration: float, waveform: bytes) -> None:
        super().__init__(io.BytesIO(data), filename=filename)
        self.duration = duration
        self.waveform = waveform

    def to_dict(self, index: int) -> dict[str, Any]:
        payload: dict[str, Any] = super().to_dict(index)
        payload["duration_secs"] = round(self.duration, 2)
        payload["waveform"] = base64.b64encode(self.waveform).decode("ascii")
        return payload


@dataclass(frozen=True, kw_only=True)
class VoiceMessage:
    """The OGG/Opus bytes of a voice message and what Discord shows of them."""

    data: bytes
    """The audio."""
    duration: float
    """Seconds."""
    waveform: bytes
    """Amplitudes, 0-255."""

    @classmethod
    def of(cls, data: bytes) -> VoiceMessage | None:
        """``data`` as a voice message, or None when it is not OGG/Opus whose duration can be read."""
        duration = ogg_duration(data)
        if duration is None or duration <= 0:
            return None
        return cls(data=data, duration=duration, waveform=ogg_waveform(data) or bytes([128]))

    async def send(self, client: Any, channel_id: int, *, reference: Any = None) -> int:
        """Post it in ``channel_id`` (a reply to ``reference``, a ``discord.MessageReference``) with ``client``'s
        HTTP client; returns the message's id. Raises what discord.py raises for any post."""
        upload = _VoiceFile(self.data, filename="voice-message.ogg", duration=self.duration, waveform=self.waveform)
        flags = discord.MessageFlags._from_value(VOICE_FLAG)
        reference_dict = reference.to_message_reference_dict() if reference is not None else discord.utils.MISSING
        with discord.http.handle_message_parameters(
            file=upload,
            flags=flags,
            allowed_mentions=discord.AllowedMentions.none(),
            message_reference=reference_dict,
        ) as params:
            data = await client.http.send_message(channel_id, params=params)
        return int(data["id"])
