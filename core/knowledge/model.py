"""What the knowledge base holds: documents of a collection, split into passages, and the passages a search finds."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ("DocumentInfo", "Hit", "Passage", "citation")


@dataclass(kw_only=True, frozen=True, slots=True)
class Passage:
    """One section (or a part of a long one) of a document, the unit a search finds."""

    section: str
    """The headings it sits under, outermost first (``Refunds > Timing``); empty before the first heading."""
    text: str
    """Its text."""


@dataclass(kw_only=True, frozen=True, slots=True)
class DocumentInfo:
    """A document of the knowledge base, as listed."""

    collection: str
    """The collection it belongs to."""
    source: str
    """Where it was read: an absolute file path or a URL (with the collection, its identity)."""
    title: str
    """Its title (the first heading, else the file name)."""
    digest: str
    """The SHA-256 of its bytes when it was indexed: a change is reindexed, nothing else."""
    passages: int
    """How many passages it was split into."""
    updated: int
    """When it was indexed (ms since the epoch)."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Hit:
    """A passage a search found."""

    collection: str
    """Its document's collection."""
    source: str
    """Its document's source."""
    title: str
    """Its document's title."""
    section: str
    """The headings it sits under."""
    text: str
    """Its text."""
    score: float
    """Higher is better (only comparable within one search)."""

    @property
    def cite(self) -> str:
        """How an answer names it: ``title § section``."""
        return citation(self.title, self.section)


def citation(title: str, section: str) -> str:
    """``title § section`` (the title alone when the passage sits under no heading)."""
    return f"{title} § {section}" if section else title
