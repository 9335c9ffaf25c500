"""Operator settings of skills (``SKILLS_*``). Importing this needs nothing beyond pydantic."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

__all__ = ("SkillsSettings",)


class SkillsSettings(BaseModel):
    """``SKILLS_*``: folders with a ``SKILL.md`` that add an ability (``bots skills add``)."""

    dir: Path | None = Field(
        default=None,
        description="Folder of the installed skills (one folder each) and of skills.lock, their pinned hashes "
        "(default: BOT_DATA_DIR/skills)",
    )
    enabled: bool = Field(default=True, description="Offer the installed skills to the model (false: none)")
    timeout: float = Field(default=30.0, gt=0, le=600, description="Seconds a skill's script may run")
    max_output_chars: int = Field(
        default=4000, ge=100, le=200_000, description="Characters of a script's output the model reads at most"
    )

    def root(self, data_dir: Path) -> Path:
        """The folder of the installed skills: ``dir``, else ``data_dir/skills``."""
        return self.dir if self.dir is not None else data_dir / "skills"
