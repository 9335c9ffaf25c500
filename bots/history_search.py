"""``search_history``: the action that finds past messages of a conversation in its history store, also those too
old to be shown to the model, by words and dates (the assistant's, offered where the bot keeps a history:
``bots.plugins.history_search``)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any

from pydantic import BaseModel, Field

from core import ActionContext, Host, action
from core.memory.history import HISTORY, excerpt, query_words

__all__ = ("search_history",)


class SearchArgs(BaseModel):
    """Arguments of ``search_history``."""

    words: str = Field(
        default="", max_length=200, description="Words the messages contain (all of them); empty: any message"
    )
    since: str = Field(default="", description="Earliest date, YYYY-MM-DD or an ISO date-time in UTC; empty: no limit")
    until: str = Field(default="", description="Latest date (inclusive), YYYY-MM-DD or ISO date-time; empty: no limit")
    limit: int = Field(default=5, ge=1, le=20, description="Messages to return at most, newest first")


def _ms(text: str, *, end: bool, name: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    try:
        if len(text) == 10:  # a whole day
            day = datetime.fromisoformat(text).date()
            moment = datetime.combine(day + timedelta(days=1) if end else day, time(), tzinfo=UTC)
            return int(moment.timestamp() * 1000) - (1 if end else 0)
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"{name}={text!r} is not a date: write YYYY-MM-DD or 2024-05-01T14:00") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


async def _search_history(args: SearchArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    history = agent.provided(HISTORY)
    if history is None:
        raise ValueError("this bot keeps no history to search")
    since = _ms(args.since, end=False, name="since")
    until = _ms(args.until, end=True, name="until")
    found = await history.search(ctx.state.id, words=args.words, since=since, until=until, limit=args.limit)
    words = query_words(args.words)
    messages = [
        {
            "who": entry.who,
            "when": datetime.fromtimestamp(entry.ts / 1000, tz=UTC).isoformat(timespec="minutes"),
            "text": excerpt(entry.text, words),
        }
        for entry in reversed(found)
    ]
    return {"found": len(messages), "messages": messages}


search_history = action(
    name="search_history",
    description="Finds past messages of this conversation, also those too old to be shown to you, by words and "
    "dates; returns short excerpts with who wrote them and when.",
    instructions="Use it when the user refers to something said earlier that you do not see, or asks what was "
    "said at some time. Search with a few distinctive words.",
    schema=SearchArgs,
    handler=_search_history,
    examples=('<action_call name="search_history">{"words": "birthday party", "since": "2024-05-01"}</action_call>',),
)
