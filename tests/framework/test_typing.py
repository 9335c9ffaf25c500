"""What ``mypy --strict`` tells a bot author: each mistake of ``wrong_bot.py`` reported on its line, nothing in
``good_bot.py`` (from the repository and from outside it: the package ships ``py.typed``) or ``typed_bot.py``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(600)  # a cold mypy run reads core and pydantic

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WRONG = HERE / "wrong_bot.py"
GOOD = HERE / "good_bot.py"
TYPED = HERE / "typed_bot.py"
ERROR = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+): error: (?P<message>.*)$", re.MULTILINE)

MISTAKES = {
    "handler-for-another-schema": ('Argument "handler" to "action"', "Forecast"),
    "misspelled-attribute": ('"Weather" has no attribute "citty"',),
    "int-for-string-content": ('Argument "handler" to "output"', "int", "str"),
    "key-reads-a-missing-field": ('"ChatArgs" has no attribute "channel"',),
    "output-returns-an-int": ('Argument "handler" to "output"', "Host], int]", "OutputRefResponse | list["),
    "args-of-another-context": ('"ArgsNotOfTheContextsSchema"',),
    "agent-send-wrong-args": ('"ArgsNotOfTheContextsSchema"',),
    "inline-handler-for-another-schema": ('Argument "handler" to "action"', "Forecast", "Weather"),
    "inline-int-for-string-content": ('Argument "handler" to "output"', "int", "str"),
    "inline-context-action": ('Argument "handler" to "action"', "Forecast", "Weather"),
}
"""Each mistake of wrong_bot.py (its ``# mistake:`` mark) and what mypy's message on that line must say."""


def mypy(*files: Path, cwd: Path, cache: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir", str(cache), *map(str, files)],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "Traceback" not in out.stderr, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


@pytest.fixture(scope="module")
def reported(cache: Path) -> dict[str, list[tuple[int, str]]]:
    """mypy's errors on both bot files, run from the repository: ``{file name: [(line, message)]}``."""
    found: dict[str, list[tuple[int, str]]] = {WRONG.name: [], GOOD.name: []}
    for m in ERROR.finditer(mypy(WRONG, GOOD, cwd=ROOT, cache=cache)):
        found.setdefault(Path(m["file"]).name, []).append((int(m["line"]), m["message"]))
    return found


def mistake_lines() -> dict[str, int]:
    lines = {}
    for number, text in enumerate(WRONG.read_text(encoding="utf-8").splitlines(), start=1):
        mark = re.search(r"# mistake: ([\w-]+)", text)
        if mark:
            lines[mark[1]] = number
    return lines


def test_the_wrong_bot_marks_every_mistake_once() -> None:
    assert sorted(mistake_lines()) == sorted(MISTAKES)


def test_the_correct_bot_type_checks_clean(reported: dict[str, list[tuple[int, str]]]) -> None:
    assert reported[GOOD.name] == []


def test_nothing_but_the_mistakes_is_reported(reported: dict[str, list[tuple[int, str]]]) -> None:
    marked = set(mistake_lines().values())
    assert [(line, message) for line, message in reported[WRONG.name] if line not in marked] == []


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_each_mistake_is_reported_on_its_line(mistake: str, reported: dict[str, list[tuple[int, str]]]) -> None:
    line = mistake_lines()[mistake]
    messages = [message for at, message in reported[WRONG.name] if at == line]
    assert any(all(part in message for part in MISTAKES[mistake]) for message in messages), messages


def test_a_bot_leaning_on_the_types_type_checks_clean(cache: Path) -> None:
    assert mypy(TYPED, cwd=ROOT, cache=cache) == ""


def test_the_correct_bot_type_checks_clean_from_outside_the_repository(cache: Path, tmp_path: Path) -> None:
    """From outside, the installed package is typed too: the correct bot is clean, and each mistake of the wrong
    one is still reported (an untyped package would make both clean, or both fail to import)."""
    shutil.copy(GOOD, tmp_path / GOOD.name)
    shutil.copy(WRONG, tmp_path / WRONG.name)
    out = mypy(tmp_path / GOOD.name, tmp_path / WRONG.name, cwd=tmp_path, cache=cache)
    found = [(Path(m["file"]).name, int(m["line"]), m["message"]) for m in ERROR.finditer(out)]
    assert [f for f in found if f[0] != WRONG.name] == [], out
    for mistake, line in mistake_lines().items():
        messages = [message for name, at, message in found if name == WRONG.name and at == line]
        assert any(all(part in message for part in MISTAKES[mistake]) for message in messages), (mistake, out)
