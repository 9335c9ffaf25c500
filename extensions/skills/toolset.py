"""The installed skills as actions: ``use_skill`` (the model loads a skill's instructions when it needs them; every
skill's name and description are in its description), ``read_skill_file`` (a resource of a loaded skill), and one
action per script, ``skill:<skill>:<script>``, offered once its skill is loaded.

A script is an action like any other, so the trust tiers and approvals decide who may run it (its address is its
name; by default a member's call waits for an admin's approval: ``skill:*=member/approve``). It runs with a timeout,
in a temporary folder, with an environment of its own that holds none of the bot's (no token, no key).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from core.definitions import Action, ActionContext, ContextState, Extension, action, extension
from core.entries import ActionResult
from core.errors import RunError

from .settings import SkillsSettings
from .skill import Skill, installed_skills

__all__ = ("SKILL_PREFIX", "SkillToolset", "run_script")

SKILL_PREFIX = "skill:"
"""The start of every script action's name and policy address: ``skill:<skill>:<script>``."""
MAX_RESOURCE_CHARS = 20_000
"""Characters of a resource the model reads at most."""
_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


class UseSkill(BaseModel):
    name: str = Field(description="The skill's name, one of those listed")


class ReadSkillFile(BaseModel):
    skill: str = Field(description="The skill's name (load it with use_skill first)")
    path: str = Field(description="The file, relative to the skill's folder, as use_skill listed it")


class ScriptCall(BaseModel):
    args: list[str] = Field(default_factory=list, max_length=20, description="Command-line arguments, in order")
    stdin: str = Field(default="", max_length=20_000, description="Text given to the script on its standard input")


def _interpreter(path: Path) -> list[str]:
    """How to run the script at ``path``: Python in isolated mode, ``sh``, or the file itself when executable."""
    if path.suffix == ".py":
        return [sys.executable, "-I", "-B", str(path)]
    if path.suffix == ".sh":
        return ["/bin/sh", str(path)]
    if os.access(path, os.X_OK):
        return [str(path)]
    raise RunError(f"{path.name} is neither a .py nor a .sh script nor executable; the skill cannot run it")


def _tail(data: bytes, limit: int) -> str:
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= limit else f"[... {len(text) - limit} characters cut]\n" + text[-limit:]


async def run_script(skill: Skill, script: str, call: ScriptCall, *, timeout: float, max_chars: int) -> dict[str, Any]:
    """Run ``script`` of ``skill`` with ``call``'s arguments: in a fresh temporary folder, an environment with none of
    the bot's variables, its own process group (killed whole at ``timeout``). Returns its exit code and output (each
    cut to ``max_chars``); ``RunError`` when it fails or runs too long."""
    command = [*_interpreter(skill.script_path(script)), *call.args]
    with tempfile.TemporaryDirectory(prefix=f"skill-{skill.name}-") as work:
        env = {
            "PATH": _SAFE_PATH,
            "HOME": work,
            "TMPDIR": work,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "SKILL_DIR": str(skill.path),
        }
        proc = await asyncio.create_subprocess_exec(
            *command,
            cwd=work,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            async with asyncio.timeout(timeout):
                out, err = await proc.communicate(call.stdin.encode())
        except (TimeoutError, asyncio.CancelledError) as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise RunError(f"{skill.name}/{script} ran longer than {timeout:g} s and was stopped") from None
    code = proc.returncode
    if code != 0:
        raise RunError(f"{skill.name}/{script} failed (exit code {code}): {_tail(err, 2000) or _tail(out, 2000)}")
    return {"exit_code": code, "stdout": _tail(out, max_chars), "stderr": _tail(err, max_chars // 4)}


def _loaded(state: ContextState[Any], name: str) -> bool:
    """True when ``use_skill`` loaded ``name`` in the conversation's working memory (its instructions are there)."""
    for log in reversed(state.working_memory.logs):
        if isinstance(log, ActionResult) and log.name == "use_skill" and log.error is None:
            data = log.data
            if isinstance(data, dict) and data.get("skill") == name:
                return True
    return False


class SkillToolset:
    """The skills installed under ``root`` (``SKILLS_DIR``; read when the agent is built), as actions."""

    def __init__(self, settings: SkillsSettings, *, root: Path | None = None) -> None:
        self.settings = settings
        """The ``SKILLS_*`` settings."""
        folder = root if root is not None else settings.root(Path("data"))
        self.skills: dict[str, Skill] = {s.name: s for s in installed_skills(folder)}
        """The usable skills, by name."""

    def _skill(self, name: str) -> Skill:
        skill = self.skills.get(name)
        if skill is None:
            known = ", ".join(sorted(self.skills)) or "none"
            raise RunError(f"no skill {name!r} is installed (installed: {known})")
        return skill

    def actions(self) -> list[Action[Any]]:
        """``use_skill``, ``read_skill_file`` and every script's action (none when no skill is installed)."""
        if not self.skills:
            return []
        listing = "\n".join(f"- {s.name}: {s.description}" for s in self.skills.values())

        def use(args: UseSkill, ctx: ActionContext, agent: Any) -> dict[str, Any]:
            skill = self._skill(args.name)
            return {
                "skill": skill.name,
                "instructions": skill.instructions,
                "scripts": [f"{SKILL_PREFIX}{skill.name}:{s}" for s in skill.scripts],
                "files": list(skill.resources),
            }

        def read(args: ReadSkillFile, ctx: ActionContext, agent: Any) -> str:
            skill = self._skill(args.skill)
            if not _loaded(ctx.state, skill.name):
                raise RunError(f"load the skill first: use_skill {skill.name!r}")
            if args.path not in skill.resources:
                raise RunError(f"{skill.name} has no file {args.path!r}; its files: {', '.join(skill.resources)}")
            text = (skill.path / args.path).read_text(encoding="utf-8", errors="replace")
            return text if len(text) <= MAX_RESOURCE_CHARS else text[:MAX_RESOURCE_CHARS] + "\n[... cut]"

        found: list[Action[Any]] = [
            action(
                name="use_skill",
                description="Load a skill's instructions (and the scripts and files it has) when a request needs it. "
                "Installed skills:\n" + listing,
                schema=UseSkill,
                handler=use,
            ),
            action(
                name="read_skill_file",
                description="Read a file of a loaded skill (one use_skill listed)",
                schema=ReadSkillFile,
                handler=read,
            ),
        ]
        for skill in self.skills.values():
            for script in skill.scripts:
                found.append(self._script_action(skill, script))
        return found

    def _script_action(self, skill: Skill, script: str) -> Action[Any]:
        settings = self.settings

        async def run(args: ScriptCall, ctx: ActionContext, agent: Any) -> dict[str, Any]:
            return await run_script(skill, script, args, timeout=settings.timeout, max_chars=settings.max_output_chars)

        return action(
            name=f"{SKILL_PREFIX}{skill.name}:{script}",
            description=f"Run the script {script} of the skill {skill.name} (as its instructions say)",
            schema=ScriptCall,
            handler=run,
            enabled=lambda state: _loaded(state, skill.name),
            timeout=settings.timeout + 5,
        )

    def extension(self) -> Extension:
        """The extension to give ``create_agent`` (or a bot's plugins, ``bots.plugins.skills``)."""
        return extension(name="skills", actions=self.actions())
