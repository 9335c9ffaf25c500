"""One OpenAI-compatible server other than the chat model's (embeddings, speech to text, pictures, speech), built
the same way for each: the SDK imported when it is built, a server on this machine reached directly whatever
HTTP(S)_PROXY says, the key a secret (never in ``repr``, redacted from the server's own messages), and failures told
as ``ModelError`` naming the settings to check (``<PREFIX>_API_KEY``, ``_MODEL``, ``_BASE_URL``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..errors import ConfigError, ModelAuthError, ModelError
from .openai_compat import is_loopback
from .retry import redact, safe_url

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ("OpenAIEndpoint",)


class OpenAIEndpoint:
    """One OpenAI-compatible server, its key (a secret) and how its failures are told."""

    prefix: ClassVar[str] = ""
    """The settings' prefix (``IMAGES``), named in errors."""
    max_retries: ClassVar[int] = 2
    """Retries of a failed request by the SDK."""

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
        # a server on this machine is reached directly, whatever HTTP(S)_PROXY says
        http_client = openai.DefaultAsyncHttpxClient(trust_env=False) if is_loopback(base_url) else None
        self._client: AsyncOpenAI = openai.AsyncOpenAI(
            api_key=api_key or "no-key",
            base_url=base_url,
            timeout=timeout,
            max_retries=self.max_retries,
            http_client=http_client,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={safe_url(self.base_url)!r})"

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    def _failed(self, exc: Exception, where: str) -> ModelError:
        """The error to raise for the SDK's ``exc`` from ``where`` (a refused key: ``ModelAuthError``)."""
        import openai

        p = self.prefix
        if isinstance(exc, openai.AuthenticationError):
            return ModelAuthError(f"{where} refused {p}_API_KEY: check the key")
        if isinstance(exc, openai.APIStatusError):
            detail = redact(str(exc.message), self._secret)[:200]
            return ModelError(f"{where} answered {exc.status_code}: {detail}; check {p}_MODEL and {p}_BASE_URL")
        return ModelError(f"cannot reach {where}: check {p}_BASE_URL ({type(exc).__name__})")
