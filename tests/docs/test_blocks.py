"""Every ```python block of docs/ runs as written, against the scripted model and without a network.

The blocks of one page run in order, each continuing from the ones before it on that page (as a reader pastes them
into one file); a test per block runs it after those before it, so a failure names the page and line of the block.
"""

from __future__ import annotations

import pytest

from .blocks import Block, blocks, pages

BLOCKS = [block for page in pages() for block in blocks(page)]


def test_the_docs_have_python_blocks_and_run_most() -> None:
    assert len(BLOCKS) >= 8
    assert sum(b.skip is not None for b in BLOCKS) <= len(BLOCKS) // 5, "docs-test: skip is for the exceptions"


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_the_docs_block_runs(block: Block) -> None:
    if block.skip is not None:
        pytest.skip(block.skip)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    same_page = [b for b in BLOCKS if b.path == block.path]
    for earlier in same_page[: same_page.index(block) + 1]:
        if earlier.skip is None:
            exec(
                compile("\n" * (earlier.line - 1) + earlier.code, str(earlier.path), "exec", dont_inherit=True),
                namespace,
            )
