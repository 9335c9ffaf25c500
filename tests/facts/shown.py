"""What the model is shown of the facts actions' results, read back from a prompt: sentences (``format`` of
``remember`` and ``recall`` in ``core.facts.actions``), not JSON."""

from __future__ import annotations

import html
import re

__all__ = ("NOTHING", "kept", "results")

NOTHING = "Nothing is kept about you yet."
"""``recall``'s result when nothing is kept that the person answered may see."""

_KEPT = re.compile(r"\AKept for later: (.*?)(?: \(for everyone in this chat\))?\Z", re.S)


def results(prompt: str, name: str) -> list[str]:
    """The texts of the ``name`` action results the prompt shows, unescaped."""
    found = re.findall(rf'<action_result name="{name}"[^>]*>(.*?)</action_result>', prompt, re.S)
    return [html.unescape(body) for body in found]


def kept(prompt: str) -> list[str]:
    """The facts the prompt's ``remember`` results say were kept, as told."""
    return [found.group(1) for text in results(prompt, "remember") if (found := _KEPT.match(text))]
