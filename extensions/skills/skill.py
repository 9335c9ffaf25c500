"""Skills: a folder with a ``SKILL.md`` that adds an ability, in the format the agent-skills projects share.

A skill folder holds ``SKILL.md`` (YAML front matter with a ``name`` and a ``description``, then the instructions in
Markdown), optional scripts under ``scripts/`` and resources (``references/``, ``assets/`` or anywhere else)::

    greeter/
      SKILL.md          ---\\nname: greeter\\ndescription: Greets people in their language.\\n---\\nInstructions...
      scripts/hello.py
      references/languages.md

Installed skills live in one folder each under ``SKILLS_DIR``, pinned in ``SKILLS_DIR/skills.lock`` by the SHA-256
of their files (``tree_hash``): a skill whose files changed since it was installed is not loaded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ("LOCK_FILE", "Skill", "SkillError", "installed_skills", "read_lock", "read_skill", "tree_hash", "write_lock")

log = logging.getLogger("extensions.skills")

LOCK_FILE = "skills.lock"
"""The file under ``SKILLS_DIR`` pinning each installed skill: its source and the hash of its files."""
_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
_SCRIPT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_IGNORED = {"__pycache__", ".git", ".DS_Store"}
MAX_DESCRIPTION = 1024
"""Characters of a skill's description at most (the format's limit): every description is shown to the model."""
MAX_INSTRUCTIONS = 50_000
"""Characters of a skill's instructions at most."""


class SkillError(ValueError):
    """A skill folder that cannot be used, saying what to fix."""


@dataclass(frozen=True, kw_only=True)
class Skill:
    """One skill, read from its folder."""

    name: str
    """Its name (lowercase letters, digits and hyphens), as the model asks for it."""
    description: str
    """What it does and when to use it: shown to the model with every skill's."""
    instructions: str
    """The body of ``SKILL.md``: read by the model only when it loads the skill."""
    path: Path
    """Its folder."""
    scripts: tuple[str, ...]
    """The file names under ``scripts/`` (each an action behind the trust tiers and approvals)."""
    resources: tuple[str, ...]
    """The other files, relative to the folder (read with ``read_skill_file``)."""

    def script_path(self, script: str) -> Path:
        """The file of ``script`` (one of ``scripts``)."""
        if script not in self.scripts:
            raise SkillError(f"skill {self.name!r} has no script {script!r}")
        return self.path / "scripts" / script


def _files(folder: Path) -> list[Path]:
    """Every regular file under ``folder`` (relative, sorted), caches and version control left out; a symbolic link
    is refused (it could point outside the skill)."""
    found: list[Path] = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part in _IGNORED for part in rel.parts) or path.suffix == ".pyc":
            continue
        if path.is_symlink():
            raise SkillError(f"{rel} in {folder.name} is a symbolic link; a skill holds its own files only")
        if path.is_file():
            found.append(rel)
    return found


def tree_hash(folder: Path) -> str:
    """The SHA-256 of a skill's files: each file's path and content, in path order."""
    digest = hashlib.sha256()
    for rel in _files(folder):
        digest.update(rel.as_posix().encode() + b"\0")
        digest.update(hashlib.sha256((folder / rel).read_bytes()).digest())
    return digest.hexdigest()


def _front_matter(text: str, where: Path) -> tuple[dict[str, Any], str]:
    if not text.startswith("---"):
        raise SkillError(f"{where} must start with YAML front matter (---, name:, description:, ---)")
    _, sep, rest = text.partition("\n")
    head, sep, body = rest.partition("\n---")
    if not sep:
        raise SkillError(f"{where}: the front matter has no closing ---")
    import yaml  # (here: every bots process imports this module through its settings, few read a skill)

    try:
        meta = yaml.safe_load(head)
    except yaml.YAMLError as exc:
        raise SkillError(f"{where}: the front matter is not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise SkillError(f"{where}: the front matter must be a mapping with name and description")
    return meta, body.partition("\n")[2].strip()


def read_skill(folder: Path) -> Skill:
    """The skill in ``folder``; ``SkillError`` saying what to fix when it is not one."""
    manifest = folder / "SKILL.md"
    if not manifest.is_file():
        raise SkillError(f"{folder} has no SKILL.md")
    meta, body = _front_matter(manifest.read_text(encoding="utf-8"), manifest)
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not _NAME.match(name):
        raise SkillError(
            f"{manifest}: name must be 1-64 lowercase letters, digits and hyphens (not at either end), got {name!r}"
        )
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"{manifest}: a description (what the skill does and when to use it) is required")
    if len(description) > MAX_DESCRIPTION:
        raise SkillError(f"{manifest}: the description has {len(description)} characters, at most {MAX_DESCRIPTION}")
    if len(body) > MAX_INSTRUCTIONS:
        raise SkillError(f"{manifest}: the instructions have {len(body)} characters, at most {MAX_INSTRUCTIONS}")
    files = _files(folder)
    scripts = tuple(rel.name for rel in files if rel.parent == Path("scripts"))
    for script in scripts:
        if not _SCRIPT.match(script):
            raise SkillError(f"{folder.name}: script name {script!r} must be letters, digits, _ . - (64 at most)")
    resources = tuple(rel.as_posix() for rel in files if rel != Path("SKILL.md") and rel.parent != Path("scripts"))
    return Skill(
        name=name,
        description=" ".join(description.split()),
        instructions=body,
        path=folder,
        scripts=scripts,
        resources=resources,
    )


def read_lock(root: Path) -> dict[str, dict[str, str]]:
    """The pins of ``root/skills.lock`` by skill name (``source``, ``sha256``); empty when there is none."""
    path = root / LOCK_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise SkillError(f"{path} is not valid JSON ({exc}); reinstall the skills with bots skills add") from None
    skills = data.get("skills") if isinstance(data, dict) else None
    if not isinstance(skills, dict):
        raise SkillError(f"{path} has no skills table; reinstall the skills with bots skills add")
    return {str(k): {str(a): str(b) for a, b in v.items()} for k, v in skills.items() if isinstance(v, dict)}


def write_lock(root: Path, pins: dict[str, dict[str, str]]) -> None:
    """Write ``pins`` to ``root/skills.lock`` (replaced whole, readable by its owner only)."""
    path = root / LOCK_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"version": 1, "skills": dict(sorted(pins.items()))}, indent=2) + "\n")
    tmp.chmod(0o600)
    tmp.replace(path)


def installed_skills(root: Path) -> list[Skill]:
    """The skills installed under ``root`` whose files still hash to their pin, by name. A folder that is not pinned,
    does not match its pin or is not a valid skill is left out with a warning saying why."""
    if not root.is_dir():
        return []
    try:
        pins = read_lock(root)
    except SkillError as exc:
        log.warning("no skill loaded: %s", exc)
        return []
    found: list[Skill] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        pin = pins.get(folder.name)
        try:
            if pin is None:
                raise SkillError("it is not in skills.lock: install it with bots skills add")
            if tree_hash(folder) != pin.get("sha256"):
                raise SkillError("its files changed since it was installed (the hash in skills.lock differs)")
            skill = read_skill(folder)
            if skill.name != folder.name:
                raise SkillError(f"its SKILL.md names it {skill.name!r}")
        except (SkillError, OSError) as exc:
            log.warning("skill %s not loaded: %s", folder.name, exc)
            continue
        found.append(skill)
    return found
