"""``SANDBOX_*``: the ``run_code`` action, a short program run under bubblewrap (``core.sandbox``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode

from .setting_values import comma_separated

__all__ = ("SandboxSettings",)


class SandboxSettings(BaseModel):
    """``SANDBOX_*``: programs the model writes, run with no network, none of the bot's files and hard limits."""

    enabled: bool = Field(
        default=False,
        description="Offer the run_code action (plugins.sandbox()) where bubblewrap works; `bots config` says why "
        "it is not offered otherwise",
    )
    tiers: Annotated[tuple[Literal["owner", "admin", "member", "guest", "bot"], ...], NoDecode] = Field(
        default=("owner",),
        description="The trust tiers offered run_code (comma-separated); a run acts with the least trusted author "
        "of its messages",
    )
    timeout: float = Field(default=10.0, gt=0, le=300, description="Seconds a program may run before it is killed")
    memory_mb: int = Field(default=256, ge=16, le=16_384, description="Memory a program may take, MB")
    processes: int = Field(default=32, ge=1, le=4096, description="Processes and threads a program may have")
    output_kb: int = Field(default=64, ge=1, le=10_240, description="Output a program may write, KB; then killed")
    folder_mb: int = Field(default=16, ge=1, le=4096, description="Size of its /sandbox and /tmp folders, MB each")
    bwrap: str = Field(default="bwrap", description="The bubblewrap program (a name on PATH or a path)")

    @field_validator("tiers", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return comma_separated(value)
