"""A fake Telegram Bot API server on 127.0.0.1 that the real python-telegram-bot client talks to.

Start it with ``start()`` and ``close()``, or ``async with FakeTelegramServer() as fake:``. Point the bot at it
with ``base_url=server.base_url`` (or ``TELEGRAM_API_URL=server.api_url``). It speaks what the adapter uses:
``getMe``, ``getUpdates`` (long poll with offset confirmation, woken at once when a message is injected),
``sendMessage``, ``editMessageText`` (keeping every version, refusing an edit that changes nothing with "message is
not modified"), ``deleteMessage``, ``sendMessageDraft`` (private chats only), ``sendChatAction``, ``setWebhook``
(then it posts updates to the webhook with the secret header, retrying until answered 2xx), ``deleteWebhook``,
``getWebhookInfo``, ``setMyCommands``, ``sendPhoto`` and ``sendVoice`` (multipart uploads, kept in ``media``),
``getFile`` (then the file's download at ``/file/bot<token>/<path>``,
counted in ``downloads``), and Telegram Business (Bot API 9.1 checklists): ``business_connection`` and
``business_message`` updates (``connect_business``, ``user_says(business=...)``), ``getBusinessConnection``,
``sendChecklist`` and ``editMessageChecklist`` (a connected account's chats only, 1-30 tasks, a title of 1-255
characters), and the service messages of tasks marked done or added (``user_marks_tasks``, ``user_adds_tasks``).
A chat the bot knows only through a business connection is written to only through it, as Telegram refuses a bot
that starts a conversation. Calls to anything else are answered 404 and recorded in ``unknown_calls`` so tests can
assert there are none.

Like Telegram it decodes PTB's form bodies, adds ``bot_command`` and ``mention`` entities to user messages,
parses HTML (unknown or unclosed tags are "can't parse entities"), trims the text, enforces 4,096 UTF-16 code
units after entity parsing, and can be told to answer 429 with ``retry_after`` or 400 "can't parse entities".
Tests inject "a user says X" with ``user_says`` (a photo, voice message or document with ``user_sends``) and await the bot's messages with ``wait_replies``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

import aiohttp
from aiohttp import web

__all__ = ("ApiCall", "FakeTelegramServer", "HtmlError", "SentMedia", "SentMessage", "Upload", "parse_html")

_RECHECK = 0.05
"""Seconds between two looks of ``wait_for`` at a predicate when nothing reached the fake."""

MESSAGE_LIMIT = 4096
_STRING_FIELDS = frozenset(
    {"text", "parse_mode", "action", "url", "secret_token", "caption", "ip_address", "language_code", "file_id"}
)
_TAGS = frozenset(
    {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a", "code", "pre"}
    | {"blockquote", "tg-emoji"}
)
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[a-zA-Z-]+(?:=\"[^\"]*\"|='[^']*'|=[^\s>]+)?)*)\s*>")
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#[0-9]+|#x[0-9a-fA-F]+);")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_COMMAND = re.compile(r"^/[A-Za-z0-9_]+(?:@[A-Za-z0-9_]+)?")
_MENTION = re.compile(r"(?<![\w@])@[A-Za-z0-9_]{5,32}")


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class HtmlError(ValueError):
    """Telegram's "can't parse entities"."""


def parse_html(raw: str) -> str:
    """The text Telegram shows for ``raw`` in HTML parse mode; ``HtmlError`` where Telegram refuses it."""
    out: list[str] = []
    stack: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "<":
            m = _TAG.match(raw, i)
            if m is None:
                raise HtmlError(f"Unexpected end of name token at byte offset {len(raw[:i].encode())}")
            closing, name = m.group(1) == "/", m.group(2).lower()
            if name not in _TAGS:
                raise HtmlError(f'Unsupported start tag "{name}" at byte offset {len(raw[:i].encode())}')
            if closing:
                if not stack or stack[-1] != name:
                    expected = f'expected "</{stack[-1]}>"' if stack else "no tag is open"
                    raise HtmlError(
                        f'Unmatched end tag at byte offset {len(raw[:i].encode())}, {expected}, found "</{name}>"'
                    )
                stack.pop()
            else:
                if name == "a" and "href=" not in m.group(3):
                    raise HtmlError("Can't find href of the link")
                stack.append(name)
            i = m.end()
        elif ch == "&":
            m = _ENTITY.match(raw, i)
            if m is None:
                out.append("&")
                i += 1
                continue
            code = m.group(1)
            if code in _NAMED:
                out.append(_NAMED[code])
            else:
                out.append(chr(int(code[2:], 16) if code[1] == "x" else int(code[1:])))
            i = m.end()
        elif ch == ">":
            raise HtmlError(f"Unexpected > at byte offset {len(raw[:i].encode())}")
        else:
            out.append(ch)
            i += 1
    if stack:
        raise HtmlError(f'Can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(out)


@dataclass(kw_only=True)
class ApiCall:
    """One request the bot made."""

    method: str
    params: dict[str, Any]
    status: int = 200
    at: float = field(default_factory=time.monotonic)
    token: str = ""
    """The token it was made with (one of ``tokens``)."""
    done: bool = False
    """Its answer was written (the bot may or may not have read it)."""


@dataclass
class Upload:
    """A file the bot uploaded in a multipart request."""

    filename: str
    content_type: str
    data: bytes


@dataclass
class SentMedia:
    """A photo (``sendPhoto``) or voice message (``sendVoice``) the bot posted."""

    method: str
    chat_id: int
    message_id: int
    file: Upload
    caption: str | None
    reply_to: int | None
    thread_id: int | None


_TOKEN: contextvars.ContextVar[str] = contextvars.ContextVar("token", default="")
"""The token of the request being handled (each request is a task of its own)."""


@dataclass(kw_only=True)
class SentMessage:
    """A message the bot posted."""

    chat_id: int
    message_id: int
    text: str
    """What the user sees (HTML parsed)."""
    raw: str
    """What the bot sent."""
    parse_mode: str | None
    reply_to: int | None
    thread_id: int | None
    business_connection_id: str | None = None
    """The business connection it was sent through (on the business account's behalf)."""
    edits: list[str] = field(default_factory=list)
    """Earlier versions, oldest first, when the message was edited."""
    edited_at: list[float] = field(default_factory=list)
    """``time.monotonic()`` of each edit."""
    posted_at: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` when it was posted."""
    deleted: bool = False
    """The bot deleted it."""
    reply_markup: dict[str, Any] | None = None
    """The inline keyboard under it, as the bot sent it (``{"inline_keyboard": [[{"text", "callback_data"}]]}``)."""
    token: str = field(default_factory=_TOKEN.get)
    """The token it was posted with (which of a fleet's workers posted it, where each has its own)."""

    @property
    def buttons(self) -> dict[str, str]:
        """The inline keyboard's buttons: ``callback_data`` by label."""
        rows = (self.reply_markup or {}).get("inline_keyboard") or []
        return {b["text"]: b.get("callback_data", "") for row in rows for b in row}

    @property
    def versions(self) -> list[str]:
        """Every text the message showed, oldest first (the current one last)."""
        return [*self.edits, self.text]


@dataclass(kw_only=True)
class _Failure:
    method: str
    times: int
    status: int
    description: str
    retry_after: int | None
    parameters: dict[str, Any] | None
    when: Callable[[dict[str, Any]], bool] | None


class FakeTelegramServer:
    """The fake Bot API. ``await start()``, then use ``base_url``; ``await close()`` at the end."""

    def __init__(
        self,
        *,
        token: str = "123456:TEST-token_for-the-fake",
        bot_id: int = 123456,
        username: str = "daydream_test_bot",
        first_name: str = "Daydream",
    ) -> None:
        self.token = token
        self.bot = {
            "id": bot_id,
            "is_bot": True,
            "first_name": first_name,
            "username": username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        self.tokens: set[str] = set()
        """More tokens of the same bot (the fake accepts them too, and records which one each call used: one
        per process tells the processes' requests apart)."""
        self.post_delay = 0.0
        """Seconds ``sendMessage`` waits between making the message and answering (the network's way back)."""
        self.calls: list[ApiCall] = []
        """Every request, in order."""
        self.unknown_calls: list[ApiCall] = []
        """Requests for methods this fake does not implement."""
        self.sent: list[SentMessage] = []
        """Messages the bot posted, in order."""
        self.media: list[SentMedia] = []
        """Photos and voice messages the bot posted, in order."""
        self.chat_actions: list[tuple[int, str, int | None]] = []
        """``(chat_id, action, thread_id)`` of every ``sendChatAction``."""
        self.drafts: list[tuple[int, int, str]] = []
        """``(chat_id, draft_id, visible text)`` of every ``sendMessageDraft``."""
        self.stoppable_drafts: dict[tuple[int, int], bool] = {}
        """``(chat_id, draft_id)`` of the drafts sent with ``can_stop`` (Bot API 10.3): whether ``keep_on_stop`` too."""
        self.pending: list[dict[str, Any]] = []
        """Updates not yet confirmed by an offset (or, with a webhook, not yet answered 2xx)."""
        self.served: dict[int, int] = {}
        """How many times each update id was handed out (getUpdates or webhook)."""
        self.webhook_url: str | None = None
        self.webhook_secret: str | None = None
        self.webhook_deliveries: list[tuple[int, int]] = []
        """``(update_id, HTTP status)`` of every webhook delivery attempt."""
        self.commands: list[dict[str, Any]] = []
        self.admins: dict[int, set[int]] = {}
        """Administrators by group chat id (``getChatMember`` answers ``administrator`` for them)."""
        self.callback_answers: list[dict[str, Any]] = []
        """The parameters of every ``answerCallbackQuery``."""
        self._callback_ids = itertools.count(1)
        self.files: dict[str, tuple[str, bytes]] = {}
        """Files users sent, by ``file_id``: ``(file_path, bytes)``."""
        self.downloads: list[str] = []
        """The ``file_path`` of every file download, in order."""
        self._file_ids = itertools.count(1)
        self.polls: dict[str, dict[str, Any]] = {}
        """The polls the bot sent (``sendPoll``), by poll id, as Telegram keeps them (``is_closed`` once stopped)."""
        self.poll_messages: dict[str, tuple[int, int]] = {}
        """``(chat_id, message_id)`` of each poll's message, by poll id."""
        self.refuse_rich = False
        """Answer ``sendRichMessage`` with 400, as a Bot API server (or a chat) that cannot take rich messages does."""
        self.guest_answers: dict[str, dict[str, str]] = {}
        """Answers to guest requests (``answerGuestQuery``), by query id: ``raw`` as sent, ``text`` as shown."""
        self.allowed_updates: list[str] | None = None
        """What the bot last asked for (``getUpdates`` or ``setWebhook``); reactions and poll answers are delivered
        only when asked for, as Telegram does."""
        self.business_connections: dict[str, dict[str, Any]] = {}
        """The Telegram Business connections (``BusinessConnection``), by id."""
        self.business_chats: dict[int, str] = {}
        """The chats of connected business accounts where people wrote: the connection, by chat id."""
        self.checklists: dict[tuple[int, int], dict[str, Any]] = {}
        """The checklists the bot sent (``sendChecklist``), by ``(chat_id, message_id)``, as Telegram keeps them
        (each task's ``completed_by_user`` and ``completion_date`` once marked done)."""
        self._bot_chats: set[int] = set()
        """The chats the bot itself is in (written to without a business connection)."""
        self._chats: dict[int, dict[str, Any]] = {}
        self._messages: dict[tuple[int, int], dict[str, Any]] = {}
        self._message_ids: dict[int, itertools.count[int]] = {}
        self._update_ids = itertools.count(1000)
        self._failures: list[_Failure] = []
        self._waiters: set[asyncio.Future[None]] = set()
        self._closing = False
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._delivery: asyncio.Task[None] | None = None
        self._webhook_wake = asyncio.Event()
        self.port = 0

    # -- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on 127.0.0.1, a free port."""
        app = web.Application()
        app.router.add_route("POST", "/bot{token}/{method}", self._handle)
        app.router.add_route("GET", "/bot{token}/{method}", self._handle)
        app.router.add_route("GET", "/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self._session = aiohttp.ClientSession()

    async def close(self) -> None:
        """Release long polls, stop webhook deliveries, stop listening."""
        self._closing = True
        self._notify()
        if self._delivery is not None:
            self._delivery.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._delivery
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def api_url(self) -> str:
        """The Bot API server's root (``TELEGRAM_API_URL``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """PTB's ``base_url``: the token is appended to it."""
        return f"{self.api_url}/bot"

    # -- what tests tell it ----------------------------------------------------------------------------

    def chat(self, chat_id: int, *, kind: str = "private", title: str = "", forum: bool = False) -> dict[str, Any]:
        """Make a chat known (``kind``: private, group, supergroup)."""
        if kind == "private":
            chat: dict[str, Any] = {"id": chat_id, "type": "private", "first_name": title or "User"}
        else:
            chat = {"id": chat_id, "type": kind, "title": title or f"Group {chat_id}"}
            if forum:
                chat["is_forum"] = True
        self._chats[chat_id] = chat
        return chat

    def user_says(
        self,
        text: str,
        *,
        user_id: int = 1001,
        first_name: str = "Ann",
        username: str | None = "ann",
        chat_id: int | None = None,
        kind: str = "private",
        title: str = "",
        thread_id: int | None = None,
        reply_to: int | None = None,
        is_bot: bool = False,
        media: dict[str, Any] | None = None,
        forward_of: dict[str, Any] | None = None,
        quote: str | None = None,
        on_behalf_of: int | None = None,
        business: str | None = None,
    ) -> dict[str, Any]:
        """A user writes ``text``; returns the update (also queued for the bot). ``on_behalf_of``: the id of a known
        chat it is sent as (``sender_chat``: the group itself for an anonymous admin, whose ``from`` is then
        ``GroupAnonymousBot``, or a channel). ``chat_id`` defaults to
        the user's private chat; ``thread_id`` puts it in a forum topic; ``reply_to`` replies to a message;
        ``media`` are fields of a message with a file (``photo``, ``voice``...), ``text`` its caption;
        ``forward_of``: the user (``self.bot`` for the bot itself) whose message this forwards (``text`` is that
        message's); ``quote``: the part of the ``reply_to`` message quoted (with its own entities); ``business``: the
        id of a business connection (``connect_business``): the user writes to that business account, in their private
        chat with it (a ``business_message``, the bot answering on the account's behalf)."""
        chat_id = user_id if chat_id is None else chat_id
        chat = self._chats.get(chat_id) or self.chat(
            chat_id, kind=kind, title=title or first_name, forum=thread_id is not None
        )
        if business is not None:
            if not self.business_connections[business]["is_enabled"]:
                raise AssertionError(f"business connection {business} is off: Telegram sends the bot nothing of it")
            self.business_chats[chat_id] = business
        else:
            self._bot_chats.add(chat_id)
        sender: dict[str, Any] = {"id": user_id, "is_bot": is_bot, "first_name": first_name}
        if username:
            sender["username"] = username
        message: dict[str, Any] = {
            "message_id": self._next_message_id(chat_id),
            "date": int(time.time()),
            "chat": chat,
            "from": sender,
        }
        if media is None:
            message["text"] = text
        else:
            message.update(media)
            if text:
                message["caption"] = text
        entities = self._entities(text)
        if entities:
            message["entities" if media is None else "caption_entities"] = entities
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
            message["reply_to_message"] = self._topic_root(chat, thread_id)
        if reply_to is not None:
            message["reply_to_message"] = dict(self._messages[(chat_id, reply_to)])
        if quote is not None:
            message["quote"] = {"text": quote, "position": 0, "is_manual": True}
            if self._entities(quote):
                message["quote"]["entities"] = self._entities(quote)
        if on_behalf_of is not None:
            message["sender_chat"] = self._chats[on_behalf_of]
            if on_behalf_of == chat_id:
                message["from"] = {
                    "id": 1087968824,
                    "is_bot": True,
                    "first_name": "Group",
                    "username": "GroupAnonymousBot",
                }
        if forward_of is not None:
            origin = {k: forward_of[k] for k in ("id", "is_bot", "first_name", "username") if k in forward_of}
            message["forward_origin"] = {"type": "user", "date": int(time.time()) - 60, "sender_user": origin}
        if business is not None:
            message["business_connection_id"] = business
        self._messages[(chat_id, message["message_id"])] = message
        update = {"update_id": next(self._update_ids), "business_message" if business else "message": message}
        self.push(update)
        return update

    def connect_business(
        self,
        connection_id: str = "biz-1",
        *,
        owner_id: int = 2001,
        first_name: str = "Bea's Bakery",
        enabled: bool = True,
        can_reply: bool = True,
    ) -> dict[str, Any]:
        """The owner of a Telegram Business account connects the bot to it (or, with ``enabled=False``, turns it
        off); returns the ``business_connection`` update (queued too). ``can_reply``: the bot may write in the
        account's chats."""
        owner = {"id": owner_id, "is_bot": False, "first_name": first_name}
        self.chat(owner_id, title=first_name)
        self._bot_chats.add(owner_id)  # (the connection's ``user_chat_id``: the owner's chat with the bot)
        connection: dict[str, Any] = {
            "id": connection_id,
            "user": owner,
            "user_chat_id": owner_id,
            "date": int(time.time()),
            "is_enabled": enabled,
            "rights": {"can_reply": True, "can_read_messages": True} if can_reply else {},
        }
        self.business_connections[connection_id] = connection
        update = {"update_id": next(self._update_ids), "business_connection": connection}
        self.push(update)
        return update

    def user_marks_tasks(
        self,
        chat_id: int,
        message_id: int,
        *,
        done: list[int] = [],  # noqa: B006 (never changed)
        not_done: list[int] = [],  # noqa: B006
        user_id: int = 1001,
        first_name: str = "Ann",
    ) -> dict[str, Any]:
        """A user marks tasks of the bot's checklist ``message_id`` done (or not done); returns the service message's
        ``business_message`` update (``checklist_tasks_done``, queued too)."""
        checklist = self._checklist_of_people(chat_id, message_id, "others_can_mark_tasks_as_done")
        user = {"id": user_id, "is_bot": False, "first_name": first_name}
        tasks = {task["id"]: task for task in checklist["tasks"]}
        for task_id in [*done, *not_done]:
            if task_id not in tasks:
                raise AssertionError(f"the checklist has no task {task_id}")
        for task_id in done:
            tasks[task_id].update(completed_by_user=user, completion_date=int(time.time()))
        for task_id in not_done:
            tasks[task_id].pop("completed_by_user", None)
            tasks[task_id]["completion_date"] = 0
        change = {"checklist_message": self._checklist_message(chat_id, message_id)}
        if done:
            change["marked_as_done_task_ids"] = list(done)
        if not_done:
            change["marked_as_not_done_task_ids"] = list(not_done)
        return self._checklist_service(chat_id, user, "checklist_tasks_done", change)

    def user_adds_tasks(
        self, chat_id: int, message_id: int, texts: list[str], *, user_id: int = 1001, first_name: str = "Ann"
    ) -> dict[str, Any]:
        """A user adds tasks to the bot's checklist ``message_id``; returns the service message's ``business_message``
        update (``checklist_tasks_added``, queued too)."""
        checklist = self._checklist_of_people(chat_id, message_id, "others_can_add_tasks")
        if len(checklist["tasks"]) + len(texts) > _CHECKLIST_TASKS:
            raise AssertionError(f"a checklist holds {_CHECKLIST_TASKS} tasks at most")
        first = max(task["id"] for task in checklist["tasks"]) + 1
        added = [{"id": first + n, "text": text, "completion_date": 0} for n, text in enumerate(texts)]
        checklist["tasks"].extend(added)
        change = {"checklist_message": self._checklist_message(chat_id, message_id), "tasks": added}
        user = {"id": user_id, "is_bot": False, "first_name": first_name}
        return self._checklist_service(chat_id, user, "checklist_tasks_added", change)

    def _checklist_of_people(self, chat_id: int, message_id: int, right: str) -> dict[str, Any]:
        checklist = self.checklists.get((chat_id, message_id))
        if checklist is None:
            raise AssertionError(f"no checklist of the bot's is message {message_id} of chat {chat_id}")
        if not checklist.get(right):
            raise AssertionError(f"the checklist was sent without {right}: Telegram lets nobody else change it")
        return checklist

    def _checklist_message(self, chat_id: int, message_id: int) -> dict[str, Any]:
        message = dict(self._messages[(chat_id, message_id)])
        message["checklist"] = json.loads(json.dumps(self.checklists[(chat_id, message_id)]))
        return message

    def _checklist_service(
        self, chat_id: int, user: dict[str, Any], kind: str, change: dict[str, Any]
    ) -> dict[str, Any]:
        message = {
            "message_id": self._next_message_id(chat_id),
            "date": int(time.time()),
            "chat": self._chats[chat_id],
            "from": user,
            "business_connection_id": self.business_chats[chat_id],
            kind: change,
        }
        self._messages[(chat_id, message["message_id"])] = message
        update = {"update_id": next(self._update_ids), "business_message": message}
        self.push(update)
        return update

    def user_presses(
        self, message: SentMessage, label: str, *, user_id: int = 1001, first_name: str = "Ann"
    ) -> dict[str, Any]:
        """A user presses the button ``label`` of the inline keyboard under the bot's ``message``; returns the
        update (a ``callback_query``, also queued for the bot)."""
        data = message.buttons[label]
        chat = self._chats[message.chat_id]
        shown: dict[str, Any] = {
            "message_id": message.message_id,
            "date": int(message.posted_at),
            "chat": chat,
            "from": self.bot,
            "text": message.text,
        }
        if message.thread_id is not None:
            shown["message_thread_id"] = message.thread_id
        query = {
            "id": str(next(self._callback_ids)),
            "from": {"id": user_id, "is_bot": False, "first_name": first_name},
            "message": shown,
            "chat_instance": f"instance-{message.chat_id}",
            "data": data,
        }
        update = {"update_id": next(self._update_ids), "callback_query": query}
        self.push(update)
        return update

    def user_sends(
        self,
        kind: str,
        data: bytes,
        *,
        caption: str = "",
        file_name: str | None = None,
        mime_type: str | None = None,
        file_size: int | None = None,
        **who: Any,
    ) -> dict[str, Any]:
        """A user sends a ``photo``, ``voice``, ``audio`` or ``document`` holding ``data`` (``file_size``
        may claim more, for limits); the rest is as in ``user_says``. Returns the update."""
        size = len(data) if file_size is None else file_size

        def file(path: str, **fields: Any) -> dict[str, Any]:
            number = next(self._file_ids)
            file_id = f"file-{number}-{kind}"
            self.files[file_id] = (f"{kind}s/file_{number}{path}", data)
            return {"file_id": file_id, "file_unique_id": f"u{number}", "file_size": size, **fields}

        media: dict[str, Any]
        if kind == "photo":  # Telegram keeps a thumbnail and the picture
            media = {"photo": [file(".jpg", width=90, height=60), file(".jpg", width=1280, height=853)]}
        elif kind == "voice":
            media = {"voice": file(".oga", duration=3, mime_type=mime_type or "audio/ogg")}
        else:
            extra = {k: v for k, v in (("file_name", file_name), ("mime_type", mime_type)) if v is not None}
            media = {kind: file("", **extra)}
        return self.user_says(caption, media=media, **who)

    def bot_membership(self, chat_id: int, status: str, *, by: int = 1001) -> dict[str, Any]:
        """The bot's own membership of the chat becomes ``status`` (``kicked``: removed from a group, or blocked by
        the user of a private chat; ``left``; ``member``), changed by the user ``by``; returns the update (a
        ``my_chat_member``, also queued for the bot)."""
        member: dict[str, Any] = {"status": status, "user": self.bot}
        if status == "kicked":
            member["until_date"] = 0
        change = {
            "chat": self._chats[chat_id],
            "from": {"id": by, "is_bot": False, "first_name": "User"},
            "date": int(time.time()),
            "old_chat_member": {"status": "member", "user": self.bot},
            "new_chat_member": member,
        }
        update = {"update_id": next(self._update_ids), "my_chat_member": change}
        self.push(update)
        return update

    def user_stops_draft(self, chat_id: int, draft_id: int, *, thread_id: int | None = None) -> dict[str, Any]:
        """The user presses Stop on the draft ``draft_id`` being written in their chat (it must have been sent with
        ``can_stop``, which shows the button); returns the update (a ``stopped_message_generation``, also queued)."""
        if (chat_id, draft_id) not in self.stoppable_drafts:
            raise AssertionError(f"draft {draft_id} in chat {chat_id} was not sent with can_stop: no Stop button shown")
        stopped: dict[str, Any] = {"chat": self._chats[chat_id], "draft_id": draft_id}
        if thread_id is not None:
            stopped["message_thread_id"] = thread_id
        update = {"update_id": next(self._update_ids), "stopped_message_generation": stopped}
        self.push(update)
        return update

    def user_reacts(
        self, chat_id: int, message_id: int, emoji: str, *, user_id: int = 1001, first_name: str = "Ann", old: str = ""
    ) -> dict[str, Any]:
        """A user sets the reaction ``emoji`` (``""``: takes theirs back) on a message; ``old`` is the reaction it
        replaces. Returns the ``message_reaction`` update (queued too)."""

        def reactions(value: str) -> list[dict[str, Any]]:
            return [{"type": "emoji", "emoji": value}] if value else []

        change = {
            "chat": self._chats.get(chat_id) or self.chat(chat_id),
            "message_id": message_id,
            "user": {"id": user_id, "is_bot": False, "first_name": first_name},
            "date": int(time.time()),
            "old_reaction": reactions(old),
            "new_reaction": reactions(emoji),
        }
        update = {"update_id": next(self._update_ids), "message_reaction": change}
        self.push(update)
        return update

    def user_summons(
        self,
        text: str,
        *,
        chat_id: int,
        title: str = "A group",
        user_id: int = 1001,
        first_name: str = "Ann",
        reply_to: int | None = None,
    ) -> dict[str, Any]:
        """A user mentions the bot as a guest (Bot API 10.0 guest mode) in ``chat_id``, a chat the bot is not part
        of, with ``text`` (``@<bot>`` is put in front); ``reply_to``: the chat's message the request replies to
        (sent along, as Telegram sends referenced messages). Returns the ``guest_message`` update (queued too)."""
        chat = self._chats.get(chat_id) or self.chat(chat_id, kind="supergroup", title=title)
        caller = {"id": user_id, "is_bot": False, "first_name": first_name}
        query_id = f"guest-{next(self._update_ids)}"
        message: dict[str, Any] = {
            "message_id": self._next_message_id(chat_id),
            "date": int(time.time()),
            "chat": chat,
            "from": caller,
            "text": f"@{self.bot['username']} {text}",
            "guest_query_id": query_id,
            "guest_bot_caller_user": caller,
        }
        if reply_to is not None:
            message["reply_to_message"] = dict(self._messages[(chat_id, reply_to)])
        self._messages[(chat_id, message["message_id"])] = message
        update = {"update_id": next(self._update_ids), "guest_message": message}
        self.push(update)
        return update

    def user_answers_poll(
        self, poll_id: str, option_ids: list[int], *, user_id: int = 1001, first_name: str = "Ann"
    ) -> dict[str, Any]:
        """A user votes in the bot's poll ``poll_id`` (a non-anonymous one: Telegram sends the bot a
        ``poll_answer``); the poll's counts change too (a ``poll`` update follows). Returns the ``poll_answer``."""
        poll = self.polls[poll_id]
        if poll["is_closed"]:
            raise AssertionError(f"poll {poll_id} is closed: Telegram takes no more votes")
        for option_id in option_ids:
            poll["options"][option_id]["voter_count"] += 1
        poll["total_voter_count"] += 1
        answer = {
            "poll_id": poll_id,
            "user": {"id": user_id, "is_bot": False, "first_name": first_name},
            "option_ids": option_ids,
            "option_persistent_ids": [poll["options"][i]["persistent_id"] for i in option_ids],  # (Bot API 9.6)
        }
        update = {"update_id": next(self._update_ids), "poll_answer": answer}
        self.push(update)
        self.push({"update_id": next(self._update_ids), "poll": dict(poll)})
        return update

    def push(self, update: dict[str, Any]) -> None:
        """Queue an update as it is (pushing the same one twice delivers it twice)."""
        self.pending.append(update)
        self._webhook_wake.set()
        self._notify()

    def fail(
        self,
        method: str,
        *,
        status: int = 429,
        retry_after: int | None = 1,
        description: str | None = None,
        times: int = 1,
        parameters: dict[str, Any] | None = None,
        when: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` (matching ``when``) with an error; ``parameters``
        is Telegram's ``ResponseParameters`` (``migrate_to_chat_id``), ``retry_after`` is added for 429."""
        if description is None:
            description = (
                f"Too Many Requests: retry after {retry_after}" if status == 429 else "Bad Request: refused by the test"
            )
        self._failures.append(
            _Failure(
                method=method,
                times=times,
                status=status,
                description=description,
                retry_after=retry_after if status == 429 else None,
                parameters=parameters,
                when=when,
            )
        )

    def refuse_entities(self, *, times: int = 1) -> None:
        """Answer the next ``times`` HTML messages with "can't parse entities", as Telegram does for bad HTML."""
        self.fail(
            "sendMessage",
            status=400,
            description='Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 0',
            times=times,
            when=lambda params: params.get("parse_mode") == "HTML",
        )

    async def wait_for(self, predicate: Callable[[], bool], *, timeout: float = 10.0) -> None:
        """Wait until ``predicate()`` holds: checked after every request and injection, and every 50 ms besides, so
        a predicate on something the fake does not see (the model's requests, a store, an observer's list) is not
        left for the fake's next request, which may be a long poll returning 10 s later."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout):
            while not predicate():
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.add(waiter)
                try:
                    await asyncio.wait({waiter}, timeout=_RECHECK)
                finally:
                    self._waiters.discard(waiter)
                    waiter.cancel()

    async def wait_replies(self, count: int, *, chat_id: int | None = None, timeout: float = 10.0) -> list[SentMessage]:
        """Wait for ``count`` messages from the bot (in ``chat_id``, if given) and return them."""

        def mine() -> list[SentMessage]:
            return [m for m in self.sent if chat_id is None or m.chat_id == chat_id]

        await self.wait_for(lambda: len(mine()) >= count, timeout=timeout)
        return mine()

    def calls_of(self, method: str) -> list[ApiCall]:
        """The requests for ``method``."""
        return [c for c in self.calls if c.method == method]

    # -- the API ---------------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        method = _METHODS.get(method.lower(), method)  # Bot API methods are case-insensitive
        params = await self._params(request)
        call = ApiCall(method=method, params=params, token=request.match_info["token"])
        self.calls.append(call)
        _TOKEN.set(call.token)
        self._notify()  # a long poll answers late: ``wait_for`` sees its offset now
        try:
            if call.token != self.token and call.token not in self.tokens:
                return self._error(call, 401, "Unauthorized")
            failure = self._failure(method, params)
            if failure is not None:
                extra = dict(failure.parameters or {})
                if failure.retry_after is not None:
                    extra["retry_after"] = failure.retry_after
                return self._error(call, failure.status, failure.description, parameters=extra)
            handler = getattr(self, f"_api_{method}", None)
            if handler is None:
                self.unknown_calls.append(call)
                return self._error(call, 404, "Not Found")
            try:
                result = await handler(params)
            except _ApiError as exc:
                return self._error(call, exc.status, exc.description)
            if method == "sendMessage" and self.post_delay:
                await asyncio.sleep(self.post_delay)
            return web.json_response({"ok": True, "result": result})
        finally:
            call.done = True
            self._notify()

    async def _params(self, request: web.Request) -> dict[str, Any]:
        if request.content_type == "application/json":
            body = await request.json()
            return dict(body) if isinstance(body, dict) else {}
        form = await request.post()
        params: dict[str, Any] = dict(request.query)
        for key, value in form.items():
            if isinstance(value, web.FileField):
                params[key] = Upload(value.filename, value.content_type, value.file.read())
                continue
            if not isinstance(value, str):
                continue
            if key in _STRING_FIELDS:
                params[key] = value
                continue
            try:
                params[key] = json.loads(value)
            except ValueError:
                params[key] = value
        return params

    def _failure(self, method: str, params: dict[str, Any]) -> _Failure | None:
        for failure in self._failures:
            if failure.method == method and failure.times > 0 and (failure.when is None or failure.when(params)):
                failure.times -= 1
                return failure
        return None

    def _error(
        self, call: ApiCall, status: int, description: str, *, parameters: dict[str, Any] | None = None
    ) -> web.Response:
        call.status = status
        body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
        if parameters:
            body["parameters"] = parameters
        return web.json_response(body, status=status)

    async def _api_getFile(self, params: dict[str, Any]) -> Any:
        file_id = str(params.get("file_id", ""))
        if file_id not in self.files:
            raise _ApiError(400, "Bad Request: invalid file_id")
        path, data = self.files[file_id]
        return {"file_id": file_id, "file_unique_id": file_id, "file_size": len(data), "file_path": path}

    async def _download(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        path = request.match_info["path"]
        for stored_path, data in self.files.values():
            if stored_path == path:
                self.downloads.append(path)
                self._notify()
                return web.Response(body=data)
        return web.Response(status=404)

    async def _api_getMe(self, params: dict[str, Any]) -> Any:
        return self.bot

    async def _api_getUpdates(self, params: dict[str, Any]) -> Any:
        if self.webhook_url:
            raise _ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
            )
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        timeout = float(params.get("timeout") or 0)
        if offset:
            self.pending = [u for u in self.pending if u["update_id"] >= offset]
        if "allowed_updates" in params:
            wanted = params["allowed_updates"]
            self.allowed_updates = json.loads(wanted) if isinstance(wanted, str) else list(wanted)
        asked = self.allowed_updates
        if asked:  # (only the kinds Telegram leaves out unless asked for: the others are tested as they were)
            self.pending = [u for u in self.pending if not (_OPT_IN & u.keys()) or (_OPT_IN & u.keys()) <= set(asked)]
        if not self.pending and timeout > 0 and not self._closing:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._changed(lambda: bool(self.pending) or self._closing)
        batch = self.pending[:limit]
        for update in batch:
            self.served[update["update_id"]] = self.served.get(update["update_id"], 0) + 1
        return batch

    async def _api_sendMessage(self, params: dict[str, Any]) -> Any:
        chat = self._chat(params)
        text = self._visible(params)
        reply = params.get("reply_parameters") or {}
        reply_to = reply.get("message_id") if isinstance(reply, dict) else None
        if (
            reply_to is not None
            and (chat["id"], reply_to) not in self._messages
            and not reply.get("allow_sending_without_reply")
        ):
            raise _ApiError(400, "Bad Request: message to be replied not found")
        message_id = self._next_message_id(chat["id"])
        thread_id = params.get("message_thread_id")
        self.sent.append(
            SentMessage(
                chat_id=chat["id"],
                message_id=message_id,
                text=text,
                raw=params["text"],
                parse_mode=params.get("parse_mode"),
                reply_to=reply_to,
                thread_id=thread_id,
                reply_markup=params.get("reply_markup"),
                business_connection_id=params.get("business_connection_id"),
            )
        )
        message = {"message_id": message_id, "date": int(time.time()), "chat": chat, "from": self.bot, "text": text}
        message.update(self._on_behalf(params))
        if thread_id is not None:
            message["message_thread_id"] = thread_id
        self._messages[(chat["id"], message_id)] = message
        return message

    async def _api_sendPoll(self, params: dict[str, Any]) -> Any:
        chat = self._chat(params)
        options = params["options"]
        options = json.loads(options) if isinstance(options, str) else options
        texts = [o["text"] if isinstance(o, dict) else str(o) for o in options]
        if not 2 <= len(texts) <= 12:
            raise _ApiError(400, "Bad Request: poll must have 2-12 options")
        poll_id = str(5000 + len(self.polls))
        poll = {
            "id": poll_id,
            "question": params["question"],
            "options": [{"text": t, "voter_count": 0, "persistent_id": f"o{n}"} for n, t in enumerate(texts)],
            "total_voter_count": 0,
            "is_closed": False,
            "is_anonymous": _true(params.get("is_anonymous", True)),
            "type": params.get("type") or "regular",
            "allows_multiple_answers": _true(params.get("allows_multiple_answers", False)),
            "allows_revoting": True,  # (Bot API 9.6)
            "members_only": False,  # (Bot API 10.0)
        }
        self.polls[poll_id] = poll
        message_id = self._next_message_id(chat["id"])
        message = {"message_id": message_id, "date": int(time.time()), "chat": chat, "from": self.bot, "poll": poll}
        if params.get("message_thread_id") is not None:
            message["message_thread_id"] = params["message_thread_id"]
        self._messages[(chat["id"], message_id)] = message
        self.poll_messages[poll_id] = (chat["id"], message_id)
        return message

    async def _api_answerGuestQuery(self, params: dict[str, Any]) -> Any:
        query_id = params["guest_query_id"]
        if query_id in self.guest_answers:
            raise _ApiError(400, "Bad Request: query is too old and response timeout expired or query ID is invalid")
        result = params["result"]
        result = json.loads(result) if isinstance(result, str) else result
        content = result["input_message_content"]
        self.guest_answers[query_id] = {
            "raw": content["message_text"],
            "text": parse_html(content["message_text"])
            if content.get("parse_mode") == "HTML"
            else content["message_text"],
        }
        return {"inline_message_id": f"inline-{query_id}"}

    async def _api_sendRichMessage(self, params: dict[str, Any]) -> Any:
        if self.refuse_rich:
            raise _ApiError(400, "Bad Request: RICH_MESSAGE_INVALID")
        chat = self._chat(params)
        rich = params["rich_message"]
        rich = json.loads(rich) if isinstance(rich, str) else rich
        markdown = rich.get("markdown")
        if not markdown:
            raise _ApiError(400, "Bad Request: rich message must have markdown or html")
        reply = params.get("reply_parameters") or {}
        reply = json.loads(reply) if isinstance(reply, str) else reply
        message_id = self._next_message_id(chat["id"])
        thread_id = params.get("message_thread_id")
        self.sent.append(
            SentMessage(
                chat_id=chat["id"],
                message_id=message_id,
                text=markdown,
                raw=markdown,
                parse_mode="rich",
                reply_to=reply.get("message_id"),
                thread_id=thread_id,
            )
        )
        message = {"message_id": message_id, "date": int(time.time()), "chat": chat, "from": self.bot}
        self._messages[(chat["id"], message_id)] = message
        return message

    async def _api_stopPoll(self, params: dict[str, Any]) -> Any:
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        for poll_id, where in self.poll_messages.items():
            if where == (chat_id, message_id):
                self.polls[poll_id]["is_closed"] = True
                return self.polls[poll_id]
        raise _ApiError(400, "Bad Request: message with poll to stop not found")

    async def _api_getBusinessConnection(self, params: dict[str, Any]) -> Any:
        connection = self.business_connections.get(str(params.get("business_connection_id")))
        if connection is None:
            raise _ApiError(400, "Bad Request: BUSINESS_CONNECTION_INVALID")
        return connection

    async def _api_sendChecklist(self, params: dict[str, Any]) -> Any:
        if not params.get("business_connection_id"):  # (a bot sends checklists on behalf of a business account only)
            raise _ApiError(400, "Bad Request: parameter business_connection_id is required")
        chat = self._chat(params)
        checklist = self._input_checklist(params.get("checklist"))
        reply = params.get("reply_parameters") or {}
        reply_to = reply.get("message_id") if isinstance(reply, dict) else None
        missing = reply_to is not None and (chat["id"], reply_to) not in self._messages
        if missing and not reply.get("allow_sending_without_reply"):
            raise _ApiError(400, "Bad Request: message to be replied not found")
        message_id = self._next_message_id(chat["id"])
        message = {"message_id": message_id, "date": int(time.time()), "chat": chat, **self._on_behalf(params)}
        self._messages[(chat["id"], message_id)] = message
        self.checklists[(chat["id"], message_id)] = checklist
        return {**message, "checklist": checklist}

    async def _api_editMessageChecklist(self, params: dict[str, Any]) -> Any:
        if not params.get("business_connection_id"):
            raise _ApiError(400, "Bad Request: parameter business_connection_id is required")
        chat = self._chat(params)
        key = (chat["id"], int(params.get("message_id") or 0))
        old = self.checklists.get(key)
        if old is None:
            raise _ApiError(400, "Bad Request: message to edit not found")
        new = self._input_checklist(params.get("checklist"))
        done = {task["id"]: task for task in old["tasks"] if task.get("completed_by_user")}
        for task in new["tasks"]:  # Telegram keeps a task done when the new checklist keeps its id
            if task["id"] in done:
                task.update(completed_by_user=done[task["id"]]["completed_by_user"])
                task["completion_date"] = done[task["id"]]["completion_date"]
        if new == old:
            raise _ApiError(400, "Bad Request: message is not modified")
        self.checklists[key] = new
        message = dict(self._messages[key])
        return {**message, "checklist": new, "edit_date": int(time.time())}

    def _input_checklist(self, raw: Any) -> dict[str, Any]:
        """The ``Checklist`` Telegram makes of an ``InputChecklist``, checked as Telegram checks it."""
        given = json.loads(raw) if isinstance(raw, str) else raw
        if not isinstance(given, dict):
            raise _ApiError(400, "Bad Request: checklist is required")
        title = str(given.get("title") or "").strip()
        if not 1 <= _utf16(title) <= _CHECKLIST_TITLE:
            raise _ApiError(400, f"Bad Request: checklist title must be 1-{_CHECKLIST_TITLE} characters")
        tasks = given.get("tasks") or []
        if not 1 <= len(tasks) <= _CHECKLIST_TASKS:
            raise _ApiError(400, f"Bad Request: a checklist must have 1-{_CHECKLIST_TASKS} tasks")
        ids = [task.get("id") for task in tasks]
        if any(not isinstance(i, int) or i <= 0 for i in ids) or len(set(ids)) != len(ids):
            raise _ApiError(400, "Bad Request: checklist task identifiers must be positive and unique")
        made = []
        for task in tasks:
            text = str(task.get("text") or "").strip()
            if not 1 <= _utf16(text) <= _CHECKLIST_TASK_TEXT:
                raise _ApiError(400, f"Bad Request: a checklist task must be 1-{_CHECKLIST_TASK_TEXT} characters")
            made.append({"id": task["id"], "text": text, "completion_date": 0})
        checklist: dict[str, Any] = {"title": title, "tasks": made}
        for right in ("others_can_add_tasks", "others_can_mark_tasks_as_done"):
            if _true(given.get(right)):
                checklist[right] = True
        return checklist

    def _on_behalf(self, params: dict[str, Any]) -> dict[str, Any]:
        """The fields of a message the bot sent through a business connection: from the account, by the bot."""
        connection_id = params.get("business_connection_id")
        if not connection_id:
            return {"from": self.bot}
        owner = self.business_connections[connection_id]["user"]
        return {"from": owner, "sender_business_bot": self.bot, "business_connection_id": connection_id}

    async def _api_sendPhoto(self, params: dict[str, Any]) -> Any:
        return self._send_media("sendPhoto", "photo", params)

    async def _api_sendVoice(self, params: dict[str, Any]) -> Any:
        return self._send_media("sendVoice", "voice", params)

    def _send_media(self, method: str, field_name: str, params: dict[str, Any]) -> Any:
        chat = self._chat(params)
        upload = params.get(field_name)
        if not isinstance(upload, Upload) or not upload.data:
            raise _ApiError(400, f"Bad Request: there is no {field_name} in the request")
        reply = params.get("reply_parameters") or {}
        reply_to = reply.get("message_id") if isinstance(reply, dict) else None
        message_id = self._next_message_id(chat["id"])
        caption = params.get("caption")
        thread_id = params.get("message_thread_id")
        self.media.append(SentMedia(method, chat["id"], message_id, upload, caption, reply_to, thread_id))
        message: dict[str, Any] = {"message_id": message_id, "date": int(time.time()), "chat": chat, "from": self.bot}
        size = len(upload.data)
        if field_name == "photo":
            message["photo"] = [
                {
                    "file_id": f"sent-{message_id}",
                    "file_unique_id": f"s{message_id}",
                    "width": 1,
                    "height": 1,
                    "file_size": size,
                }
            ]
        else:
            message["voice"] = {
                "file_id": f"sent-{message_id}",
                "file_unique_id": f"s{message_id}",
                "duration": 1,
                "mime_type": upload.content_type,
                "file_size": size,
            }
        if caption:
            message["caption"] = caption
        self._messages[(chat["id"], message_id)] = message
        return message

    async def _api_editMessageText(self, params: dict[str, Any]) -> Any:
        chat = self._chat(params)
        if params.get("rich_message") is not None:  # Bot API 10.1: the message becomes a rich message
            return self._edit_rich(chat, params)
        text = self._visible(params)
        message_id = params.get("message_id")
        found = self._sent_message(chat["id"], message_id)
        if found is None:
            raise _ApiError(400, "Bad Request: message to edit not found")
        if (
            found.text == text
            and found.raw.strip() == params["text"].strip()
            and found.parse_mode == params.get("parse_mode")
        ):
            raise _ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and reply markup are "
                "exactly the same as a current content and reply markup of the message",
            )
        found.edits.append(found.text)
        found.edited_at.append(time.monotonic())
        found.reply_markup = params.get("reply_markup")  # an edit without a keyboard removes it
        found.text, found.raw, found.parse_mode = text, params["text"], params.get("parse_mode")
        message = dict(self._messages[(chat["id"], found.message_id)])
        message["text"] = text
        message["edit_date"] = int(time.time())
        return message

    def _edit_rich(self, chat: dict[str, Any], params: dict[str, Any]) -> Any:
        if self.refuse_rich:
            raise _ApiError(400, "Bad Request: RICH_MESSAGE_INVALID")
        rich = params["rich_message"]
        rich = json.loads(rich) if isinstance(rich, str) else rich
        markdown = rich.get("markdown")
        if not markdown or params.get("text") is not None:
            raise _ApiError(400, "Bad Request: exactly one of text and rich_message must be given")
        found = self._sent_message(chat["id"], params.get("message_id"))
        if found is None:
            raise _ApiError(400, "Bad Request: message to edit not found")
        if found.parse_mode == "rich" and found.raw == markdown:
            raise _ApiError(400, "Bad Request: message is not modified")
        found.edits.append(found.text)
        found.edited_at.append(time.monotonic())
        found.reply_markup = params.get("reply_markup")
        found.text, found.raw, found.parse_mode = markdown, markdown, "rich"
        message = dict(self._messages[(chat["id"], found.message_id)])
        message["edit_date"] = int(time.time())
        return message

    async def _api_deleteMessage(self, params: dict[str, Any]) -> Any:
        chat = self._chat(params)
        found = self._sent_message(chat["id"], params.get("message_id"))
        if found is None:
            raise _ApiError(400, "Bad Request: message to delete not found")
        found.deleted = True
        return True

    async def _api_sendMessageDraft(self, params: dict[str, Any]) -> Any:
        chat = self._chat(params)
        if chat["type"] != "private":
            raise _ApiError(400, "Bad Request: drafts can be sent only to private chats")
        if not params.get("draft_id"):
            raise _ApiError(400, "Bad Request: draft_id must be non-zero")
        self.drafts.append((chat["id"], int(params["draft_id"]), self._visible(params)))
        if _true(params.get("can_stop")):
            self.stoppable_drafts[(chat["id"], int(params["draft_id"]))] = _true(params.get("keep_on_stop"))
        return True

    async def _api_sendChatAction(self, params: dict[str, Any]) -> Any:
        chat = self._chat(params)
        self.chat_actions.append((chat["id"], str(params.get("action")), params.get("message_thread_id")))
        return True

    async def _api_setWebhook(self, params: dict[str, Any]) -> Any:
        url = params.get("url") or ""
        if not url:
            return await self._api_deleteWebhook(params)
        if params.get("drop_pending_updates"):
            self.pending.clear()
        self.webhook_url = url
        self.webhook_secret = params.get("secret_token")
        if self._delivery is None or self._delivery.done():
            self._delivery = asyncio.get_running_loop().create_task(self._deliver())
        self._webhook_wake.set()
        return True

    async def _api_deleteWebhook(self, params: dict[str, Any]) -> Any:
        if params.get("drop_pending_updates"):
            self.pending.clear()
        self.webhook_url = None
        self.webhook_secret = None
        return True

    async def _api_getWebhookInfo(self, params: dict[str, Any]) -> Any:
        return {
            "url": self.webhook_url or "",
            "has_custom_certificate": False,
            "pending_update_count": len(self.pending),
        }

    async def _api_getChatMember(self, params: dict[str, Any]) -> Any:
        chat = self._chat(params)
        user_id = int(params.get("user_id") or 0)
        user = {"id": user_id, "is_bot": False, "first_name": f"User {user_id}"}
        if chat["type"] == "private":
            return {"status": "member", "user": user}
        if user_id in self.admins.get(chat["id"], set()):
            return _administrator(user_id)
        return {"status": "member", "user": user}

    async def _api_getChatAdministrators(self, params: dict[str, Any]) -> Any:
        chat = self._chat(params)
        if chat["type"] == "private":
            raise _ApiError(400, "Bad Request: there are no administrators in the private chat")
        return [_administrator(user_id) for user_id in sorted(self.admins.get(chat["id"], set()))]

    async def _api_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        self.callback_answers.append(params)
        return True

    async def _api_setMyCommands(self, params: dict[str, Any]) -> Any:
        commands = params.get("commands") or []
        self.commands = list(commands) if isinstance(commands, list) else []
        return True

    # -- webhook delivery ------------------------------------------------------------------------------

    async def _deliver(self) -> None:
        """Post pending updates to the webhook one at a time, retrying each until it is answered 2xx."""
        assert self._session is not None
        while not self._closing:
            if not self.webhook_url or not self.pending:
                self._webhook_wake.clear()
                await self._webhook_wake.wait()
                continue
            update = self.pending[0]
            headers = {"Content-Type": "application/json"}
            if self.webhook_secret:
                headers["X-Telegram-Bot-Api-Secret-Token"] = self.webhook_secret
            self.served[update["update_id"]] = self.served.get(update["update_id"], 0) + 1
            try:
                async with asyncio.timeout(10):
                    async with self._session.post(self.webhook_url, data=json.dumps(update), headers=headers) as resp:
                        status = resp.status
            except (aiohttp.ClientError, TimeoutError):
                status = 0
            self.webhook_deliveries.append((update["update_id"], status))
            if 200 <= status < 300:
                if self.pending and self.pending[0] is update:
                    self.pending.pop(0)
            else:
                await asyncio.sleep(0.05)
            self._notify()

    # -- helpers ---------------------------------------------------------------------------------------

    def _notify(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _changed(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds, re-checking after every change."""
        loop = asyncio.get_running_loop()
        while not predicate():
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.add(waiter)
            try:
                await waiter
            finally:
                self._waiters.discard(waiter)

    def _sent_message(self, chat_id: int, message_id: Any) -> SentMessage | None:
        return next(
            (m for m in self.sent if m.chat_id == chat_id and m.message_id == message_id and not m.deleted), None
        )

    def _next_message_id(self, chat_id: int) -> int:
        counter = self._message_ids.setdefault(chat_id, itertools.count(1))
        return next(counter)

    def _chat(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = params.get("chat_id")
        chat = self._chats.get(chat_id) if isinstance(chat_id, int) else None
        if chat is None:
            raise _ApiError(400, "Bad Request: chat not found")
        connection_id = params.get("business_connection_id")
        if connection_id:  # on behalf of a business account: one of its chats, while connected and allowed to reply
            connection = self.business_connections.get(str(connection_id))
            if connection is None or not connection["is_enabled"]:
                raise _ApiError(400, "Bad Request: BUSINESS_CONNECTION_INVALID")
            if not connection["rights"].get("can_reply"):
                raise _ApiError(403, "Forbidden: BOT_BUSINESS_MISSING")
            if self.business_chats.get(chat_id) != connection_id:
                raise _ApiError(400, "Bad Request: chat not found")
        elif chat_id not in self._bot_chats and chat_id in self.business_chats:
            raise _ApiError(403, "Forbidden: bot can't initiate conversation with a user")
        return chat

    def _visible(self, params: dict[str, Any]) -> str:
        raw = params.get("text")
        if not isinstance(raw, str):
            raise _ApiError(400, "Bad Request: message text is empty")
        if params.get("parse_mode") == "HTML":
            try:
                text = parse_html(raw)
            except HtmlError as exc:
                raise _ApiError(400, f"Bad Request: can't parse entities: {exc}") from exc
        elif params.get("parse_mode"):
            raise _ApiError(400, f"Bad Request: unsupported parse_mode {params['parse_mode']!r} in this fake")
        else:
            text = raw
        text = text.strip()  # Telegram trims a message's text
        if not text:
            raise _ApiError(400, "Bad Request: message text is empty")
        if _utf16(text) > MESSAGE_LIMIT:
            raise _ApiError(400, "Bad Request: message is too long")
        return text

    def _entities(self, text: str) -> list[dict[str, Any]]:
        entities: list[dict[str, Any]] = []
        m = _COMMAND.match(text)
        if m is not None:
            entities.append({"type": "bot_command", "offset": 0, "length": _utf16(m.group())})
        for m in _MENTION.finditer(text):
            entities.append({"type": "mention", "offset": _utf16(text[: m.start()]), "length": _utf16(m.group())})
        return entities

    def _topic_root(self, chat: dict[str, Any], thread_id: int) -> dict[str, Any]:
        return {
            "message_id": thread_id,
            "date": int(time.time()),
            "chat": chat,
            "from": {"id": 1, "is_bot": False, "first_name": "Admin"},
            "message_thread_id": thread_id,
            "is_topic_message": True,
            "forum_topic_created": {"name": f"Topic {thread_id}", "icon_color": 7322096},
        }


def _administrator(user_id: int) -> dict[str, Any]:
    """A ``ChatMemberAdministrator`` of the Bot API: ``user_id`` may manage the chat, delete messages, restrict
    members, change the chat's info and invite users."""
    return {
        "status": "administrator",
        "user": {"id": user_id, "is_bot": False, "first_name": f"User {user_id}"},
        "can_be_edited": False,
        "is_anonymous": False,
        "can_manage_chat": True,
        "can_delete_messages": True,
        "can_manage_video_chats": True,
        "can_restrict_members": True,
        "can_promote_members": False,
        "can_change_info": True,
        "can_invite_users": True,
        "can_post_stories": False,
        "can_edit_stories": False,
        "can_delete_stories": False,
    }


class _ApiError(Exception):
    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.description = description


_CHECKLIST_TITLE = 255
"""The longest checklist title (characters)."""
_CHECKLIST_TASKS = 30
"""The most tasks a checklist holds."""
_CHECKLIST_TASK_TEXT = 100
"""The longest task (characters)."""

_OPT_IN = frozenset({"message_reaction", "message_reaction_count", "poll_answer", "poll"})
"""Update kinds Telegram sends only to a bot that asks for them in ``allowed_updates``."""


def _true(value: Any) -> bool:
    """A boolean parameter as PTB sends it (JSON ``true``, or ``"true"`` in a form body)."""
    return value is True or str(value).lower() == "true"


_METHODS = {name[5:].lower(): name[5:] for name in dir(FakeTelegramServer) if name.startswith("_api_")}
"""The methods the fake knows, by their lower-case names (Telegram takes a method's name in any case)."""
