"""The offline speech engine (``TTS_ENGINE=espeak``): Debian's ``espeak-ng``, whose voices ship with the package,
speaks the text as WAV, and ``opusenc`` (Debian's ``opus-tools``) or, without it, ``ffmpeg`` turns it into the
OGG/Opus a voice message is. Nothing leaves the machine and no key is needed.

The text reaches ``espeak-ng`` on its standard input, never as an argument (a reply starting with ``-`` is no
option), as plain text (no SSML: ``-m`` is not given). Each program runs with a deadline and is killed past it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Sequence

from ..errors import ConfigError, ModelError

__all__ = ("ESPEAK", "EspeakSpeech")

ESPEAK = "espeak-ng"
"""The speech program (Debian's ``espeak-ng``)."""

_MISSING = "TTS_ENGINE=espeak needs Debian's espeak-ng and opus-tools (or ffmpeg): apt-get install espeak-ng opus-tools"


class EspeakSpeech:
    """Speaks text as OGG/Opus with ``espeak-ng`` (voice ``voice``, ``speed`` words a minute) and ``opusenc`` (or
    ``ffmpeg``). ``ConfigError`` at construction when the programs are missing."""

    def __init__(self, *, voice: str = "en", speed: int = 160, timeout: float = 30.0) -> None:
        espeak = shutil.which(ESPEAK)
        encoder = shutil.which("opusenc") or shutil.which("ffmpeg")
        if espeak is None or encoder is None:
            raise ConfigError(_MISSING)
        if not voice or not all(c.isalnum() or c in "-_+/" for c in voice) or voice.startswith("-"):
            raise ConfigError(f"TTS_VOICE={voice[:40]!r} is not an espeak-ng voice name (for example en, en-us, fr)")
        self.voice = voice
        """The espeak-ng voice (``TTS_VOICE``: ``en``, ``fr``, ``en-us``...; ``espeak-ng --voices`` lists them)."""
        self.speed = speed
        """Words a minute."""
        self.timeout = timeout
        """Seconds speaking one answer may take."""
        self._espeak = espeak
        self._encoder = encoder

    def __repr__(self) -> str:
        return f"EspeakSpeech(voice={self.voice!r}, encoder={self._encoder.rsplit('/', 1)[-1]!r})"

    def _encode_args(self) -> list[str]:
        if self._encoder.endswith("opusenc"):
            return [self._encoder, "--quiet", "--speech", "--bitrate", "32", "-", "-"]
        ffmpeg = ["-nostdin", "-loglevel", "error", "-i", "pipe:0", "-c:a", "libopus", "-b:a", "32k", "-f", "ogg"]
        return [self._encoder, *ffmpeg, "pipe:1"]

    async def speak(self, text: str) -> bytes:
        """``text`` spoken, as OGG/Opus bytes; ``ModelError`` when a program fails or takes too long."""
        try:
            async with asyncio.timeout(self.timeout):
                wav = await _run([self._espeak, "-v", self.voice, "-s", str(self.speed), "--stdin", "--stdout"], text)
                data = await _run(self._encode_args(), wav)
        except TimeoutError:
            raise ModelError(f"the offline speech engine took over {self.timeout:g}s: shorten TTS_MAX_CHARS") from None
        if not data.startswith(b"OggS"):
            raise ModelError("the offline speech engine made no OGG/Opus audio: check TTS_VOICE")
        return data

    async def aclose(self) -> None:
        """Nothing to close (each answer runs its own programs)."""


async def _run(args: Sequence[str], given: str | bytes) -> bytes:
    """Run ``args`` with ``given`` on its standard input; its output, or ``ModelError`` naming the program."""
    data = given.encode() if isinstance(given, str) else given
    name = args[0].rsplit("/", 1)[-1]
    process = await asyncio.create_subprocess_exec(
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await process.communicate(data)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise
    if process.returncode != 0:
        detail = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise ModelError(f"the offline speech engine failed ({name} exited {process.returncode}: {detail[0][:200]})")
    return out
