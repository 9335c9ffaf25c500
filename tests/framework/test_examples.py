"""The bots in examples/ run as ``python examples/<name>.py`` against the scripted model and print their
conversation (each also runs as an APP on Telegram and Discord: tests/apps/test_examples_as_apps.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(name: str) -> str:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stderr == "", out.stderr
    return out.stdout


def test_the_tool_bot_calls_its_tools_and_answers() -> None:
    assert run("tool_bot.py").splitlines() == [
        "user: What's the weather in Paris?",
        '  [calls weather {"city": "Paris"}]',
        "  [weather returned {'city': 'Paris', 'sky': 'sunny', 'celsius': 21}]",
        "bot: Paris: sunny, 21 °C. A good day for a walk.",
        "user: And what is 3 times 7?",
        '  [calls multiply {"a": 3, "b": 7}]',
        "  [multiply returned {'product': 21}]",
        "bot: 3 × 7 = 21",
    ]


def test_the_notebook_bot_keeps_notes_in_its_context_and_shows_its_own_output() -> None:
    assert run("notebook_bot.py").splitlines() == [
        "user: Remember: buy oat milk",
        "bot: Noted.",
        "user: Remember: call Grace on Friday",
        "bot: Noted.",
        "user: What is in my notebook?",
        "bot: [Your notes]",
        "You asked me to remember:",
        "  * buy oat milk",
        "  * call Grace on Friday",
    ]


def test_the_plan_bot_runs_instances_and_a_plan() -> None:
    lines = run("plan_bot.py").splitlines()
    gathered = [{"city": "Paris", "sky": "sunny"}, {"city": "Rome", "sky": "rainy"}, {"city": "Oslo", "sky": "snowy"}]
    assert f"  [forecast: {gathered}]" in lines
    assert lines[-4:] == [
        "bot: Packing list:",
        "[ ] sunglasses for Paris",
        "[ ] an umbrella for Rome",
        "[ ] a scarf for Oslo",
    ]
