"""Every ```python block of the README runs as written, against the scripted model and without a network.

The blocks run in order, each continuing from the ones before it (as a reader pastes them into one file); a test
per block runs it after those before it, and the traceback of a failure points at the README's own lines. A block
right after ``<!-- readme-test: skip (why) -->`` is not run: for what needs a token or a network, used sparingly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(
    r"(?:<!-- readme-test: skip(?P<why>[^>]*)-->[ \t]*\n)?^```python[ \t]*\n(?P<code>.*?)^```[ \t]*$", re.S | re.M
)


@dataclass(frozen=True)
class Block:
    line: int
    """The line of the README where the code starts."""
    code: str
    skip: str | None
    """Why the block is not run, or None."""


def blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    found = []
    for m in _BLOCK.finditer(text):
        why = m["why"]
        found.append(
            Block(
                line=text.count("\n", 0, m.start("code")) + 1,
                code=m["code"],
                skip=None if why is None else why.strip(" ()") or "marked to skip",
            )
        )
    return found


BLOCKS = blocks()


def test_the_readme_has_python_blocks_and_runs_most() -> None:
    assert len(BLOCKS) >= 3
    assert sum(b.skip is not None for b in BLOCKS) <= len(BLOCKS) // 3, "readme-test: skip is for the exceptions"


@pytest.mark.parametrize("block", BLOCKS, ids=[f"README.md:{b.line}" for b in BLOCKS])
def test_the_readme_block_runs(block: Block) -> None:
    if block.skip is not None:
        pytest.skip(block.skip)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    for earlier in BLOCKS[: BLOCKS.index(block) + 1]:
        if earlier.skip is None:
            exec(compile("\n" * (earlier.line - 1) + earlier.code, str(README), "exec"), namespace)
