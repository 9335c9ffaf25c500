"""The knowledge plugin: the ``search_knowledge`` action the model calls to find passages of the operator's documents
(behind the trust tiers like any action), and, with ``before_answer``, the best passages for the newest question
put in the prompt before every answer (``ContextState.passages``). Either way the model is told to cite the
document and section it answers from.

The operator sets the most a conversation may search (its ceiling): its own limit (``KnowledgeStore.set_scope``: the
console, ``bots knowledge scope``), else the default (``collections``, ``KNOWLEDGE_COLLECTIONS``; None: every
collection). A chat may narrow that to some of those collections (``/knowledge use``, ``Knowledge.choose``), never
widen it.

    store = SQLiteKnowledge("data/knowledge.sqlite3")
    await Indexer(store).add(["handbook/"], collection="hr")
    agent = create_agent(..., plugins=[Knowledge(store, before_answer=3)])
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ..definition_types import ActionContext, Host, Setup
from ..definitions import action, extension
from ..entries import InputRef
from ..errors import ActionError, MemoryStoreError
from ..escape import escape_attr, escape_text
from ..plugin import Plugin, RunHooks, RunView
from ..prompt import format_value
from ..prompt_sections import PromptSection, hide, show
from ..slots import Slot
from .embeddings import Embedder
from .index import Indexer
from .model import Hit
from .store import KnowledgeStore

if TYPE_CHECKING:
    from ..definition_types import Extension
    from ..entries import Log
    from ..handler_context import ContextState

__all__ = ("KNOWLEDGE", "Knowledge", "SearchKnowledgeArgs", "chat_choice_key", "search_knowledge")

log = logging.getLogger("core.knowledge")

KNOWLEDGE: Slot[Knowledge] = Slot("knowledge")
"""Where an agent keeps its ``Knowledge`` plugin (``agent.provided(KNOWLEDGE)``)."""

PASSAGE_CHARS = 1200
"""Characters of a passage shown to the model at most."""


class Knowledge(Plugin):
    """Searches ``store`` for the conversations of an agent (``embedder``: questions ranked by meaning too)."""

    name = "knowledge"

    def __init__(
        self,
        store: KnowledgeStore,
        *,
        embedder: Embedder | None = None,
        collections: Sequence[str] | None = None,
        before_answer: int = 0,
        limit: int = 3,
        allow_private_urls: bool = False,
    ) -> None:
        self.store = store
        """Where the passages are."""
        self.indexer = Indexer(store, embedder=embedder, allow_private=allow_private_urls)
        """Adds documents to ``store`` (and embeds questions)."""
        self.collections = tuple(collections) if collections else None
        """The collections a conversation not limited otherwise searches (None: all)."""
        self.before_answer = before_answer
        """Passages put in the prompt before every answer (0: none; the model searches when it needs to)."""
        self.limit = limit
        """Passages a search returns by default."""

    def extension(self) -> Extension:
        return extension(name="knowledge", actions=[search_knowledge])

    def attach(self, host: Setup) -> None:
        host.provide(KNOWLEDGE, self)

    def begin(self, run: RunView) -> RunHooks | None:
        return _BeforeAnswer(self, run) if self.before_answer > 0 else None

    async def stop(self) -> None:
        if self.indexer.embedder is not None:
            await self.indexer.embedder.aclose()
        await self.store.close()

    async def ceiling(self, conversation: str) -> tuple[str, ...] | None:
        """The most ``conversation`` may search, as the operator set it: its own limit (``KnowledgeStore.set_scope``:
        the console, ``bots knowledge scope``), else the default (``collections``); None: every collection. A chat
        narrows it (``/knowledge use``), never widens it."""
        scoped = await self.store.scope(conversation)
        return scoped if scoped is not None else self.collections

    async def collections_of(self, conversation: str) -> tuple[str, ...] | None:
        """The collections ``conversation`` searches (None: all): the chat's own choice (``/knowledge use``) within
        the operator's ceiling; a choice the ceiling no longer leaves anything of is not one."""
        ceiling = await self.ceiling(conversation)
        chosen = await self.store.scope(chat_choice_key(conversation))
        if chosen is None:
            return ceiling
        narrowed = tuple(c for c in chosen if ceiling is None or c in ceiling)
        return narrowed or ceiling

    async def choose(self, conversation: str, collections: Sequence[str] | None) -> None:
        """A chat's own choice (``/knowledge use``; None: none, the ceiling again), kept beside the operator's
        limit, never over it: only what is within the ceiling is ever searched."""
        await self.store.set_scope(chat_choice_key(conversation), collections)

    async def search(self, conversation: str, query: str, *, limit: int | None = None) -> list[Hit]:
        """The passages of the collections of ``conversation`` that best answer ``query``."""
        collections = await self.collections_of(conversation)
        return await self.indexer.search(query, collections=collections, limit=limit or self.limit)


def chat_choice_key(conversation: str) -> str:
    """Where the knowledge store keeps the collections a chat chose for ``conversation`` (``Knowledge.choose``),
    apart from the operator's limit kept under the conversation's own id (a context id holds no ``|``)."""
    return f"{conversation}|chat"


def question_of(updates: Sequence[Log]) -> str:
    """The text of the newest input of ``updates`` (empty when none)."""
    for entry in reversed(updates):
        if isinstance(entry, InputRef):
            return entry.text if entry.text is not None else format_value(entry.data)
    return ""


class _BeforeAnswer(RunHooks):
    """Before each model call that reads a new input: the best passages for it, on the run's state for the prompt."""

    __slots__ = ("knowledge", "run")

    def __init__(self, knowledge: Knowledge, run: RunView) -> None:
        self.knowledge, self.run = knowledge, run

    async def admit(self, updates: list[Log]) -> list[Log]:
        question = question_of(updates)
        if not question.strip():
            return updates
        state = self.run.state
        try:
            hits = await self.knowledge.search(state.id, question, limit=self.knowledge.before_answer)
        except (MemoryStoreError, OSError) as exc:
            log.warning("%s: the knowledge base could not be searched (%s); answering without it", state.id, exc)
            hits = []
        if hits:
            block = knowledge_block([(hit.cite, hit.text[:PASSAGE_CHARS]) for hit in hits])
            show(state.sections, PromptSection(name="knowledge", text=block, order=20, compact=block))
        else:
            hide(state.sections, "knowledge")
        return updates


def knowledge_block(passages: Sequence[tuple[str, str]]) -> str:
    """The passages of the knowledge base found for the newest question, each with its citation (the operator's
    documents: escaped like people's words)."""
    shown = "\n".join(
        f'<passage cite="{escape_attr(str(cite))}">{escape_text(text)}</passage>' for cite, text in passages
    )
    return (
        "<knowledge>\nPassages of the operator's documents that may answer the newest message. Answer from them "
        "when they do, and end with the citation of each one you used, as given: (Source: cite).\n"
        f"{shown}\n</knowledge>"
    )


class SearchKnowledgeArgs(BaseModel):
    """Arguments of ``search_knowledge``."""

    query: str = Field(min_length=1, max_length=300, description="The question, or a few distinctive words of it")
    limit: int = Field(default=3, ge=1, le=8, description="Passages to return at most, best first")


async def _search(args: SearchKnowledgeArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    knowledge = agent.provided(KNOWLEDGE)
    if knowledge is None:
        raise ActionError("this bot has no knowledge base: say you cannot look it up")
    state: ContextState[Any] = ctx.state
    try:
        hits = await knowledge.search(state.id, args.query, limit=args.limit)
    except MemoryStoreError as exc:
        raise ActionError(f"the knowledge base cannot be read now ({exc}); say so") from exc
    return {
        "found": len(hits),
        "passages": [{"cite": hit.cite, "text": hit.text[:PASSAGE_CHARS]} for hit in hits],
    }


search_knowledge = action(
    name="search_knowledge",
    description="Searches the documents the operator gave you (manuals, policies, FAQs) and returns the passages "
    "that best match, each with its citation (document § section).",
    instructions="Use it for questions the documents may answer. Answer from the passages only, and end with "
    "the citation of each passage you used, as given (for example: (Source: Handbook § Refunds)). If nothing "
    "relevant is found, say the documents do not cover it.",
    schema=SearchKnowledgeArgs,
    handler=_search,
    examples=('<action_call name="search_knowledge">{"query": "how long do refunds take"}</action_call>',),
)
