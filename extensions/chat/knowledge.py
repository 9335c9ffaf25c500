"""``/knowledge`` in every chat, written once: which collections of the knowledge base this conversation searches
(``core.knowledge``), and limiting it to some of them.

    /knowledge                  what this chat searches, and the collections it may search (anyone may look)
    /knowledge use hr it        search hr and it only (the chat's admins; anyone in a private chat)
    /knowledge all              the chat's choice lifted: everything the operator allows it again

The operator sets the most a chat may search (``Knowledge.ceiling``: the limit the console and ``bots knowledge
scope`` set for it, else ``KNOWLEDGE_COLLECTIONS``); a chat narrows it, never widens it, and a collection outside it
is never named to the chat. The chat's choice is kept with the knowledge base itself (``Knowledge.choose``), so in a
fleet every worker reads it. Collection names people typed are checked against the
collections there are before anything is stored, and shown back quoted (``quote``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from core.errors import BotError
from core.knowledge import KNOWLEDGE

if TYPE_CHECKING:
    from core import Host

__all__ = ("MESSAGES", "knowledge_command")

log = logging.getLogger("extensions.chat")

MAX_NAMED = 16
"""Collections one ``/knowledge use`` names at most."""

_EN = {
    "off": "This bot has no knowledge base (its operator did not turn one on).",
    "now": "This chat searches {searched}. Collections: {collections}.\n"
    "Change it with /knowledge use <collection>... or /knowledge all.",
    "all": "every collection",
    "none": "none yet",
    "usage": "Use /knowledge, /knowledge use <collection>... or /knowledge all.",
    "not_allowed": "Sorry, only this chat's admins can choose what the bot searches here.",
    "unknown": "There is no collection {names} here. Collections: {collections}.",
    "set": "Done: this chat searches {names} only.",
    "lifted": "Done: this chat searches {searched} again.",
    "failed": "The knowledge base cannot be read now; try again later.",
}
_FR = {
    "off": "Ce bot n'a pas de base de connaissances (son opérateur n'en a pas activé).",
    "now": "Ce chat cherche dans {searched}. Collections : {collections}.\n"
    "Changez-le avec /knowledge use <collection>... ou /knowledge all.",
    "all": "toutes les collections",
    "none": "aucune pour l'instant",
    "usage": "Utilisez /knowledge, /knowledge use <collection>... ou /knowledge all.",
    "not_allowed": "Désolé, seuls les admins de ce chat peuvent choisir où le bot cherche ici.",
    "unknown": "Il n'y a pas de collection {names} ici. Collections : {collections}.",
    "set": "C'est fait : ce chat cherche dans {names} seulement.",
    "lifted": "C'est fait : ce chat cherche de nouveau dans {searched}.",
    "failed": "La base de connaissances ne peut pas être lue pour l'instant ; réessayez plus tard.",
}
MESSAGES: Mapping[str, Mapping[str, str]] = {"en": _EN, "fr": _FR}
"""The answers of ``/knowledge`` by language, then by key."""


def _say(key: str, language: str, /, **values: object) -> str:
    template = MESSAGES.get(language, _EN).get(key) or _EN[key]
    return template.format(**values) if values else template


async def knowledge_command(
    agent: Host,
    context_id: str,
    arg: str | None,
    *,
    may_change: bool,
    language: str,
    quote: Callable[[str], str] = str,
) -> tuple[str, bool]:
    """The answer to ``/knowledge arg`` in ``context_id``, and whether the limit changed. ``may_change``: the
    caller administers this chat (or it is theirs, or they are in ``BOT_ADMIN_USERS``)."""
    knowledge = agent.provided(KNOWLEDGE)
    if knowledge is None:
        return _say("off", language), False
    verb, _, rest = (arg or "").strip().partition(" ")
    verb = verb.lower()
    if verb not in ("", "use", "all") or (verb == "use" and not rest.strip()) or (verb == "all" and rest.strip()):
        return _say("usage", language), False
    try:
        ceiling = await knowledge.ceiling(context_id)
        there = {doc.collection for doc in await knowledge.store.documents()}
        if ceiling is not None:  # never a collection outside the operator's ceiling, not even its name
            there &= set(ceiling)
        listed = ", ".join(sorted(there)) or _say("none", language)
        if verb == "":
            searched = await knowledge.collections_of(context_id)
            return _say("now", language, searched=_searched(searched, language), collections=listed), False
        if not may_change:
            return _say("not_allowed", language), False
        if verb == "all":
            await knowledge.choose(context_id, None)
            log.info("%s: the chat's own knowledge base choice was lifted", context_id)
            return _say("lifted", language, searched=_searched(ceiling, language)), True
        names = list(dict.fromkeys(rest.replace(",", " ").split()))[:MAX_NAMED]
        unknown = [name for name in names if name not in there]
        if unknown:
            shown = ", ".join(quote(name[:64]) for name in unknown)
            return _say("unknown", language, names=shown, collections=listed), False
        await knowledge.choose(context_id, names)
        log.info("%s: the chat searches %d collection(s) of its ceiling only", context_id, len(names))
        return _say("set", language, names=", ".join(names)), True
    except BotError as exc:
        log.warning("%s: /knowledge could not read the knowledge base (%s)", context_id, exc)
        return _say("failed", language), False


def _searched(collections: tuple[str, ...] | None, language: str) -> str:
    return ", ".join(collections) if collections else _say("all", language)
