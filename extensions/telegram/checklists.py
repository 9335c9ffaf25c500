"""Checklists the model posts (``telegram:checklist``, Bot API 9.1) and the tasks people mark done or add coming back
as inputs (``telegram:checklist_tasks``).

Telegram lets a bot post a checklist only on behalf of a Telegram Business account connected to it
(``sendChecklist`` requires a ``business_connection_id``: ``business.py``), so the output is refused, with a
reason the model can pass on (``definitions.NO_BUSINESS``), in any other chat. The checklist lets the person mark
tasks done and add tasks; each change reaches the bot as a service message in the chat (``checklist_tasks_done``,
``checklist_tasks_added``) carrying the checklist itself, so nothing needs remembering: the change goes to the
chat's conversation as an input the model reads in its next run, written as
``Ann marked 'Pack' as done in the checklist 'Moving day'``, and the answer threads under the checklist.

The model may change a checklist it posted (``replace``: ``editMessageChecklist``): its tasks are numbered from 1 in
order, so a task kept in its place keeps its number, and Telegram keeps it done when it was. A bot cannot mark a
task done itself: the Bot API has no such method; only people do.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from telegram import Bot, InputChecklist, InputChecklistTask, Message, ReplyParameters
from telegram.error import BadRequest, TelegramError

from core.entries import InputRef
from core.errors import PlatformError

from ..chat.counters import Ignored
from .definitions import CHECKLIST_TASKS, ChatArgs, telegram_chat
from .reply import translate_error

if TYPE_CHECKING:
    from collections.abc import Sequence

    from telegram import Checklist

    from core.definitions import Send

    from ..chat.adapter import ChatAdapter
    from ..chat.policy import Allowlist

__all__ = ("is_checklist_change", "on_checklist_change", "post_checklist", "tasks_input")

log = logging.getLogger("extensions.telegram")


async def post_checklist(
    bot: Bot, *, args: ChatArgs, title: str, tasks: list[str], reply_to: int | None, replace: int | None
) -> int:
    """Post a checklist in the business chat ``args`` on its account's behalf (or put it in place of the checklist
    ``replace``); the person may mark its tasks done and add tasks. Returns its message's id. Telegram's errors
    become ``PlatformError``."""
    assert args.business_connection_id is not None  # (the output refuses other chats before)
    checklist = InputChecklist(
        title=title,
        tasks=[InputChecklistTask(id=number, text=text) for number, text in enumerate(tasks, start=1)],
        others_can_add_tasks=True,
        others_can_mark_tasks_as_done=True,
    )
    try:
        if replace is not None:
            message = await bot.edit_message_checklist(
                business_connection_id=args.business_connection_id,
                chat_id=args.chat_id,
                message_id=replace,
                checklist=checklist,
            )
        else:
            message = await bot.send_checklist(
                business_connection_id=args.business_connection_id,
                chat_id=args.chat_id,
                checklist=checklist,
                reply_parameters=ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
                if reply_to is not None
                else None,
            )
    except BadRequest as exc:
        if "business" in exc.message.lower():  # BUSINESS_CONNECTION_INVALID, BUSINESS_PEER_INVALID...
            raise PlatformError(
                f"Telegram refused the checklist in chat {args.chat_id} ({exc.message}): the business account "
                "turned the bot off or took its right to reply; write the tasks as a message instead"
            ) from exc
        raise translate_error(exc, chat_id=args.chat_id) from exc
    except TelegramError as exc:
        raise translate_error(exc, chat_id=args.chat_id) from exc
    return message.message_id


def is_checklist_change(message: Message) -> bool:
    """``message`` is Telegram's service message about tasks of a checklist marked done, not done, or added."""
    return message.checklist_tasks_done is not None or message.checklist_tasks_added is not None


def _names(checklist: Checklist | None, ids: Sequence[int]) -> str:
    """The tasks ``ids`` as the model reads them: their texts, quoted (``task 3`` when the checklist is not sent)."""
    texts = {task.id: task.text for task in checklist.tasks} if checklist is not None else {}
    return ", ".join(repr(texts[i]) if i in texts else f"task {i}" for i in ids)


def tasks_input(message: Message) -> InputRef | None:
    """The input a change of a checklist's tasks becomes (None: no author, or nothing changed)."""
    user = message.from_user
    done, added = message.checklist_tasks_done, message.checklist_tasks_added
    shown = (done.checklist_message if done is not None else None) or (
        added.checklist_message if added is not None else None
    )
    checklist = shown.checklist if shown is not None else None
    if user is None:
        return None
    where = f"the checklist {checklist.title!r}" if checklist is not None else "a checklist"
    said: list[str] = []
    params = {"user": user.first_name, "user_id": str(user.id)}
    if done is not None and done.marked_as_done_task_ids:
        said.append(f"{user.first_name} marked {_names(checklist, done.marked_as_done_task_ids)} as done in {where}")
        params["done"] = ",".join(str(i) for i in done.marked_as_done_task_ids)
    if done is not None and done.marked_as_not_done_task_ids:
        not_done = done.marked_as_not_done_task_ids
        said.append(f"{user.first_name} marked {_names(checklist, not_done)} as not done in {where}")
        params["not_done"] = ",".join(str(i) for i in not_done)
    if added is not None and added.tasks:
        tasks = ", ".join(repr(task.text) for task in added.tasks)
        said.append(f"{user.first_name} added {tasks} to {where}")
        params["added"] = ",".join(str(task.id) for task in added.tasks)
    if not said:
        return None
    params["message_id"] = str(shown.message_id if shown is not None else message.message_id)  # (answers thread there)
    if user.username:
        params["username"] = user.username
    return InputRef(type=CHECKLIST_TASKS, data="; ".join(said), params=params)


async def on_checklist_change(
    adapter: ChatAdapter, message: Message, *, send: Send | None, update_id: int, allowlist: Allowlist
) -> None:
    """Hand a change of a checklist's tasks to the conversation of its chat (reached through the business
    connection the message names), as poll votes are handed."""
    thread_id = message.message_thread_id if message.is_topic_message else None
    args = ChatArgs(chat_id=message.chat.id, thread_id=thread_id, business_connection_id=message.business_connection_id)
    ref = tasks_input(message)
    if ref is None or send is None:
        return
    if not allowlist.allows(chat_ids=[args.chat_id], user_id=ref.params["user_id"]):
        adapter.metrics.ignored(telegram_chat, args, Ignored.ALLOWLIST)  # (TELEGRAM_ALLOWED_USERS)
        return
    adapter.metrics.received(telegram_chat, args)
    log.info("chat %s: checklist %s changed by user %s", args.chat_id, ref.params["message_id"], ref.params["user_id"])
    await send(telegram_chat, args, ref, dedupe_key=f"telegram:{update_id}")
