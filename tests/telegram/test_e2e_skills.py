"""End to end through the fake Bot API: a skill installed with ``add_skill``, loaded on demand by the model, its
script run only after an admin of the group approved the call (the default policy, ``skill:*=member/approve``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.approvals import ApprovalDesk
from core.trust import ActionsPolicy, Trust
from extensions.chat.trust import TrustRules
from extensions.skills import SkillsSettings, SkillToolset, add_skill
from extensions.telegram.definitions import MESSAGE
from tests.fakes.telegram_server import FakeTelegramServer
from tests.skills.support import make_skill, skill_model

from .conftest import StartBot

GROUP = -100800
MEMBER, ADMIN = 1001, 2002


def say(text: str) -> str:
    return f'<response><output type="{MESSAGE}">{text}</output></response>'


async def test_a_skills_script_runs_once_an_admin_approved_it(
    server: FakeTelegramServer, start_bot: StartBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TELEGRAM_TOKEN", server.token)  # in the bot's environment, never in a script's
    root = tmp_path / "skills"
    add_skill(str(make_skill(tmp_path / "src" / "greeter")), root)
    ran = tmp_path / "ran.txt"
    server.chat(GROUP, kind="supergroup")
    server.admins[GROUP] = {ADMIN}
    await start_bot(
        skill_model(say, target=ran),
        extensions=[SkillToolset(SkillsSettings(), root=root).extension(), ApprovalDesk().extension()],
        agent_options={"trust": Trust(policy=ActionsPolicy())},
        trust=TrustRules(),
    )
    server.user_says("@daydream_test_bot greet Ada with the greeter skill", user_id=MEMBER, chat_id=GROUP)
    sent = await server.wait_replies(2, chat_id=GROUP)
    request = next(m for m in sent if m.buttons)
    answer = next(m for m in sent if not m.buttons)
    assert "skill:greeter:note.py" in request.text and "Ada" in request.text
    assert answer.text == "waiting: yes"
    assert not ran.exists()  # loaded, but the script waits for an admin

    server.user_presses(request, "✅ Approve", user_id=ADMIN, first_name="Ada")
    *_, done = await server.wait_replies(3, chat_id=GROUP)
    assert ran.read_text() == "hello Ada\n"  # once
    assert done.text.startswith("approved, ") and "noted: hello Ada" in done.text
    assert "secrets seen: []" in done.text  # the bot's token is not in the script's environment
