"""Polls the model posts (``telegram:poll``) and their answers coming back as inputs (``telegram:poll_answer``),
and reactions on the bot's answers recorded as feedback (``core.usage.feedback``), never answered.

A poll is posted with ``sendPoll``, not anonymous, so that Telegram tells the bot who chose what (a
``poll_answer`` update: the poll's id, the person, the options chosen, and no chat). The bot remembers which
conversation each of its polls belongs to (``extensions.chat.polls.PollBook``, in this process) and hands
an answer to that conversation as a ``telegram:poll_answer`` input, written as
``Ann chose "Tea" in the poll "Tea or coffee?"``: the model reads it in its next run, as it reads a message.

A reaction (a ``message_reaction`` update, sent to a bot that asks for it and, in a group, is an administrator)
counts only on a message the bot posted as an answer (noted in the ``AnswerBook``, key ``telegram:<chat>:<message>``):
a 👍 or a 👎 is recorded against the answer's conversation, and nothing is handed to the model. In a fleet the
book is the fleet's (``core.fleet.RedisAnswerBook``): the worker that posted the answer notes it, the gateway that
receives the reaction finds it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from telegram import Bot, MessageReactionUpdated, PollAnswer, ReactionTypeEmoji, ReplyParameters
from telegram.error import TelegramError

from core.entries import InputRef
from core.usage.feedback import record_feedback

from ..chat.answer_book import AnswerBook
from ..chat.counters import Ignored
from ..chat.policy import Allowlist
from ..chat.polls import PollBook, PollRecord, vote_text
from .definitions import POLL_ANSWER, ChatArgs, telegram_chat
from .reply import translate_error

if TYPE_CHECKING:
    from core.definitions import Send

    from ..chat.adapter import ChatAdapter

__all__ = ("answer_input", "answer_key", "on_poll_answer", "on_reaction", "post_poll")

log = logging.getLogger("extensions.telegram")


def answer_key(chat_id: int, message_id: int) -> str:
    """How a Telegram message is named in the ``AnswerBook``."""
    return f"telegram:{chat_id}:{message_id}"


async def post_poll(
    bot: Bot,
    *,
    args: ChatArgs,
    question: str,
    options: list[str],
    multiple: bool,
    reply_to: int | None,
) -> tuple[str, int]:
    """Post a poll (not anonymous: its answers come back) in the conversation ``args``; returns the poll's id and
    its message's id. Telegram's errors become ``PlatformError``."""
    try:
        message = await bot.send_poll(
            chat_id=args.chat_id,
            message_thread_id=args.thread_id,
            question=question,
            options=options,
            is_anonymous=False,
            allows_multiple_answers=multiple,
            business_connection_id=args.business_connection_id,
            reply_parameters=ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
            if reply_to is not None
            else None,
        )
    except TelegramError as exc:
        raise translate_error(exc, chat_id=args.chat_id) from exc
    assert message.poll is not None
    return message.poll.id, message.message_id


def answer_input(record: PollRecord, answer: PollAnswer) -> InputRef | None:
    """The input a vote becomes (``None``: an anonymous vote, or a vote taken back)."""
    user = answer.user
    if user is None or not answer.option_ids:
        return None
    text = vote_text(user.first_name, record, answer.option_ids)
    params = {
        "user": user.first_name,
        "user_id": str(user.id),
        "poll_id": str(answer.poll_id),
        "message_id": str(record.message_id),
        "options": ",".join(str(i) for i in answer.option_ids),
    }
    if user.username:
        params["username"] = user.username
    return InputRef(type=POLL_ANSWER, data=text, params=params)


async def on_poll_answer(
    adapter: ChatAdapter,
    polls: PollBook,
    answer: PollAnswer,
    *,
    send: Send | None,
    update_id: int,
    allowlist: Allowlist,
) -> None:
    """Hand a vote in one of the bot's polls to the poll's conversation (an unknown poll is left: logged)."""
    try:
        record = await polls.get(answer.poll_id)
    except Exception as exc:
        log.warning("a vote in poll %s is left: %s", answer.poll_id, exc)
        return
    if record is None:
        log.info("a vote in poll %s, which the bot did not post lately: left", answer.poll_id)
        return
    ref = answer_input(record, answer)
    if ref is None or send is None:
        return
    if not allowlist.allows(chat_ids=[record.args.chat_id], user_id=ref.params["user_id"]):
        adapter.metrics.ignored(telegram_chat, record.args, Ignored.ALLOWLIST)  # (TELEGRAM_ALLOWED_USERS)
        return
    adapter.metrics.received(telegram_chat, record.args)
    await send(telegram_chat, record.args, ref, dedupe_key=f"telegram:{update_id}")


async def on_reaction(adapter: ChatAdapter, answers: AnswerBook, change: MessageReactionUpdated) -> None:
    """Record the emoji a person added on one of the bot's answers as feedback; any other reaction is left (and a
    reaction the book cannot be asked about, Redis down, is logged and left)."""
    agent = adapter.agent
    if agent is None:
        return
    try:
        context_id = await answers.get(answer_key(change.chat.id, change.message_id))
    except Exception as exc:
        log.warning("chat %s: a reaction on message %s is not counted: %s", change.chat.id, change.message_id, exc)
        return
    if context_id is None:
        return
    before = {r.emoji for r in change.old_reaction if isinstance(r, ReactionTypeEmoji)}
    user = f"telegram:{change.user.id}" if change.user is not None else None
    for reaction in change.new_reaction:
        if isinstance(reaction, ReactionTypeEmoji) and reaction.emoji not in before:
            score = await record_feedback(
                agent, context_id=context_id, user=user, message=str(change.message_id), emoji=reaction.emoji
            )
            if score is not None:
                log.info("chat %s: a %s reaction on answer %s", change.chat.id, score.value, change.message_id)
