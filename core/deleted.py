"""Messages their authors deleted on the platform leave what the bot keeps (issue 35): the working memory, the run in
progress, and the full history, so the model never reads them again.

A platform adapter that hears of a deletion (Discord's message delete events) calls ``Agent.forget_messages`` with
the platform's message ids (``InputRef.params["message_id"]``). In one process the conversation's entries go at once:
from a run in progress (``Run.drop``: it is not saved with the run, nor added to the history when it ends), from
inputs still waiting for a run, and from the stored working memory and history. In a fleet the gateway stores a
``FORGET_INPUT`` in the conversation's inbox, so the deletion reaches the worker that runs the conversation in
order with its messages, and that worker does the same (``core.fleet.drain``): with the policy ``steer`` a deletion
sent while the message's run goes on joins that run and takes the message out of it.

The history finds a message however old it is: an input's history id starts with its platform message id
(``core.memory.recording.history_id``). A deleted message that had left the working memory may be folded into the
conversation's summary: the summary goes then, as ``/reset`` has it (the rest of the history stays searchable).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from .entries import InputRef, Log

__all__ = ("FORGET_INPUT", "forget_ref", "forgotten_ids", "matching", "split_forgets")

FORGET_INPUT = "core:forget"
"""The input a fleet's gateway stores for a deletion: ``data={"message_ids": [...]}``; never shown to the model."""


def forget_ref(message_ids: Iterable[str]) -> InputRef:
    """The input that carries a deletion to the process running the conversation."""
    return InputRef(type=FORGET_INPUT, data={"message_ids": sorted({str(m) for m in message_ids})})


def forgotten_ids(refs: Iterable[InputRef]) -> set[str]:
    """The message ids the ``FORGET_INPUT`` inputs among ``refs`` name."""
    ids: set[str] = set()
    for ref in refs:
        if ref.type == FORGET_INPUT and isinstance(ref.data, dict):
            found: Any = ref.data.get("message_ids")
            if isinstance(found, list):
                ids.update(str(m) for m in found)
    return ids


def matching(logs: Iterable[Log], message_ids: Collection[str]) -> list[InputRef]:
    """The inputs of ``logs`` that are the platform messages ``message_ids``."""
    return [
        entry
        for entry in logs
        if isinstance(entry, InputRef) and str(entry.params.get("message_id", "")) in message_ids
    ]


def split_forgets(refs: Sequence[InputRef]) -> tuple[list[InputRef], set[str]]:
    """A batch's inputs without its ``FORGET_INPUT`` ones and the messages they delete (themselves left out too)."""
    ids = forgotten_ids(refs)
    kept = [ref for ref in refs if ref.type != FORGET_INPUT and not matching([ref], ids)]
    return kept, ids
