"""A skill folder for the tests: ``greeter``, whose script ``note.py`` writes its arguments to the file named by its
first argument and prints them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from core import ModelRequest, ScriptedModel
from core.testing import updates_of

__all__ = ("SCRIPT", "make_skill", "skill_model")

SCRIPT = "skill:greeter:note.py"
_RESULT = re.compile(r"<action_result [^>]*>(.*?)</action_result>", re.S)


def make_skill(folder: Path, *, name: str = "greeter", description: str = "Greets people warmly.") -> Path:
    """Write a skill folder at ``folder`` and return it."""
    (folder / "scripts").mkdir(parents=True)
    (folder / "references").mkdir()
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n"
        "# Greeter\nWhen someone asks for a greeting, run scripts/note.py with the file and the name.\n"
    )
    (folder / "scripts" / "note.py").write_text(
        "import os, sys\n"
        "path, *words = sys.argv[1:]\n"
        "with open(path, 'a') as f:\n"
        "    f.write(' '.join(words) + '\\n')\n"
        "print('noted:', ' '.join(words), '| secrets seen:', sorted(k for k in os.environ if 'TOKEN' in k))\n"
    )
    (folder / "references" / "languages.md").write_text("Hello, Bonjour, Hallo.\n")
    return folder


def skill_model(say: Callable[[str], str], *, target: Path) -> ScriptedModel:
    """Loads ``greeter`` for a message, then calls its script with ``target`` and ``Ada``; says what it is told."""

    def reply(request: ModelRequest) -> str:
        updates = updates_of(request.prompt)
        if ran := re.search(r"it ran and returned: ([^\n<]*)", updates):
            return say("approved, " + ran[1].strip())
        results = _RESULT.findall(updates)
        if results and "Greeter" in results[-1]:
            call = json.dumps({"args": [str(target), "hello", "Ada"]})
            return f'<response><action_call name="{SCRIPT}">{call}</action_call></response>'
        if results:
            return say("waiting: " + ("yes" if "waiting for an admin" in results[-1] else results[-1][:80]))
        return '<response><action_call name="use_skill">{"name": "greeter"}</action_call></response>'

    return ScriptedModel(reply)
