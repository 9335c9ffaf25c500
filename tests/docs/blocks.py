"""The ```python blocks of a Markdown file, found as tests/test_readme.py finds the README's.

A block right after ``<!-- docs-test: skip (why) -->`` is not run: for what needs a token or a network, sparingly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

_BLOCK = re.compile(
    r"(?:<!-- docs-test: skip(?P<why>[^>]*)-->[ \t]*\n)?^(?P<indent>[ \t]*)```python[ \t]*\n(?P<code>.*?)^(?P=indent)```[ \t]*$",
    re.S | re.M,
)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    """The line of the file where the code starts."""
    code: str
    skip: str | None
    """Why the block is not run, or None."""

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    found = []
    for m in _BLOCK.finditer(text):
        why = m["why"]
        indent = m["indent"]
        code = "".join(line.removeprefix(indent) for line in m["code"].splitlines(keepends=True))
        found.append(
            Block(
                path=path,
                line=text.count("\n", 0, m.start("code")) + 1,
                code=code,
                skip=None if why is None else why.strip(" ()") or "marked to skip",
            )
        )
    return found


def pages() -> list[Path]:
    """Every Markdown page of docs/ (the generated reference pages are in no file)."""
    return sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)
