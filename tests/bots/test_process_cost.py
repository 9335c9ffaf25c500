"""What a ``bots`` process spends besides its work (issue 47: the suite starts some 400 of them): it imports the
operator console's pages only where they are served and YAML only to read a skill, and it leaves without the
interpreter's last garbage collections (``bots.cli.leaving``). Checked by what the process holds, never by how
long it took."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.bots.test_cli import clean_env


def python(tmp_path: Path, code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(tmp_path),
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


def test_a_worker_imports_the_consoles_pages_only_to_serve_them(tmp_path: Path) -> None:
    code = (
        "import sys; import bots.worker, bots.gateway, bots.console.roles; "
        "print(sorted(m for m in ('bots.console.server', 'bots.console.views', 'jinja2') if m in sys.modules))"
    )
    assert python(tmp_path, code) == "[]"


def test_the_console_script_leaves_without_the_last_collections_and_a_caller_keeps_them(tmp_path: Path) -> None:
    as_script = (
        "import gc, sys; from bots.entry import main; sys.argv = ['bots', 'config']; code = main(); "
        "print(code, gc.get_freeze_count() > 0)"
    )
    assert python(tmp_path, as_script).splitlines()[-1] == "0 True"
    as_call = "import gc; from bots.entry import main; code = main(['config']); print(code, gc.get_freeze_count())"
    assert python(tmp_path, as_call).splitlines()[-1] == "0 0"


def test_yaml_is_read_only_with_a_skill(tmp_path: Path) -> None:
    """Every process imports the skills' module through its settings; YAML is for a skill's front matter only."""
    skill = tmp_path / "hello"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: hello\ndescription: Says hello.\n---\nSay hello.\n")
    code = (
        "import sys; import bots.cli, bots.worker, bots.gateway; before = 'yaml' in sys.modules; "
        "from extensions.skills.skill import read_skill; "
        f"print(before, read_skill(__import__('pathlib').Path({str(skill)!r})).name, 'yaml' in sys.modules)"
    )
    assert python(tmp_path, code) == "False hello True"
