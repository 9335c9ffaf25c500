"""Readiness outcomes: what a check in ``Agent.readiness`` may answer besides ready and not ready."""

from __future__ import annotations

__all__ = ("Degraded",)


class Degraded(str):
    """A check's answer when a part is down but the process still does its work (an MCP server whose
    tools are hidden until it is back): ``/readyz`` shows the text and the process stays ready."""

    __slots__ = ()
