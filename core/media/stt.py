"""Speech to text through an OpenAI-compatible ``/audio/transcriptions`` endpoint (OpenAI's Whisper, a local
whisper.cpp or faster-whisper server, Groq). The SDK is imported when the transcriber is built."""

from __future__ import annotations

from ..errors import BotError
from ..models.openai_endpoint import OpenAIEndpoint
from ..models.retry import safe_url

__all__ = ("OpenAITranscriber",)


class OpenAITranscriber(OpenAIEndpoint):
    """Transcribes audio with ``POST {base_url}/audio/transcriptions`` (``STT_*`` settings)."""

    prefix = "STT"

    def __init__(self, *, base_url: str, model: str = "whisper-1", api_key: str | None = None, timeout: float = 60.0):
        super().__init__(base_url=base_url, model=model, api_key=api_key, timeout=timeout)

    async def transcribe(self, *, data: bytes, name: str, mime: str) -> str:
        """The words spoken in ``data``; ``ModelError`` (``ModelAuthError`` for a refused key) on failure."""
        import openai

        where = f"the speech-to-text server at {safe_url(self.base_url)}"
        try:
            result = await self._client.audio.transcriptions.create(
                model=self.model, file=(name, data, mime or "application/octet-stream")
            )
        except openai.APIError as exc:
            raise self._failed(exc, where) from exc
        except BotError:
            raise
        text = getattr(result, "text", result)
        return text if isinstance(text, str) else str(text)
