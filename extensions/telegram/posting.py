"""What the bot writes in a Telegram chat: answers (posted, or finished after being shown while written), notices in
the chat's language, and "typing...".

Every message goes through ``reply.post_reply`` (rendered, split, threaded under the message it answers) or, for an
answer shown while it is written, through a live reply (``live.live_reply``). In a queued run an answer follows the
run's ledger: posted exactly once across attempts at the batch (``extensions.chat.exactly_once``), a post left
uncertain by a crash resolved by ``TELEGRAM_UNCERTAIN_REPLIES``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from telegram import Bot
from telegram.constants import ChatAction

from core.errors import PlatformError

from ..chat.adapter import ChatAdapter
from ..chat.answer_book import AnswerBook, LocalAnswerBook
from ..chat.i18n import say
from ..chat.polls import PollBook, PollRecord
from ..chat.stream import LiveReply, ReplyKey
from .checklists import post_checklist
from .definitions import MESSAGE, REPLY_TO, ChatArgs, telegram_chat
from .filters import MessageFacts
from .live import live_reply
from .polls import answer_key, post_poll
from .reply import post_file, post_reply
from .rich import post_answer, rich_edit, wants_rich
from .settings import TelegramSettings

if TYPE_CHECKING:
    from typing import Any

    from core.definitions import ContextState
    from core.events import RunEvent
    from core.fleet.reply_ledger import ReplyLedger
    from core.media import Outgoing

__all__ = ("Posting",)

log = logging.getLogger("extensions.telegram")
content_log = logging.getLogger("content.telegram")
"""Message text, silent unless the operator opts in (``LOG_CONTENT``)."""


class Posting:
    """Writes in the chats of one bot: ``bot()`` gives the bot once started (a ``PlatformError`` before)."""

    def __init__(
        self,
        adapter: ChatAdapter,
        settings: TelegramSettings,
        *,
        bot: Callable[[], Bot],
        answers: AnswerBook | None = None,
    ) -> None:
        self.adapter = adapter
        """The live replies, the ledger records, the chats' languages and the typing loops."""
        self.settings = settings
        self.bot = bot
        self.answers: AnswerBook = answers or LocalAnswerBook()
        """The messages posted as answers (a reaction on one is feedback on it): this process's, or the fleet's."""
        self.polls = PollBook(prefix="telegram:poll:", args=ChatArgs, store=answers)
        """The polls posted (their votes go back to their conversations)."""

    async def post_reply(
        self,
        *,
        chat_id: int,
        thread_id: int | None,
        text: str,
        reply_to: int | None,
        markdown: bool = True,
        business: str | None = None,
    ) -> list[int]:
        """Post ``text`` (Markdown unless ``markdown=False``) to the chat (through the business connection
        ``business``, when given); the one way this bot writes."""
        return await post_reply(
            self.bot(),
            chat_id=chat_id,
            thread_id=thread_id,
            text=text,
            reply_to=reply_to,
            markdown=markdown,
            business=business,
        )

    async def post_media(self, state: ContextState[Any], item: Outgoing) -> str:
        """Post a picture (``sendPhoto``) or a spoken reply (``sendVoice``) in the chat of ``state``, as a reply to
        the message the run answers (``core.media.MediaPoster``); returns the message's id."""
        from core.media import OutgoingKind

        args: ChatArgs = state.platform_args
        message_id = await post_file(
            self.bot(),
            chat_id=args.chat_id,
            thread_id=args.thread_id,
            voice=item.kind is OutgoingKind.VOICE,
            data=item.data,
            name=item.name,
            caption=item.caption,
            reply_to=state.values.get(REPLY_TO),
            business=args.business_connection_id,
        )
        log.info("chat %s: posted a %s of %d bytes", args.chat_id, item.kind.value, len(item.data))
        return f"message {message_id}"

    async def notice(self, facts: MessageFacts, text: str, *, markdown: bool = False) -> None:
        """Post ``text`` as a reply to the message of ``facts`` (best effort: a failure is only logged)."""
        try:
            await self.post_reply(
                chat_id=facts.chat_id,
                thread_id=facts.thread_id,
                text=text,
                reply_to=facts.message_id,
                markdown=markdown,
                business=facts.business_connection_id,
            )
        except PlatformError as exc:
            log.warning("could not answer in chat %s: %s", facts.chat_id, exc)

    async def say(self, facts: MessageFacts, key: str, **values: object) -> None:
        """Post the notice ``key`` (``extensions.chat.i18n``) in the chat's language."""
        await self.notice(facts, say(key, await self.adapter.language(telegram_chat, facts.args), **values))

    def start_live(self, event: RunEvent) -> LiveReply | None:
        """The live reply for an answer that starts streaming (an event listener: runs in the run's task)."""
        agent = self.adapter.agent
        state = agent.state_of(event.context_id) if agent is not None else None
        if state is None or not state.context.includes(telegram_chat) or not self.adapter.connected:
            return None
        args: ChatArgs = state.platform_args
        return live_reply(
            self.bot(),
            chat_id=args.chat_id,
            thread_id=args.thread_id,
            reply_to=state.values.get(REPLY_TO),
            interval=self.settings.stream_interval,
            drafts=self.settings.stream_drafts,
            record=self.adapter.record(state.ledger, MESSAGE, streamed=True, uncertain=self.settings.uncertain_replies),
            business=args.business_connection_id,
        )

    async def deliver(
        self,
        *,
        key: ReplyKey,
        chat_id: int,
        thread_id: int | None,
        text: str,
        reply_to: int | None,
        ledger: ReplyLedger | None = None,
        business: str | None = None,
    ) -> list[int]:
        """Deliver an answer: finish its live reply if it was shown while written (``key`` is the output's
        ``(context id, step, index)``), else post it. With a queued run's ``ledger`` the answer is posted
        exactly once across attempts at the batch. An answer with structure that was not posted whole (shown while
        written, or following the ledger) and is one message ends in the rich layout (``rich.rich_edit``). In a chat
        reached through the business connection ``business``, on its account's behalf (and never rich). Returns
        its messages' ids."""
        live = self.adapter.live
        whole: list[bool] = []  # (set when the answer was posted whole, rich where it could be)

        async def post_whole() -> list[int]:
            whole.append(True)
            return await post_answer(
                self.bot(),
                chat_id=chat_id,
                thread_id=thread_id,
                text=text,
                reply_to=reply_to,
                rich=self.settings.rich_messages,
                business=business,
            )

        def following(ledger: ReplyLedger) -> LiveReply:  # posted at once, following the ledger as a live reply does
            return live_reply(
                self.bot(),
                chat_id=chat_id,
                thread_id=thread_id,
                reply_to=reply_to,
                interval=self.settings.stream_interval,
                drafts=False,
                record=self.adapter.record(
                    ledger, MESSAGE, streamed=live is not None, uncertain=self.settings.uncertain_replies
                ),
                business=business,
            )

        if ledger is not None or (live is not None and live.get(key) is not None):
            content_log.info("chat %s reply: %s", chat_id, text)  # (``post_reply`` says it otherwise)
        posted = await self.adapter.deliver_with(
            key,
            text,
            ledger=ledger,
            live_reply=following,
            post=post_whole,
        )
        if self.settings.rich_messages and business is None and not whole and len(posted) == 1 and wants_rich(text):
            await rich_edit(self.bot(), chat_id=chat_id, message_id=posted[0], text=text)
        if business is not None:  # not noted for feedback: the Bot API has no reaction update for a business chat,
            return posted  # and its message ids are not those of the person's own chat with the bot (the book's keys)
        try:
            await self.answers.add([answer_key(chat_id, m) for m in posted], key[0])
        except Exception as exc:  # (Redis down: the answer is posted; a reaction on it will not count)
            log.warning("chat %s: answer %s not noted for feedback: %s", chat_id, posted, exc)
        return posted

    async def post_poll(
        self, *, args: ChatArgs, question: str, options: list[str], multiple: bool, reply_to: int | None
    ) -> list[int]:
        """Post a poll the model wrote (``telegram:poll``); its votes come back to the conversation of ``args``.
        Returns its message's id."""
        poll_id, message_id = await post_poll(
            self.bot(), args=args, question=question, options=options, multiple=multiple, reply_to=reply_to
        )
        record = PollRecord(args=args, question=question, options=tuple(options), message_id=message_id)
        try:
            await self.polls.add(poll_id, record)
        except Exception as exc:  # (Redis down: the poll is posted; its votes will be left)
            log.warning("chat %s: poll %s not noted, its votes will be left: %s", args.chat_id, poll_id, exc)
        log.info("chat %s: posted a poll of %d options (message %s)", args.chat_id, len(options), message_id)
        return [message_id]

    async def post_checklist(
        self, *, args: ChatArgs, title: str, tasks: list[str], reply_to: int | None, replace: int | None
    ) -> list[int]:
        """Post a checklist the model wrote (``telegram:checklist``) in a business chat, or change the one ``replace``
        names; its tasks marked done or added come back as the chat's service messages. Returns its message's id."""
        message_id = await post_checklist(
            self.bot(), args=args, title=title, tasks=tasks, reply_to=reply_to, replace=replace
        )
        done = "changed" if replace is not None else "posted"
        log.info("chat %s: %s a checklist of %d tasks (message %s)", args.chat_id, done, len(tasks), message_id)
        return [message_id]

    def typing(
        self, chat_id: int, thread_id: int | None, *, business: str | None = None
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """Keep "typing..." alive in the chat (reached through the business connection ``business``, when given)
        while the block lasts: one loop per chat however many hold it (the listener while it hands a message over,
        the run while it answers, here or in a worker)."""
        return self.adapter.hold_typing(
            (chat_id, thread_id, business), lambda: self._send_typing(chat_id, thread_id, business)
        )

    async def _send_typing(self, chat_id: int, thread_id: int | None, business: str | None) -> None:
        await self.bot().send_chat_action(
            chat_id=chat_id, action=ChatAction.TYPING, message_thread_id=thread_id, business_connection_id=business
        )
