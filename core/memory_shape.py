"""A context instance's memory brought to the shape its context makes now, whoever kept it.

The memory of a conversation outlives the bot that made it: the built-in assistant kept it before the author's todo
bot ran in the same data folder, or an older version of the author's bot did before ``create`` gained a key. Beside
each instance's memory the store keeps whose it is and which version (``Shape``: the context's type and
``version``). On load, memory kept in this context's shape is handed over as it is (``create`` runs once per
instance: a key it gains later comes with a higher ``version``). Memory kept by an older version (or before shapes
were kept) goes through the context's ``upgrade``, and keys ``create`` makes that it lacks are filled in; memory
kept by another bot is handed over only when it fits what ``create`` makes (each key of the same JSON kind), else
the bot starts from ``create`` and says so in the log. Memory kept by a newer version is refused: its run fails
with an error saying what to do.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .definitions import maybe_await
from .errors import RunError

if TYPE_CHECKING:
    from .definitions import Context, ContextState

__all__ = ("Shape", "current", "fits", "owner", "shaped")

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class Shape:
    """Whose memory an instance holds: the context that keeps it (a bot's own, laid over a platform's; else the
    platform's) and the version of that context."""

    context: str
    """The type of the context whose ``create`` made it."""
    version: int
    """That context's ``version`` when it kept it."""

    def dump(self) -> dict[str, Any]:
        """The JSON the memory store keeps."""
        return {"context": self.context, "version": self.version}

    @classmethod
    def load(cls, raw: Any) -> Shape | None:
        """What ``dump`` made, or None (nothing kept, or something else)."""
        if not isinstance(raw, dict):
            return None
        context, version = raw.get("context"), raw.get("version")
        if not isinstance(context, str) or not isinstance(version, int) or isinstance(version, bool):
            return None
        return cls(context=context, version=version)

    @classmethod
    def of(cls, context: Context[Any]) -> Shape:
        """The shape ``context`` keeps its memory in now."""
        kept_by = owner(context)
        return cls(context=kept_by.type, version=kept_by.version)


def current(kept: Shape | None, context: Context[Any]) -> bool:
    """True when ``kept`` is the shape ``context`` keeps its memory in now: the memory is handed over as it is,
    and nothing is written (read at every run, so it builds nothing)."""
    own = context.laid if context.laid is not None else context
    return kept is not None and kept.version == own.version and kept.context == own.type


def owner(context: Context[Any]) -> Context[Any]:
    """The context whose memory an instance of ``context`` holds: the bot's, when laid over a platform's."""
    return context.laid if context.laid is not None else context


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__


def fits(memory: Any, created: Any) -> bool:
    """True when ``memory`` has the shape of ``created`` where both have a value: the same JSON kind, key by key
    for a dict (a key ``created`` holds as None takes anything)."""
    if isinstance(created, dict):
        return isinstance(memory, dict) and all(
            key not in memory or value is None or memory[key] is None or _kind(memory[key]) == _kind(value)
            for key, value in created.items()
        )
    return created is None or _kind(memory) == _kind(created)


def _filled(memory: Any, created: Any) -> Any:
    if not isinstance(memory, dict) or not isinstance(created, dict):
        return memory
    for key, value in created.items():
        memory.setdefault(key, value)
    return memory


async def shaped(memory: Any, kept: Shape | None, state: ContextState[Any]) -> Any:
    """``memory`` (a copy of what was stored) in the shape ``state``'s context makes now, given whose it is:
    ``kept`` (None: kept before shapes were, taken as version 1 of this bot's)."""
    context = state.context
    own = owner(context)
    legacy = kept is None
    if kept is None:
        kept = Shape(context=own.type, version=1)
    ours = kept.context == own.type
    if ours and kept.version == own.version and not legacy:
        return memory  # (create runs once per instance, as the seed has it: a key it gains needs a new version)
    if ours and kept.version > own.version:
        raise RunError(
            f"the memory of {state.id!r} was kept by version {kept.version} of context {own.type!r}, newer than "
            f"this bot's ({own.version}): run the newer bot, or /reset the chat to start it again"
        )
    if ours and kept.version < own.version and own.upgrade is not None:
        try:
            memory = await maybe_await(own.upgrade(memory, kept.version))
        except Exception as exc:
            raise RunError(
                f"the upgrade of context {own.type!r} raised {type(exc).__name__} on memory of version "
                f"{kept.version}: {exc}; fix the upgrade function"
            ) from exc
    created = await maybe_await(context.create(state)) if context.create is not None else {}
    if hasattr(created, "model_dump"):
        created = created.model_dump(mode="json")
    if not ours and not fits(memory, created):
        log.warning(
            "the memory of %r was kept by context %r (another bot) and does not fit %r's: %r starts from its create",
            state.id,
            kept.context,
            own.type,
            own.type,
        )
        return created
    return _filled(memory, created)
