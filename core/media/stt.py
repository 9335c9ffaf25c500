"""Speech to text through an OpenAI-compatible ``/audio/transcriptions`` endpoint (OpenAI's Whisper, a local
whisper.cpp or faster-whisper server, Groq). The SDK is imported when the transcriber is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import BotError, ConfigError, ModelAuthError, ModelError
from ..models.openai_compat import is_loopback
from ..models.retry import redact, safe_url

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ("OpenAITranscriber",)


class OpenAITranscriber:
    """Transcribes audio with ``POST {base_url}/audio/transcriptions`` (``STT_*`` settings)."""

    def __init__(self, *, base_url: str, model: str = "whisper-1", api_key: str | None = None, timeout: float = 60.0):
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - openai is a base dependency
            raise ConfigError("STT_BASE_URL needs the openai package: run pip install openai") from exc
        self.base_url = base_url
        """The server (``STT_BASE_URL``)."""
        self.model = model
        """The model name (``STT_MODEL``)."""
        self._secret = api_key
        # a server on this machine is reached directly, whatever HTTP(S)_PROXY says
        http_client = openai.DefaultAsyncHttpxClient(trust_env=False) if is_loopback(base_url) else None
        self._client: AsyncOpenAI = openai.AsyncOpenAI(
            api_key=api_key or "no-key", base_url=base_url, timeout=timeout, max_retries=2, http_client=http_client
        )

    def __repr__(self) -> str:
        return f"OpenAITranscriber(model={self.model!r}, base_url={safe_url(self.base_url)!r})"

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    async def transcribe(self, *, data: bytes, name: str, mime: str) -> str:
        """The words spoken in ``data``; ``ModelError`` (``ModelAuthError`` for a refused key) on failure."""
        import openai

        where = f"the speech-to-text server at {safe_url(self.base_url)}"
        try:
            result = await self._client.audio.transcriptions.create(
                model=self.model, file=(name, data, mime or "application/octet-stream")
            )
        except openai.AuthenticationError as exc:
            raise ModelAuthError(f"{where} refused STT_API_KEY: check the key") from exc
        except openai.APIStatusError as exc:
            detail = redact(str(exc.message), self._secret)[:200]
            raise ModelError(f"{where} answered {exc.status_code}: {detail}; check STT_MODEL and STT_BASE_URL") from exc
        except openai.APIError as exc:
            raise ModelError(f"cannot reach {where}: check STT_BASE_URL ({type(exc).__name__})") from exc
        except BotError:
            raise
        text = getattr(result, "text", result)
        return text if isinstance(text, str) else str(text)
