"""Typed slots: what an extension gives the agent for its own later use (a platform's runtime), kept by the agent
under a key that carries the value's type, as ``contextvars.ContextVar`` does for a task. Nothing is global: the
value lives and dies with its agent, and ``agent.provided(slot)`` is typed without a cast."""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ("Slot",)

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
