"""Skills: a folder with a SKILL.md, installed and pinned by hash, its instructions loaded on demand, its scripts run
as actions with a timeout and none of the bot's environment."""

from __future__ import annotations

import asyncio
import http.server
import io
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from core import InMemoryStore, ScriptedModel, context, create_agent, output
from core.errors import RunError
from core.trust import ActionsPolicy, Tier
from extensions.skills import SkillError, SkillsSettings, SkillToolset, add_skill, read_skill, remove_skill, run_script
from extensions.skills.skill import installed_skills, read_lock
from extensions.skills.toolset import ScriptCall

from .support import SCRIPT, make_skill


def tar_of(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return buf.getvalue()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTP server on 127.0.0.1 serving ``tmp_path / "www"``: its base URL and folder."""
    www = tmp_path / "www"
    www.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(www), **kwargs)  # type: ignore[arg-type]

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", www
    finally:
        server.shutdown()
        server.server_close()


def test_a_skill_folder_is_read_and_checked(tmp_path: Path) -> None:
    skill = read_skill(make_skill(tmp_path / "greeter"))
    assert skill.name == "greeter" and skill.description == "Greets people warmly."
    assert skill.instructions.startswith("# Greeter")
    assert skill.scripts == ("note.py",) and skill.resources == ("references/languages.md",)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: Bad Name\ndescription: x\n---\nbody")
    with pytest.raises(SkillError, match="lowercase letters"):
        read_skill(bad)
    (bad / "SKILL.md").write_text("no front matter")
    with pytest.raises(SkillError, match="front matter"):
        read_skill(bad)
    (bad / "SKILL.md").write_text("---\nname: bad\n---\nbody")
    with pytest.raises(SkillError, match="description"):
        read_skill(bad)


def test_add_pins_the_files_and_a_changed_skill_is_not_loaded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "skills"
    done = add_skill(str(make_skill(tmp_path / "src" / "greeter")), root)
    assert done.name == "greeter" and not done.replaced
    assert read_lock(root)["greeter"]["sha256"] == done.sha256
    assert (root / "skills.lock").stat().st_mode & 0o077 == 0  # the owner's only
    assert [s.name for s in installed_skills(root)] == ["greeter"]
    (root / "greeter" / "scripts" / "note.py").write_text("print('changed behind the pin')\n")
    assert installed_skills(root) == []
    assert "files changed since it was installed" in caplog.text
    assert remove_skill("greeter", root) and not (root / "greeter").exists()
    assert not remove_skill("greeter", root)


def test_add_from_a_url_checks_the_archive_hash_before_unpacking(tmp_path: Path, served: tuple[str, Path]) -> None:
    base, www = served
    data = tar_of(make_skill(tmp_path / "src" / "greeter"))
    (www / "greeter.tar.gz").write_bytes(data)
    root = tmp_path / "skills"
    with pytest.raises(SkillError, match="nothing installed"):
        add_skill(f"{base}/greeter.tar.gz", root, sha256="0" * 64)
    assert not (root / "greeter").exists()
    import hashlib

    done = add_skill(f"{base}/greeter.tar.gz", root, sha256=hashlib.sha256(data).hexdigest())
    assert read_lock(root)["greeter"]["archive_sha256"] == hashlib.sha256(data).hexdigest()
    assert [s.name for s in installed_skills(root)] == [done.name]


def test_an_archive_that_writes_outside_its_folder_is_refused(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("SKILL.md", "---\nname: evil\ndescription: x\n---\n")
        z.writestr("../outside.txt", "gotcha")
    archive = tmp_path / "evil.zip"
    archive.write_bytes(buf.getvalue())
    with pytest.raises(SkillError, match="outside its folder"):
        add_skill(str(archive), tmp_path / "skills")
    assert not (tmp_path / "outside.txt").exists()


async def test_a_script_runs_without_the_bots_environment_and_within_its_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TELEGRAM_TOKEN", "123:secret")
    skill = read_skill(make_skill(tmp_path / "greeter"))
    out = await run_script(skill, "note.py", ScriptCall(args=[str(tmp_path / "ran"), "hi"]), timeout=20, max_chars=1000)
    assert out["stdout"].strip() == "noted: hi | secrets seen: []"
    assert (tmp_path / "ran").read_text() == "hi\n"
    (skill.path / "scripts" / "slow.py").write_text("import time\ntime.sleep(30)\n")
    slow = read_skill(skill.path)
    with pytest.raises(RunError, match=r"longer than 0\.5 s"):
        await run_script(slow, "slow.py", ScriptCall(), timeout=0.5, max_chars=1000)
    (skill.path / "scripts" / "fails.py").write_text("import sys\nsys.exit('no luck')\n")
    with pytest.raises(RunError, match=r"exit code 1.*no luck"):
        await run_script(read_skill(skill.path), "fails.py", ScriptCall(), timeout=20, max_chars=1000)


async def test_the_model_sees_descriptions_loads_instructions_on_demand_and_scripts_after(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    add_skill(str(make_skill(tmp_path / "src" / "greeter")), root)
    toolset = SkillToolset(SkillsSettings(), root=root)
    chat = context(type="chat", schema=str, key=lambda s: s)
    model = ScriptedModel(
        [
            '<response><action_call name="use_skill">{"name": "greeter"}</action_call></response>',
            '<response><output type="m">loaded</output></response>',
        ]
    )
    agent = create_agent(
        model=model,
        contexts=[chat],
        outputs=[output(type="m", handler=lambda data, ctx, agent: None)],
        extensions=[toolset.extension()],
        memory=InMemoryStore(),
    )
    async with agent:
        await agent.send(chat, "c", {"type": "m", "data": "greet Ada"})
    first, second = model.requests
    assert "greeter: Greets people warmly." in first.prompt  # every description, from the start
    assert "# Greeter" not in first.prompt and SCRIPT not in first.prompt  # instructions and scripts: on demand
    assert "# Greeter" in second.prompt and f'name="{SCRIPT}"' in second.prompt


def test_a_skills_scripts_wait_for_an_admin_by_default() -> None:
    policy = ActionsPolicy()
    assert policy.verdict(SCRIPT, Tier.MEMBER).value == "approve"
    assert policy.verdict(SCRIPT, Tier.GUEST).value == "refuse"
    assert policy.verdict("use_skill", Tier.MEMBER).value == "allow"
    assert asyncio.iscoroutinefunction(run_script)
