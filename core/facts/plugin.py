"""The facts plugin: keeps what people ask the bot to remember in a ``FactStore``, each fact its owner's, and shows
each run the facts of whoever is asking (their own and the group's) before every model call (the prompt section
``facts``, ``core.prompt_sections``). ``/reset`` and ``/forget`` erase a conversation's facts (``Plugin.reset``).
``facts_of(agent)`` (``agent.provided(Facts)``) is how the actions, the chat commands and the platforms reach it.

    facts = Facts()                                   # in the agent's memory store (one process)
    agent = create_agent(..., plugins=[facts])
    Facts(core.fleet.RedisFactStore(backend))         # in a fleet: every gateway and worker

It also takes over the facts of the memory dict where ``remember`` kept them before (``memory["facts"]``, plain
strings): when a conversation's state is next loaded they move into the store as group facts of no known owner (the
whole conversation saw them before; nobody's ``/memory`` lists them; ``/forget`` erases them with the conversation).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..entries import InputRef
from ..errors import ActionError, ConfigError, MemoryStoreError
from ..escape import escape_text
from ..plugin import Plugin, RunHooks, RunView
from ..prompt_sections import PromptSection, hide, show
from ..usage import user_of
from .model import Fact, FactScope, about_words, author_of, authors, matches, speaks_as, visible_to_all
from .store import FactStore, MemoryFactStore
from .voice import as_told

if TYPE_CHECKING:
    from ..definition_types import Host, Setup
    from ..entries import Log
    from ..handler_context import ContextState

__all__ = ("MAX_FACTS", "Facts", "facts_of")

log = logging.getLogger("core.facts")

MAX_FACTS = 50
"""Facts one conversation keeps at most (the newest)."""


def facts_of(agent: Host) -> Facts | None:
    """The facts of ``agent`` (the ``Facts`` plugin it was built with, ``agent.provided(Facts)``), or None."""
    return agent.provided(Facts)


class Facts(Plugin):
    """Facts people asked the bot to keep, each its owner's, in ``store`` (default: the agent's memory store, one
    process only), at most ``limit`` per conversation."""

    name = "facts"

    def __init__(self, store: FactStore | None = None, *, limit: int = MAX_FACTS) -> None:
        self._store = store
        self.limit = limit
        """Facts one conversation keeps at most (the newest)."""
        self._answering: weakref.WeakValueDictionary[str, _Shown] = weakref.WeakValueDictionary()
        # the run of each conversation in this process (one at a time), for its actions: whom it answers (held
        # weakly: a run that failed before its end leaves nothing behind)

    @property
    def store(self) -> FactStore:
        """Where the facts are kept."""
        if self._store is None:
            raise ConfigError("these Facts are installed on no agent: pass them in create_agent(plugins=[...])")
        return self._store

    def attach(self, host: Setup) -> None:
        if self._store is None:
            if host.distributed:
                raise ConfigError(
                    "facts of an agent on a shared queue must live in Redis: pass "
                    "Facts(core.fleet.RedisFactStore(backend)) (bots.plugins.facts() does)"
                )
            self._store = MemoryFactStore(host.memory)
        host.provide(Facts, self)

    def begin(self, run: RunView) -> RunHooks:
        shown = _Shown(self, run)
        self._answering[run.state.id] = shown
        return shown

    def answered(self, state: ContextState[Any]) -> list[InputRef]:
        """The inputs with an author of the turn the run of ``state`` answers that it has shown the model (those it
        answers: ``RunView.turn``, so one that joined once an answer was out is answered alone), oldest first;
        outside a run (or before the model read any), the newest input with an author the model read."""
        shown = self._answering.get(state.id)
        logs = state.working_memory.logs
        if shown is not None and shown.run.state is state:
            inputs = [e for e in shown.run.turn if e.processed and user_of(e)]
            inputs = [e for e in inputs if e in logs]  # (one refused is out of working memory)
            if inputs:
                return inputs
        newest = author_of(logs, shown_only=True)
        return [newest] if newest is not None else []

    async def loaded(self, state: ContextState[Any]) -> None:
        try:
            await self.take_over(state)
        except MemoryStoreError as exc:  # left in the memory dict: taken over at a later load
            log.warning("%s: its facts kept before owners could not be moved yet: %s", state.id, exc)

    async def reset(self, context_id: str, *, erase: bool) -> None:
        """``/reset`` and ``/forget``: the conversation's facts go (both forget what the conversation kept)."""
        await self.store.forget(context_id)

    # -- what the actions and commands do ----------------------------------------------------------------

    async def remember(
        self, state: ContextState[Any], text: str, *, scope: FactScope, said_by: str | None = None
    ) -> Fact:
        """Keep ``text`` in the conversation of ``state``, owned by who wrote the message that asked for it (among
        the inputs the model read in this run) and tied to that message; said where nobody is identified, the fact
        is the group's. When the run answers several people, ``said_by`` (the name the prompt shows for them) says
        which of them; the model can only choose among them, and without it the call is refused (never given to
        whoever wrote last)."""
        inputs = self.answered(state)
        author = _asked_by(inputs, said_by)
        owner = user_of(author) if author is not None else None
        fact = Fact(
            conversation=state.id,
            text=text,
            owner=owner,
            scope=scope if owner is not None else FactScope.GROUP,
            message=author.params.get("message_id") if author is not None else None,
        )
        return await self.store.add(fact, limit=self.limit)

    async def recall(self, state: ContextState[Any]) -> list[str]:
        """The facts of the conversation of ``state`` that everyone the model is answering may be shown (their own
        and the group's when one person asks; the group's when several do), each as told to them (``as_told``: a
        person's own in the second person)."""
        askers = authors(self.answered(state))
        return [as_told(f, askers) for f in visible_to_all(await self.store.of_conversation(state.id), askers)]

    async def forget_about(self, state: ContextState[Any], about: str) -> list[str] | None:
        """Remove the facts of the conversation of ``state`` that the one person the model answers owns and that
        are about what they asked to forget (``about_words``: the words of ``about`` they said, else their own
        message's; "everything": every one of theirs); those removed, as told to them. None when the run answers
        nobody known or several people at once: a fact is removed only at its owner's own request."""
        inputs = self.answered(state)
        askers = authors(inputs)
        if len(askers) != 1:
            return None
        said = " ".join(i.data for i in inputs if user_of(i) == askers[0] and isinstance(i.data, str))
        words = about_words(about, said)
        mine = [f for f in await self.store.of_conversation(state.id) if f.owner == askers[0]]
        gone = [f for f in mine if matches(f.text, words)]
        removed = await self.store.delete(state.id, [f.id for f in gone]) if gone else []
        return [as_told(f, askers) for f in removed]

    async def take_over(self, state: ContextState[Any]) -> int:
        """Move the plain-string facts of the memory dict of ``state`` (kept before facts had owners) into the
        store, as group facts of no known owner; how many."""
        memory = state.memory
        old = memory.get("facts") if isinstance(memory, dict) else None
        if not isinstance(old, list):
            return 0
        moved = 0
        for item in old:
            if isinstance(item, str) and item.strip():
                await self.store.add(
                    Fact(conversation=state.id, text=item.strip(), scope=FactScope.GROUP), limit=self.limit
                )
                moved += 1
        del memory["facts"]
        if moved:
            log.info("%s: %d fact(s) kept before facts had owners are now the group's", state.id, moved)
        return moved


def _asked_by(inputs: Sequence[InputRef], said_by: str | None) -> InputRef | None:
    """Of ``inputs`` (those the run answers), the newest message of who asked to keep a fact: the one ``said_by``
    names, or the only author there is."""
    if said_by:
        named = [i for i in inputs if speaks_as(i, said_by)]
        if named:
            return named[-1]
    if len(authors(inputs)) <= 1:
        return inputs[-1] if inputs else None
    names = ", ".join(dict.fromkeys(str(i.params.get("user") or i.params.get("author") or user_of(i)) for i in inputs))
    raise ActionError(
        f"you are answering several people ({escape_text(names)}): call remember again with said_by set to the "
        "one of them who said it"
    )


class _Shown(RunHooks):
    """Before each model call: the facts everyone the run answers may see, on the run's state for the prompt."""

    __slots__ = ("facts", "run")

    def __init__(self, facts: Facts, run: RunView) -> None:
        self.facts, self.run = facts, run

    async def admit(self, updates: list[Log]) -> list[Log]:
        state = self.run.state
        try:
            new = [e for e in updates if isinstance(e, InputRef)]
            inputs = [e for e in self.run.turn if e.processed or e in new]
            askers = authors(inputs)
            if not askers:
                author = author_of(state.working_memory.logs, shown_only=True)
                askers = authors([author] if author is not None else [])
            shown = visible_to_all(await self.facts.store.of_conversation(state.id), askers)
        except MemoryStoreError as exc:  # the answer goes on without them
            log.warning("%s: the facts could not be read (%s); this answer is written without them", state.id, exc)
            shown = []
        if shown:  # people's words: escaped like them (a person's own told to them: "Ana is your sister.")
            texts = tuple(as_told(f, askers) for f in shown)
            listed = "\n".join(f"- {escape_text(text)}" for text in texts)
            section = PromptSection(name="facts", text=f"<facts>\n{listed}\n</facts>", order=10, known=texts)
            show(state.sections, section)
        else:
            hide(state.sections, "facts")
        return updates

    async def ended(self, chain: Sequence[Log]) -> None:
        if self.facts._answering.get(self.run.state.id) is self:
            self.facts._answering.pop(self.run.state.id, None)
