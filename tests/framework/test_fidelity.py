"""docs/fidelity.md stays true: every test a row names exists, every row says "yes" (issue 22's "done when"), and
the summary counts the rows below it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "fidelity.md"
SHORT = {
    "seeds": "tests/framework/test_seeds.py",
    "typing": "tests/framework/test_typing.py",
    "examples": "tests/framework/test_examples.py",
    "agent": "tests/core/test_agent.py",
    "paths": "tests/core/test_state_paths.py",
    "statelog": "tests/core/test_statelog.py",
    "parser": "tests/core/test_parser.py",
    "outputs": "tests/core/test_output_entries.py",
    "forget": "tests/core/test_fire_and_forget.py",
    "runs": "tests/framework/test_spec_runs.py",
}
"""The short names the table uses for test files (its introduction lists them)."""
ROW = re.compile(r"^\| (?P<id>[A-Z]\d+) \| (?P<what>.*) \| (?P<status>[a-z]+) \| (?P<tests>.*) \|$", re.M)
SECTIONS = {
    "O": "Outputs",
    "P": "Prompting",
    "L": "Agent Lifecycle",
    "A": "Acts of Emergence 008",
    "E": "Ailoy response format",
}


def rows() -> list[re.Match[str]]:
    return list(ROW.finditer(DOC.read_text(encoding="utf-8")))


def named(cell: str) -> list[tuple[str, str | None]]:
    """``(file, test name or None for a whole file)`` for each test a row's cell names."""
    found: list[tuple[str, str | None]] = []
    for ref in re.findall(r"`([^`]+)`", cell):
        if "::" not in ref and not ref.endswith(".py"):
            continue  # a note on the test, such as the case of a parametrized one
        file, _, test = ref.partition("::")
        found.append((SHORT.get(file, file), test.split(" ")[0] or None))
    return found


def test_every_row_names_tests_that_exist() -> None:
    assert len(rows()) >= 70
    missing = []
    for row in rows():
        refs = named(row["tests"])
        assert refs, f"{row['id']} names no test"
        for file, test in refs:
            path = ROOT / file
            if not path.is_file():
                missing.append((row["id"], file))
            elif test is not None and not re.search(rf"^(async )?def {re.escape(test)}\(", path.read_text(), re.M):
                missing.append((row["id"], f"{file}::{test}"))
    assert missing == []


def test_every_row_is_done_and_the_summary_counts_them() -> None:
    assert [(row["id"], row["status"]) for row in rows() if row["status"] != "yes"] == []
    text = DOC.read_text(encoding="utf-8")
    for letter, seed in SECTIONS.items():
        count = sum(row["id"].startswith(letter) for row in rows())
        assert f"| {seed} | {count} | {count} | 0 | 0 |" in text, seed
