"""Embeddings for the knowledge base: any OpenAI-compatible ``/embeddings`` endpoint (``KNOWLEDGE_EMBED_*``).
Optional: without a model, a search is full-text alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from ..errors import BotError, ConfigError, ModelAuthError, ModelError
from ..models.openai_compat import is_loopback
from ..models.retry import redact, safe_url

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ("BATCH", "Embedder", "OpenAIEmbedder")

BATCH = 64
"""Texts sent in one request at most."""


class Embedder(Protocol):
    """Turns texts into vectors (the same model for the passages and the questions)."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; ``ModelError`` on failure."""
        ...

    async def aclose(self) -> None:
        """Release its connections."""
        ...


class OpenAIEmbedder:
    """Vectors from ``POST {base_url}/embeddings``."""

    def __init__(self, *, base_url: str, model: str, api_key: str | None = None, timeout: float = 30.0) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - openai is a base dependency
            raise ConfigError("KNOWLEDGE_EMBED_BASE_URL needs the openai package: run pip install openai") from exc
        self.base_url = base_url
        """The server (``KNOWLEDGE_EMBED_BASE_URL``)."""
        self.model = model
        """The model name (``KNOWLEDGE_EMBED_MODEL``)."""
        self._secret = api_key
        http_client = openai.DefaultAsyncHttpxClient(trust_env=False) if is_loopback(base_url) else None
        self._client: AsyncOpenAI = openai.AsyncOpenAI(
            api_key=api_key or "no-key", base_url=base_url, timeout=timeout, max_retries=2, http_client=http_client
        )

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, base_url={safe_url(self.base_url)!r})"

    async def aclose(self) -> None:
        await self._client.close()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import openai

        where = f"the embeddings server at {safe_url(self.base_url)}"
        found: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            try:
                batch = list(texts[start : start + BATCH])
                result = await self._client.embeddings.create(model=self.model, input=batch)
            # the server's own error may repeat the key: it is neither chained nor shown (redacted)
            except openai.AuthenticationError:
                raise ModelAuthError(f"{where} refused KNOWLEDGE_EMBED_API_KEY: check the key") from None
            except openai.APIStatusError as exc:
                detail = redact(str(exc.message), self._secret)[:200]
                raise ModelError(
                    f"{where} answered {exc.status_code}: {detail}; check KNOWLEDGE_EMBED_MODEL and "
                    "KNOWLEDGE_EMBED_BASE_URL"
                ) from None
            except openai.APIError as exc:
                raise ModelError(
                    f"cannot reach {where}: check KNOWLEDGE_EMBED_BASE_URL ({type(exc).__name__})"
                ) from exc
            except BotError:
                raise
            found.extend(list(item.embedding) for item in sorted(result.data, key=lambda item: item.index))
        return found
