"""The bot's commands in Telegram, and who may use them: ``/help``, ``/reset``, ``/forget`` and the settings commands
(``/model``, ``/persona``, ``/language``, ``/reply``, ``/timezone``, ``/settings``, ``/stats``, ``/reminders``,
``/memory``, and ``/stop`` for anyone who may talk to the bot, served by ``extensions.chat.commands``), with the
inline keyboard of an answer and its buttons (a choice, or cancelling a reminder).

``/memory`` shows what the bot keeps about its caller: in a group its answer goes to the caller's private chat with
the bot, never to the group (a person who never started one is told to). Telegram does not tell bots that a message
was deleted (the Bot API has no such update outside business accounts), so a fact stays until ``/memory delete``.

Who administers a chat: in a private chat its user; in a group an admin user (``BOT_ADMIN_USERS``, known without
asking Telegram) or one of the group's administrators, asked with ``getChatMember``; in a chat of a business account
(Telegram Business, ``business.py``) an admin user only: the person writing there is the business's customer, so
they may read their own ``/memory`` (and delete it) and ``/stop`` an answer, not reset or configure the bot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from telegram import Bot, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, ReplyParameters
from telegram.constants import ChatMemberStatus
from telegram.error import TelegramError

from core.errors import PlatformError

from ..chat.adapter import ChatAdapter
from ..chat.commands import Caller, ChatCommands
from ..chat.i18n import localized, say
from ..chat.policy import Allowlist
from .definitions import ChatArgs, telegram_chat
from .filters import MessageFacts
from .posting import Posting
from .settings import TelegramSettings

__all__ = ("CHOICE_PREFIX", "COMMANDS", "FORGET_DONE", "RESET_DONE", "RESET_REFUSED", "BotCommands")

log = logging.getLogger("extensions.telegram")

RESET_DONE = say("reset_done")
"""The answer to ``/reset``."""
FORGET_DONE = say("forget_done")
"""The answer to ``/forget``."""
RESET_REFUSED = "Only an administrator of this group can make me forget this conversation."
"""The answer to ``/reset`` or ``/forget`` by a group member who is not a chat administrator nor an admin user."""
COMMANDS = (
    ("help", "What I can do"),
    ("stop", "Stop the answer I am writing"),
    ("reset", "Forget this conversation"),
    ("forget", "Erase this conversation and its history"),
    ("model", "Show or choose the model of this chat"),
    ("persona", "Show, set (/persona set ...) or reset the persona"),
    ("language", "Show or choose the language of my messages"),
    ("reply", "Show or choose when I answer in this group"),
    ("timezone", "Show or choose this chat's time zone"),
    ("voice", "Show or choose whether my answers are also spoken"),
    ("busy", "Show or choose what a message sent while I answer does"),
    ("quiet", "Show or choose the quiet window: messages within it get one answer"),
    ("settings", "This chat's settings"),
    ("stats", "Your usage and this chat's"),
    ("reminders", "This chat's reminders (cancel with the buttons)"),
    ("memory", "What I keep about you (/memory delete <number> or all)"),
    ("knowledge", "Which document collections I search here (/knowledge use ... or all)"),
)
"""The command menu users see (``/start`` is Telegram's own and needs no entry)."""
CHOICE_PREFIX = "cfg:"
"""Callback data of the inline keyboard buttons of a settings answer (``cfg:model:<name>``)."""


class BotCommands:
    """Answers the commands of one bot."""

    def __init__(
        self,
        adapter: ChatAdapter,
        settings: TelegramSettings,
        posting: Posting,
        *,
        bot: Callable[[], Bot],
        allowlist: Allowlist,
    ) -> None:
        self.adapter = adapter
        """The agent served, the commands turned off, the chats' languages."""
        self.settings = settings
        self.posting = posting
        self.bot = bot
        self.allowlist = allowlist
        """Who may press a settings button."""

    async def register_menu(self) -> None:
        """Show the commands not turned off in Telegram's menu (a failure only loses the menu)."""
        disabled = self.adapter.disabled_commands()
        try:
            await self.bot().set_my_commands([c for c in COMMANDS if c[0] not in disabled])
        except TelegramError as exc:
            log.warning("could not register the bot's commands with Telegram: %s", exc.message)

    async def help(self, facts: MessageFacts, *, bot_name: str) -> None:
        """``/help`` and ``/start``: ``TELEGRAM_HELP_TEXT`` or the chat's language's help."""
        language = await self.adapter.language(telegram_chat, facts.args)
        text = localized(self.settings.help_text, "telegram.help", language)
        await self.posting.notice(facts, text.replace("{name}", bot_name), markdown=True)

    async def reset(self, facts: MessageFacts, *, erase: bool = False) -> None:
        """``/reset`` (``/forget`` with ``erase``): anyone in a private chat; in a group, a chat administrator or
        an admin user (``BOT_ADMIN_USERS``); in a business account's chat, an admin user."""
        agent = self.adapter.agent
        assert agent is not None
        command = "/forget" if erase else "/reset"
        business = facts.business_connection_id is not None
        if not await self.administers(
            facts.chat_id, facts.user_id, private=facts.private, doing=command, business=business
        ):
            log.info("chat %s: %s by user %s refused (not an administrator)", facts.chat_id, command, facts.user_id)
            await self.posting.notice(facts, RESET_REFUSED)
            return
        args = facts.args
        if erase:
            await agent.forget(telegram_chat, args)
            await self.posting.say(facts, "forget_done")
            return
        await agent.reset(telegram_chat, args)
        await self.posting.say(facts, "reset_done")

    async def on_draft_stopped(self, stopped: Mapping[str, Any]) -> None:
        """Stop was pressed on a draft being written (the update ``stopped_message_generation``, Bot API 10.3): the
        chat's answer stops wherever it is written (``Host.request_stop``), and the answer then posted keeps what
        was written with its mark. A chat the allowlist leaves out is ignored."""
        agent, chat = self.adapter.agent, stopped.get("chat")
        chat_id = chat.get("id") if isinstance(chat, Mapping) else None
        if agent is None or not isinstance(chat, Mapping) or not isinstance(chat_id, int):
            return
        user_id = chat_id if chat.get("type") == "private" else None  # (drafts are for private chats)
        if not self.allowlist.allows(chat_ids=[chat_id], user_id=user_id):
            return
        thread = stopped.get("message_thread_id") if chat.get("is_forum") else None
        cid = agent.context_id(telegram_chat, ChatArgs(chat_id=chat_id, thread_id=thread))
        stopping = await agent.request_stop(cid)
        log.info(
            "chat %s: Stop pressed on draft %s (%s)",
            chat_id,
            stopped.get("draft_id"),
            "stopping" if stopping else "nothing to stop",
        )

    async def administers(
        self, chat_id: int, user_id: int | None, *, private: bool, doing: str, business: bool = False
    ) -> bool:
        """True when the user may ``/reset`` the chat or change its settings (``doing`` names the command, for the
        log): a private chat's own user, an admin user (``BOT_ADMIN_USERS``, known without asking Telegram), or
        one of a group's administrators, asked with getChatMember (a failure or no answer in
        ``TELEGRAM_REQUEST_TIMEOUT`` counts as no). In a chat of a business account (``business``) only an admin
        user: the person there writes to the business, whose bot they neither own nor configure, so they may not
        give it a persona or reset what it keeps."""
        agent = self.adapter.agent
        assert agent is not None
        if business:
            allowed = user_id is not None and agent.is_admin(f"telegram:{user_id}")
            if not allowed:
                log.info("chat %s: %s by user %s refused (a business account's chat)", chat_id, doing, user_id)
            return allowed
        if private:
            return True
        if user_id is None:
            return False
        if user_id == chat_id:  # written as the group itself: only its administrators can
            return True
        if agent.is_admin(f"telegram:{user_id}"):
            return True
        try:
            async with asyncio.timeout(self.settings.request_timeout):
                member = await self.bot().get_chat_member(chat_id=chat_id, user_id=user_id)
        except (TelegramError, TimeoutError) as exc:
            log.warning(
                "chat %s: could not ask whether user %s administers it (%s); %s refused",
                chat_id,
                user_id,
                exc,
                doing,
            )
            return False
        return member.status in (ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR)

    async def settings_command(self, facts: MessageFacts) -> None:
        """``/model``, ``/persona``, ``/language``, ``/settings``, ``/stats``: the answer, with an inline keyboard
        when there is something to choose."""
        agent = self.adapter.agent
        assert agent is not None and facts.command is not None and facts.user_id is not None
        commands, cid = ChatCommands.of(agent, telegram_chat, facts.args)
        parts = facts.text.split(maxsplit=1)
        arg = parts[1] if len(parts) > 1 else None
        changes = (
            arg is not None
            and facts.command != "memory"
            and not (facts.command == "persona" and arg.strip().lower() == "show")
        )
        business = facts.business_connection_id is not None
        manages = changes and await self.administers(
            facts.chat_id, facts.user_id, private=facts.private, doing=f"/{facts.command}", business=business
        )
        user_id = facts.user_id

        def ask() -> Awaitable[bool]:  # (/stop by someone the answer is not for: are they an administrator?)
            return self.administers(facts.chat_id, user_id, private=facts.private, doing="/stop", business=business)

        caller = Caller(user=f"telegram:{user_id}", manages_chat=manages, ask_manages=ask)
        answer = await commands.run(facts.command, cid, caller, arg)
        if answer.personal and not facts.private:
            await self._in_private(facts, answer.text, language=await commands.language(cid))
            return
        buttons = _keyboard(answer.choices)
        if not buttons or facts.business_connection_id is not None:  # (a business chat's answer shows no buttons:
            await self.posting.notice(facts, answer.text)  # a press there would not reach its conversation)
            return
        try:
            await self.bot().send_message(
                chat_id=facts.chat_id,
                message_thread_id=facts.thread_id,
                text=answer.text,
                reply_parameters=ReplyParameters(message_id=facts.message_id, allow_sending_without_reply=True),
                reply_markup=InlineKeyboardMarkup(buttons),
            )
        except TelegramError as exc:
            log.warning("could not answer /%s in chat %s: %s", facts.command, facts.chat_id, exc.message)

    async def _in_private(self, facts: MessageFacts, text: str, *, language: str) -> None:
        """An answer for the caller alone, asked in a group: posted in their private chat with the bot, the group
        told it was (or, when Telegram refuses because they never started one, told to ask there)."""
        assert facts.user_id is not None
        if facts.user_id < 0:  # written on behalf of a chat: there is no one's private chat to answer in
            await self.posting.notice(facts, say("memory_private_only", language))
            return
        try:
            await self.posting.post_reply(
                chat_id=facts.user_id, thread_id=None, text=text, reply_to=None, markdown=False
            )
        except PlatformError as exc:
            log.info(
                "chat %s: /%s answered in the group (no private chat with %s: %s)",
                facts.chat_id,
                facts.command,
                facts.user_id,
                exc,
            )
            await self.posting.notice(facts, say("memory_private_only", language))
            return
        await self.posting.notice(facts, say("memory_sent_privately", language))

    async def on_choice(self, query: CallbackQuery) -> None:
        """A button of a settings answer was pressed: make the choice (if the user may) and show the result in
        place of the keyboard."""
        data, message, agent = query.data or "", query.message, self.adapter.agent
        if not data.startswith(CHOICE_PREFIX) or message is None or agent is None:
            return
        chat = message.chat
        thread_id = getattr(message, "message_thread_id", None) if getattr(chat, "is_forum", False) else None
        user_id = query.from_user.id
        if not self.allowlist.allows(chat_ids=[chat.id], user_id=user_id):
            return
        commands, cid = ChatCommands.of(agent, telegram_chat, ChatArgs(chat_id=chat.id, thread_id=thread_id))
        manages = await self.administers(chat.id, user_id, private=chat.type == "private", doing="a settings button")
        caller = Caller(user=f"telegram:{user_id}", manages_chat=manages)
        answer = await commands.choose(cid, caller, data.removeprefix(CHOICE_PREFIX))
        try:
            await query.answer(text=answer.text[:200])
            if answer.changed:  # the result in place of the keyboard (a list shows its remaining buttons)
                buttons = _keyboard(answer.choices)
                await self.bot().edit_message_text(
                    chat_id=chat.id,
                    message_id=message.message_id,
                    text=answer.text,
                    reply_markup=InlineKeyboardMarkup(buttons) if buttons else None,
                )
        except TelegramError as exc:
            log.warning("could not answer a button in chat %s: %s", chat.id, exc.message)


def _keyboard(choices: list[tuple[str, str]]) -> list[list[InlineKeyboardButton]]:
    """One button per row for each ``(label, value)`` choice of an answer (those within Telegram's 64 bytes of
    callback data)."""
    return [
        [InlineKeyboardButton(label, callback_data=CHOICE_PREFIX + value)]
        for label, value in choices
        if len((CHOICE_PREFIX + value).encode()) <= 64  # Telegram's limit on callback data
    ]
