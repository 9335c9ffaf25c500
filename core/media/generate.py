"""Pictures and speech made by OpenAI-compatible endpoints: ``POST {base}/images/generations`` (``IMAGES_*``; the
picture comes back in the JSON as base64) and ``POST {base}/audio/speech`` (``TTS_*``; OGG/Opus bytes). The SDK
is imported when a client is built; the key is never logged nor shown in an error."""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from ..errors import ConfigError, ModelAuthError, ModelError
from ..models.openai_compat import is_loopback
from ..models.retry import redact, safe_url
from .reader import sniff_image

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ("OpenAIImages", "OpenAISpeech")


class _Endpoint:
    """One OpenAI-compatible server, its key (a secret) and how its failures are told."""

    prefix = ""
    """The settings' prefix (``IMAGES``), named in errors."""

    def __init__(self, *, base_url: str, model: str, api_key: str | None, timeout: float) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - openai is a base dependency
            raise ConfigError(f"{self.prefix}_BASE_URL needs the openai package: run pip install openai") from exc
        self.base_url = base_url
        """The server (``*_BASE_URL``)."""
        self.model = model
        """The model name (``*_MODEL``)."""
        self._secret = api_key
        http_client = openai.DefaultAsyncHttpxClient(trust_env=False) if is_loopback(base_url) else None
        self._client: AsyncOpenAI = openai.AsyncOpenAI(
            api_key=api_key or "no-key", base_url=base_url, timeout=timeout, max_retries=1, http_client=http_client
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={safe_url(self.base_url)!r})"

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    def _failed(self, exc: Exception, where: str) -> ModelError:
        import openai

        p = self.prefix
        if isinstance(exc, openai.AuthenticationError):
            return ModelAuthError(f"{where} refused {p}_API_KEY: check the key")
        if isinstance(exc, openai.APIStatusError):
            detail = redact(str(exc.message), self._secret)[:200]
            return ModelError(f"{where} answered {exc.status_code}: {detail}; check {p}_MODEL and {p}_BASE_URL")
        return ModelError(f"cannot reach {where}: check {p}_BASE_URL ({type(exc).__name__})")


class OpenAIImages(_Endpoint):
    """Makes pictures with ``POST {base_url}/images/generations`` (``IMAGES_*`` settings)."""

    prefix = "IMAGES"

    def __init__(
        self,
        *,
        base_url: str,
        model: str = "gpt-image-1",
        api_key: str | None = None,
        size: str = "1024x1024",
        timeout: float = 120.0,
    ) -> None:
        super().__init__(base_url=base_url, model=model, api_key=api_key, timeout=timeout)
        self.size = size
        """The picture's size (``IMAGES_SIZE``)."""

    async def make(self, prompt: str) -> tuple[bytes, str]:
        """One picture for ``prompt``: its bytes and type (``image/png``); ``ModelError`` on failure."""
        import openai

        where = f"the image server at {safe_url(self.base_url)}"
        try:
            result = await self._client.images.generate(
                model=self.model, prompt=prompt, n=1, size=self.size, response_format="b64_json"
            )
        except openai.APIError as exc:
            raise self._failed(exc, where) from exc
        items = getattr(result, "data", None) or []
        encoded = getattr(items[0], "b64_json", None) if items else None
        if not encoded:
            raise ModelError(f"{where} answered without a picture (b64_json): check IMAGES_MODEL")
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ModelError(f"{where} answered a picture that is not base64") from exc
        mime = sniff_image(data)
        if mime is None:
            raise ModelError(f"{where} answered bytes that are not a JPEG, PNG, GIF or WebP picture")
        return data, mime


class OpenAISpeech(_Endpoint):
    """Speaks text with ``POST {base_url}/audio/speech`` as OGG/Opus (``TTS_*`` settings)."""

    prefix = "TTS"

    def __init__(
        self,
        *,
        base_url: str,
        model: str = "gpt-4o-mini-tts",
        voice: str = "alloy",
        api_key: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        super().__init__(base_url=base_url, model=model, api_key=api_key, timeout=timeout)
        self.voice = voice
        """The voice (``TTS_VOICE``)."""

    async def speak(self, text: str) -> bytes:
        """``text`` spoken, as OGG/Opus bytes; ``ModelError`` on failure."""
        import openai

        where = f"the speech server at {safe_url(self.base_url)}"
        try:
            response = await self._client.audio.speech.create(
                model=self.model, voice=self.voice, input=text, response_format="opus"
            )
        except openai.APIError as exc:
            raise self._failed(exc, where) from exc
        data = response.content
        if not data.startswith(b"OggS"):
            raise ModelError(f"{where} answered audio that is not OGG/Opus: check TTS_MODEL and TTS_BASE_URL")
        return data
