"""What a kept fact is: its text, who said it (its owner), for whom (its scope) and the message it came from; who
may see it; and who is asking in a conversation.

A fact is its owner's. In a group, the owner's facts are shown only when the owner is the one asking, unless the
owner said a fact is for everyone there (``FactScope.GROUP``). Facts kept before they had owners (plain strings in
a conversation's memory) become group facts of no known owner: the conversation saw them all before, and still
does; nobody's ``/memory`` lists them, and ``/forget`` erases them with the conversation.
"""

from __future__ import annotations

import enum
import re
import secrets
from collections.abc import Iterable, Sequence

import pydantic

from ..entries import InputRef, Log, now_ms
from ..usage import user_of

__all__ = (
    "Fact",
    "FactScope",
    "about_words",
    "author_of",
    "authors",
    "matches",
    "speaks_as",
    "visible",
    "visible_to_all",
)

_last_kept = 0


def _kept_at() -> int:
    """Now in ms since the epoch, after every earlier fact of this process: two facts kept in the same millisecond
    (one run's two ``remember`` calls) keep the order they were kept in."""
    global _last_kept
    _last_kept = max(now_ms(), _last_kept + 1)
    return _last_kept


class FactScope(enum.StrEnum):
    """Who a fact is for."""

    PRIVATE = "private"
    """Its owner only: shown when they ask, in any conversation's run that is theirs."""
    GROUP = "group"
    """Everyone in its conversation (the owner said so, or nobody is known to own it)."""


class Fact(pydantic.BaseModel):
    """One fact the bot keeps in one conversation; stores keep it as JSON (``model_dump(mode="json")``)."""

    model_config = pydantic.ConfigDict(frozen=True)

    id: str = pydantic.Field(default_factory=lambda: secrets.token_hex(6))
    """Unique id (12 hex digits)."""
    conversation: str
    """The context id it was said in (``telegram:chat:-100123``)."""
    text: str
    """The fact, in one sentence."""
    owner: str | None = None
    """The platform-qualified id of who said it (``telegram:456``); None: not known (kept before facts had
    owners, or said where nobody is identified)."""
    scope: FactScope = FactScope.PRIVATE
    """Who it is for."""
    message: str | None = None
    """The platform id of the message it came from (its deletion drops the fact, where the platform says so)."""
    at: int = pydantic.Field(default_factory=_kept_at)
    """When it was kept, in ms since the epoch (one process's facts never share one)."""

    def visible_to(self, asker: str | None) -> bool:
        """True when ``asker`` (a platform-qualified id, None: nobody known) may be shown this fact."""
        return self.scope is FactScope.GROUP or (self.owner is not None and self.owner == asker)

    def same_as(self, other: Fact) -> bool:
        """The same fact kept twice (a retried run): same conversation, owner, scope and text."""
        return (self.conversation, self.owner, self.scope, self.text) == (
            other.conversation,
            other.owner,
            other.scope,
            other.text,
        )


def visible(facts: Iterable[Fact], asker: str | None) -> list[Fact]:
    """Of ``facts``, those ``asker`` may be shown: their own and the group's, in the order given."""
    return [f for f in facts if f.visible_to(asker)]


def visible_to_all(facts: Iterable[Fact], askers: Sequence[str]) -> list[Fact]:
    """Of ``facts``, those every one of ``askers`` may be shown (a call that answers several people shows what all
    of them may see: the group's facts, and a member's own only when they alone are asking); with no asker known,
    the group's."""
    if not askers:
        return visible(facts, None)
    return [f for f in facts if all(f.visible_to(a) for a in askers)]


def authors(inputs: Iterable[InputRef]) -> list[str]:
    """The distinct authors (``core.usage.user_of``) of ``inputs``, in the order they first wrote."""
    return list(dict.fromkeys(u for u in (user_of(i) for i in inputs) if u is not None))


def speaks_as(ref: InputRef, name: str) -> bool:
    """True when ``name`` (as a model writes who said something) is the author of ``ref``: the name the prompt
    shows for them (``user`` or ``author``), their platform id, or their platform-qualified id; case and spacing
    aside."""

    def norm(text: str) -> str:
        return " ".join(text.replace(":", " ").split()).casefold()

    wanted = norm(name.lstrip("@"))
    if not wanted:
        return False
    known = (ref.params.get("user"), ref.params.get("author"), ref.params.get("user_id"), ref.params.get("author_id"))
    return any(norm(str(k).lstrip("@")) == wanted for k in known if k) or wanted == norm(user_of(ref) or "")


def author_of(logs: Sequence[Log], *, shown_only: bool = False) -> InputRef | None:
    """The newest input of ``logs`` with an author (``core.usage.user_of``): who is asking. ``shown_only``: among
    those the model has read already (an action runs for what the model read, not for a message that joined the
    run while it wrote)."""
    for entry in reversed(logs):
        if isinstance(entry, InputRef) and (entry.processed or not shown_only) and user_of(entry) is not None:
            return entry
    return None


_EVERY = frozenset({"everything", "all", "anything"})
"""What ``forget`` is asked to drop when it is to drop every fact of the person's."""
_LITTLE_WORDS = (
    "a an the and or of to in on at for with is are was were be that this it its i me my mine you your yours about "
    "what which remember know fact facts forget delete erase please kept later"
)
_LITTLE = frozenset(_LITTLE_WORDS.split())
"""Words that say nothing of what a fact is about."""


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[^\W_]+", text.casefold()) if w not in _LITTLE]


def about_words(about: str, said: str) -> list[str]:
    """What ``forget`` is to remove, from the model's ``about`` and the person's own message (``said``): the words
    of ``about`` they said; when it shares none with them, their message's own words. The model's words alone are
    not enough: asked "Forget that my sister is Ana." after a fact about being a vegetarian was kept, the embedded
    model wrote the result it had just read ("Kept for later: You are a vegetarian."), and the wrong fact would
    have gone. "everything" (or "all") in ``about`` stays: every fact of theirs."""
    asked, own = _words(about), _words(said)
    if asked and all(w in _EVERY for w in asked):
        return ["everything"]
    stems = {w[:4] for w in own}
    shared = [w for w in asked if w[:4] in stems]
    return shared or own


def matches(fact: str, words: Sequence[str]) -> bool:
    """True when ``fact`` holds every one of ``words`` (``about_words``; compared by their first four letters, so
    "sister" finds "sisters"), or they say everything; no words match nothing."""
    if not words:
        return False
    if list(words) == ["everything"]:
        return True
    held = {w[:4] for w in _words(fact)}
    return all(w[:4] in held for w in words)
