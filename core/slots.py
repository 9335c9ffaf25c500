"""Typed slots: what an extension gives the agent for its own later use (a platform's runtime), kept by the agent
under a key that carries the value's type, as ``contextvars.ContextVar`` does for a task. Nothing is global: the
value lives and dies with its agent, and ``agent.provided(slot)`` is typed without a cast. ``RunValues`` keeps
values by slot the same way for one run (``ContextState.values``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ("RunValues", "Slot")

T = TypeVar("T")


class Slot(Generic[T]):
    """The key of one kind of value an agent may hold (``agent.provide(slot, value)``, ``agent.provided(slot)``);
    compared by identity."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name
        """For errors and logs (``telegram runtime``)."""

    def __repr__(self) -> str:
        return f"Slot({self.name!r})"


class RunValues:
    """What a run's plugins and handlers keep for that run, each value under its slot and of its slot's type
    (``ContextState.values``): the attachments it fetched (``core.media.attachment.LOADED``). Never saved."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[Slot[Any], Any] = {}

    def get(self, slot: Slot[T]) -> T | None:
        """The value kept under ``slot``, or None."""
        found: T | None = self._values.get(slot)
        return found

    def put(self, slot: Slot[T], value: T) -> None:
        """Keep ``value`` under ``slot`` (replacing what was there)."""
        self._values[slot] = value

    def setdefault(self, slot: Slot[T], make: Callable[[], T]) -> T:
        """The value kept under ``slot``, made with ``make`` and kept the first time."""
        if slot not in self._values:
            self._values[slot] = make()
        found: T = self._values[slot]
        return found
