"""Prompt sections: what a plugin adds to the prompt, so the prompt names no feature.

A plugin that has something to show the model for a conversation (the facts kept about it, the operator's passages
found for the newest question, the summary of what left the window) puts a ``PromptSection`` in the run's state,
under its own name, before the model call that shows it (``show``; ``hide`` takes it away). ``core.prompt`` writes
every section there is into the conversation's ``<context>``, in their ``order``, and the compact prompt for small
models what each gives it (``compact``, ``known``); it knows none of them by name.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass

__all__ = ("PromptSection", "hide", "show")


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptSection:
    """One plugin's part of a conversation's prompt."""

    name: str
    """Whose it is (``facts``, ``knowledge``, ``summary``): a run's state holds one section of each name."""
    text: str
    """What the full prompt shows inside ``<context>``: markup whose people's words the plugin escaped
    (``core.escape.escape_text``)."""
    order: int = 50
    """Sections are shown by ``order``, lowest first (facts 10, knowledge 20, summary 30)."""
    compact: str = ""
    """What the compact prompt (small models) shows of it, as written ("": nothing)."""
    known: tuple[str, ...] = ()
    """Lines the compact prompt lists under what it knows of the conversation (not escaped: the prompt escapes
    them, with the names people gave and the facts a bot keeps in its memory)."""


def show(sections: MutableMapping[str, PromptSection], section: PromptSection) -> None:
    """Put ``section`` in ``sections`` (a run's ``ContextState.sections``), in place of the one of its name."""
    sections[section.name] = section


def hide(sections: MutableMapping[str, PromptSection], name: str) -> None:
    """Take the section ``name`` out of ``sections`` (nothing to show this time)."""
    sections.pop(name, None)
