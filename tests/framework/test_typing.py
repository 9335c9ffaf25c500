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


def start_mypy(*files: Path, cwd: Path, cache: Path) -> subprocess.Popen[str]:
    """``mypy --strict`` on ``files`` from ``cwd``, started (``finish`` reads its report), with mypy's defaults
    otherwise (``settings``: an author's, not the repository's) and its cache in ``cache``."""
    settings = cache.parent / "mypy.ini"
    settings.write_text("[mypy]\n", encoding="utf-8")
    command = [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--config-file", str(settings)]
    return subprocess.Popen(
        [*command, "--cache-dir", str(cache), *map(str, files)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(run: subprocess.Popen[str]) -> str:
    """What the started mypy printed (its errors), once it has ended."""
    out, err = run.communicate()
    assert "Traceback" not in err, err
    return out


Reported = dict[str, list[tuple[int, str]]]
"""mypy's errors by file name: ``{file name: [(line, message)]}``."""


def errors_of(out: str) -> Reported:
    found: Reported = {}
    for m in ERROR.finditer(out):
        found.setdefault(Path(m["file"]).name, []).append((int(m["line"]), m["message"]))
    return found


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """mypy's report on the three bot files checked from the repository, and on the correct and the wrong bot
    copied outside it. Both runs have the same settings, so they share one cache: the first reads core and
    pydantic (some 30 CPU-seconds), the second, from outside, finds them in the cache (3 s, where a cache of its
    own took as long as the first). The typed bot is checked in the repository's run only."""
    outside = tmp_path_factory.mktemp("outside")
    shutil.copy(GOOD, outside / GOOD.name)
    shutil.copy(WRONG, outside / WRONG.name)
    cache = tmp_path_factory.mktemp("mypy") / "cache"
    inside = finish(start_mypy(WRONG, GOOD, TYPED, cwd=ROOT, cache=cache))
    return inside, finish(start_mypy(outside / GOOD.name, outside / WRONG.name, cwd=outside, cache=cache))


@pytest.fixture(scope="module")
def reported(runs: tuple[str, str]) -> Reported:
    """mypy's errors on the bot files, run from the repository."""
    return {WRONG.name: [], GOOD.name: [], **errors_of(runs[0])}


def mistake_lines() -> dict[str, int]:
    lines = {}
    for number, text in enumerate(WRONG.read_text(encoding="utf-8").splitlines(), start=1):
        mark = re.search(r"# mistake: ([\w-]+)", text)
        if mark:
            lines[mark[1]] = number
    return lines


def test_the_wrong_bot_marks_every_mistake_once() -> None:
    assert sorted(mistake_lines()) == sorted(MISTAKES)


def test_the_correct_bot_type_checks_clean(reported: Reported) -> None:
    assert reported[GOOD.name] == []


def test_nothing_but_the_mistakes_is_reported(reported: Reported) -> None:
    marked = set(mistake_lines().values())
    assert [(line, message) for line, message in reported[WRONG.name] if line not in marked] == []


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_each_mistake_is_reported_on_its_line(mistake: str, reported: Reported) -> None:
    line = mistake_lines()[mistake]
    messages = [message for at, message in reported[WRONG.name] if at == line]
    assert any(all(part in message for part in MISTAKES[mistake]) for message in messages), messages


def test_a_bot_leaning_on_the_types_type_checks_clean(runs: tuple[str, str]) -> None:
    assert [line for line in runs[0].splitlines() if TYPED.name in line] == []


def test_the_correct_bot_type_checks_clean_from_outside_the_repository(runs: tuple[str, str]) -> None:
    """From outside, the installed package is typed too: the correct bot is clean, and each mistake of the wrong
    one is still reported (an untyped package would make both clean, or both fail to import)."""
    out = runs[1]
    found = [(Path(m["file"]).name, int(m["line"]), m["message"]) for m in ERROR.finditer(out)]
    assert [f for f in found if f[0] != WRONG.name] == [], out
    for mistake, line in mistake_lines().items():
        messages = [message for name, at, message in found if name == WRONG.name and at == line]
        assert any(all(part in message for part in MISTAKES[mistake]) for message in messages), (mistake, out)
