"""Pictures and speech made by OpenAI-compatible endpoints: ``POST {base}/images/generations`` (``IMAGES_*``; the
picture comes back in the JSON as base64) and ``POST {base}/audio/speech`` (``TTS_*``; OGG/Opus bytes). The SDK
is imported when a client is built; the key is never logged nor shown in an error."""

from __future__ import annotations

import base64
import binascii

from ..errors import ModelError
from ..models.openai_endpoint import OpenAIEndpoint
from ..models.retry import safe_url
from .reader import sniff_image

__all__ = ("OpenAIImages", "OpenAISpeech")


class OpenAIImages(OpenAIEndpoint):
    """Makes pictures with ``POST {base_url}/images/generations`` (``IMAGES_*`` settings)."""

    prefix = "IMAGES"
    max_retries = 1

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


class OpenAISpeech(OpenAIEndpoint):
    """Speaks text with ``POST {base_url}/audio/speech`` as OGG/Opus (``TTS_*`` settings)."""

    prefix = "TTS"
    max_retries = 1

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
