"""``remember`` and ``recall``: the actions a bot offers to keep facts and read them back, through the agent's
``Facts`` plugin (``facts_of``). Who a fact belongs to is never the model's to say: it is whoever wrote the message
the model is answering."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ..definition_types import ActionContext, Host
from ..definitions import action
from ..errors import ActionError
from .model import FactScope
from .plugin import Facts, facts_of
from .voice import as_told

__all__ = ("ForgetArgs", "RememberArgs", "forget", "recall", "remember")


class RememberArgs(BaseModel):
    """Arguments of ``remember``."""

    fact: str = Field(min_length=1, max_length=500, description="The fact to keep, in one sentence")
    for_everyone: bool = Field(
        default=False,
        description="true only when the person says it is for everyone in this chat; otherwise it is theirs alone "
        "and recalled only for them",
    )
    said_by: str | None = Field(
        default=None,
        max_length=100,
        description="only when you answer several people's messages at once: the name of the one who said it, as "
        "their messages show it",
    )


class ForgetArgs(BaseModel):
    """Arguments of ``forget``."""

    about: str = Field(
        min_length=1,
        max_length=200,
        description='the words of the fact to forget, as the person says them ("my sister"); "everything" for '
        "all of theirs",
    )


def _facts(agent: Host) -> Facts:
    found = facts_of(agent)
    if found is None:
        raise ActionError("this bot keeps no facts (it runs without the facts plugin): say you cannot remember")
    return found


async def _remember(args: RememberArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    scope = FactScope.GROUP if args.for_everyone else FactScope.PRIVATE
    fact = await _facts(agent).remember(ctx.state, " ".join(args.fact.split()), scope=scope, said_by=args.said_by)
    told = as_told(fact, [fact.owner] if fact.owner is not None else [])  # (the answer goes to who said it)
    if fact.scope is FactScope.GROUP:
        return {"remembered": told, "for": "everyone in this chat"}
    # (a person's own, the default, goes unsaid: as "for": "the person who said it, alone", the embedded model's
    # answers were taken as leaving the result out, and the result itself was the answer)
    return {"remembered": told}


async def _recall(args: dict[str, Any], ctx: ActionContext, agent: Host) -> dict[str, Any]:
    return {"facts": await _facts(agent).recall(ctx.state)}


async def _forget(args: ForgetArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    gone = await _facts(agent).forget_about(ctx.state, args.about)
    if gone is None:
        raise ActionError(
            "nothing was forgotten: a fact is forgotten only when its owner alone asks; with several people's "
            "messages at once, ask them to say it again one at a time"
        )
    return {"forgotten": gone}


# What the model reads of the three results: sentences it can say as they are. As JSON, and as "facts: none",
# "remembered: ..." for the embedded model, they were copied in their form ("Done: remembered: ..."), or not
# understood: "What do you remember about me?" with nothing kept was answered "I remember that I was not able to
# recall any specific facts from my last message.", and that answer copied into the next ones.


def _kept_text(result: dict[str, Any]) -> str:
    told = str(result["remembered"])
    return f"Kept for later: {told} (for everyone in this chat)" if result.get("for") else f"Kept for later: {told}"


def _sentences(facts: Any) -> str:
    """Facts one after the other, each a sentence."""
    told = [str(fact).strip() for fact in facts or ()]
    return " ".join(fact if fact.endswith((".", "!", "?")) else f"{fact}." for fact in told if fact)


def _forgotten_text(result: dict[str, Any]) -> str:
    gone = _sentences(result.get("forgotten"))
    return f"Forgotten for good: {gone}" if gone else "Nothing kept about you matches that; nothing was forgotten."


def _facts_text(result: dict[str, Any]) -> str:
    return _sentences(result.get("facts")) or "Nothing is kept about you yet."


remember = action(
    name="remember",
    description="Keeps a fact the person tells you (a name, a preference) for later conversations. It is theirs: "
    "in a group, only they get it back, unless they say it is for everyone here.",
    instructions="Use it when the user tells you something worth remembering or asks you to remember.",
    schema=RememberArgs,
    handler=_remember,
    format=_kept_text,
    examples=('<action_call name="remember">{"fact": "The user\'s name is Ada"}</action_call>',),
)
recall = action(
    name="recall",
    description="Lists the facts kept that the person you answer may see: their own, and those meant for everyone "
    "in this chat (when you answer several people at once, only those meant for everyone). Never say a fact of "
    "someone else that it does not list.",
    schema=dict[str, Any],
    handler=_recall,
    format=_facts_text,
)
forget = action(
    name="forget",
    description="Forgets facts kept about the person who asks (theirs alone: never someone else's), those that "
    "hold the words they say, or all of theirs.",
    instructions="Use it when the user asks you to forget something they told you, or to delete it.",
    schema=ForgetArgs,
    handler=_forget,
    format=_forgotten_text,
)
