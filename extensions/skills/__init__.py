"""Skills: folders with a ``SKILL.md`` that add an ability without Python (``extensions.skills.skill``), installed
and pinned by hash (``bots skills add``, ``extensions.skills.install``) and offered to the model as actions, their
scripts behind the trust tiers and approvals (``extensions.skills.toolset``)."""

from .install import Installed, add_skill, remove_skill
from .settings import SkillsSettings
from .skill import Skill, SkillError, installed_skills, read_skill, tree_hash
from .toolset import SKILL_PREFIX, SkillToolset, run_script

__all__ = (
    "SKILL_PREFIX",
    "Installed",
    "Skill",
    "SkillError",
    "SkillToolset",
    "SkillsSettings",
    "add_skill",
    "installed_skills",
    "read_skill",
    "remove_skill",
    "run_script",
    "tree_hash",
)
