"""The Telegram definitions: the ``telegram:chat`` context, the ``telegram:message`` input and output.

Nothing here imports python-telegram-bot: handlers reach Telegram through the ``TelegramRuntime`` bound to
the agent by ``telegram_extension`` (see ``runtime.py``), so these objects can be imported, and a chat's
memory reset, without the ``telegram`` extra.
"""

from __future__ import annotations

import contextlib
import logging
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

import pydantic

from core.definitions import ContextState, InputContext, OutputContext, PlatformChat, context, input, output
from core.entries import ErrorLog, InputRef, OutputRef
from core.errors import ModelError, PlatformError
from core.slots import Slot

from ..chat.exactly_once import may_post, post_once
from ..chat.heard import echoes_heard, heard_quote
from ..chat.i18n import say
from ..chat.registry import RuntimeRegistry

if TYPE_CHECKING:
    from core import Host, Setup
    from core.definitions import Send
    from core.fleet.reply_ledger import ReplyLedger

__all__ = (
    "CHECKLIST",
    "CHECKLIST_TASKS",
    "MESSAGE",
    "NO_BUSINESS",
    "POLL",
    "POLL_ANSWER",
    "REPLY_TO",
    "ChatArgs",
    "ChecklistArgs",
    "PollArgs",
    "Runtime",
    "bind_runtime",
    "get_runtime",
    "telegram_chat",
    "telegram_checklist_output",
    "telegram_checklist_tasks_input",
    "telegram_message_input",
    "telegram_message_output",
    "telegram_poll_answer_input",
    "telegram_poll_output",
)

log = logging.getLogger("extensions.telegram")

MESSAGE = "telegram:message"
"""The type of the input (a user's message) and of the output (the bot's reply)."""
POLL = "telegram:poll"
"""The type of the output that posts a poll."""
POLL_ANSWER = "telegram:poll_answer"
"""The type of the input a vote in one of the bot's polls becomes (``polls.py``)."""
CHECKLIST = "telegram:checklist"
"""The type of the output that posts a checklist (or replaces one the bot posted) on behalf of a business account."""
CHECKLIST_TASKS = "telegram:checklist_tasks"
"""The type of the input tasks marked done, not done or added in a checklist become (``checklists.py``)."""
NO_BUSINESS = (
    "Telegram lets a bot post a checklist only on behalf of a Telegram Business account connected to it, and this "
    "chat is not one of that account's chats: write the tasks as a message instead (to post checklists, the owner of "
    "a Telegram Business account connects this bot in Telegram's settings, under Telegram Business, Chatbots)"
)
"""Why a checklist is refused in a chat the bot does not reach through a business connection (told to the model,
which tells the person)."""
REPLY_TO: Slot[int] = Slot("telegram:reply_to")
"""Kept in ``ContextState.values``: the id of the message the run answers (set by the input handler)."""
_NOTIFIED: Slot[bool] = Slot("telegram:notified")
"""Kept in ``ContextState.values``: the user was already told this run failed."""

MODEL_DOWN = say("model_down")
"""The notice of a run that failed because the model did not answer (in English; each chat reads its language)."""
RUN_FAILED = say("run_failed")
"""The notice of a run that failed otherwise."""
NO_ANSWER = say("no_answer")
"""The notice of a run in which nothing reached the user."""


class Runtime(Protocol):
    """What the definitions need from the platform side (``TelegramRuntime`` implements it)."""

    async def post_reply(
        self,
        *,
        chat_id: int,
        thread_id: int | None,
        text: str,
        reply_to: int | None,
        markdown: bool = True,
        business: str | None = None,
    ) -> list[int]: ...

    async def subscribe(self, send: Send, agent: Setup) -> Any: ...

    async def deliver(
        self,
        *,
        key: tuple[str, int, int],
        chat_id: int,
        thread_id: int | None,
        text: str,
        reply_to: int | None,
        ledger: ReplyLedger | None = None,
        business: str | None = None,
    ) -> list[int]: ...

    def typing(
        self, chat_id: int, thread_id: int | None, *, business: str | None = None
    ) -> AbstractAsyncContextManager[None]: ...

    async def abandon_replies(self, context_id: str) -> None: ...

    async def post_poll(
        self, *, args: ChatArgs, question: str, options: list[str], multiple: bool, reply_to: int | None
    ) -> list[int]: ...

    async def post_checklist(
        self, *, args: ChatArgs, title: str, tasks: list[str], reply_to: int | None, replace: int | None
    ) -> list[int]: ...


_runtimes: RuntimeRegistry[Runtime] = RuntimeRegistry(platform="Telegram", extension="telegram_extension")


def bind_runtime(agent: Setup, runtime: Runtime) -> None:
    """Make ``runtime`` the Telegram side of ``agent`` (the extension's install hook does this)."""
    _runtimes.bind(agent, runtime)


def get_runtime(agent: Host) -> Runtime:
    """The Telegram side of ``agent``; a ``ConfigError`` when the agent was built without the extension."""
    return _runtimes.get(agent)


class ChatArgs(pydantic.BaseModel):
    """Identifies one conversation: a chat, or one topic of a forum supergroup."""

    model_config = pydantic.ConfigDict(frozen=True)

    chat_id: int = pydantic.Field(description="The chat id (negative for groups)")
    thread_id: int | None = pydantic.Field(default=None, description="The forum topic id, None outside topics")
    business_connection_id: str | None = pydantic.Field(
        default=None,
        description="The Telegram Business connection the bot writes through: the chat is a private chat of a "
        "business account connected to the bot, answered on its behalf; None in the bot's own chats",
    )


class PollArgs(pydantic.BaseModel):
    """A poll to post in the chat."""

    question: str = pydantic.Field(min_length=1, max_length=300, description="The question (1-300 characters)")
    options: list[pydantic.constr(min_length=1, max_length=100)] = pydantic.Field(  # type: ignore[valid-type]
        min_length=2, max_length=12, description="The answers to choose from (2-12, each 1-100 characters)"
    )
    multiple: bool = pydantic.Field(default=False, description="Whether a person may choose several answers")


class ChecklistArgs(pydantic.BaseModel):
    """A checklist to post in the chat (or to put in place of one posted before)."""

    title: str = pydantic.Field(min_length=1, max_length=255, description="The title (1-255 characters)")
    tasks: list[pydantic.constr(min_length=1, max_length=100)] = pydantic.Field(  # type: ignore[valid-type]
        min_length=1, max_length=30, description="The tasks, in order (1-30, each 1-100 characters)"
    )
    replace: int | None = pydantic.Field(
        default=None,
        description="The message_id of a checklist you posted, to change it instead of posting a new one (tasks keep "
        "their place: the first task stays task 1, and what people marked done stays done)",
    )


def _key(args: ChatArgs) -> str:
    if args.business_connection_id is not None:  # (a person's chat with a business is not their chat with the bot)
        return f"{args.chat_id}@{args.business_connection_id}"
    return str(args.chat_id) if args.thread_id is None else f"{args.chat_id}:{args.thread_id}"


def _instructions(state: ContextState) -> str:
    args: ChatArgs = state.platform_args
    where = "a private Telegram chat" if args.chat_id > 0 else "a Telegram group"
    if args.business_connection_id is not None:
        where = "a private Telegram chat of a business account, on its behalf (you may post checklists here)"
    return (
        f"You are talking in {where}. Each message's author is in its attributes. Answer with one "
        f"{MESSAGE} output. You may use Markdown: **bold**, _italic_, `code`, ```code blocks```, "
        "[links](https://example.com). Keep answers short unless asked for detail."
    )


async def _tell(state: ContextState, agent: Host, key: str) -> None:
    """Post the short notice ``key`` (``extensions.chat.i18n``) to the chat of ``state``, in its language (best
    effort: a failure is only logged)."""
    text = say(key, state.chat.language or agent.chat_policy.default_language)
    runtime = _runtimes.find(agent)
    if runtime is None or not may_post(state):
        return
    args: ChatArgs = state.platform_args
    state.values.put(_NOTIFIED, True)
    try:
        await runtime.post_reply(
            chat_id=args.chat_id,
            thread_id=args.thread_id,
            text=text,
            reply_to=state.values.get(REPLY_TO),
            markdown=False,
            business=args.business_connection_id,
        )
    except Exception as exc:
        log.warning("could not tell chat %s that no answer is coming: %s", args.chat_id, exc)


async def _on_error(exc: Exception, state: ContextState, agent: Host) -> None:
    """A failed run (the model is down) still gets a short, clear answer; an answer it was writing is
    marked as cut."""
    runtime = _runtimes.find(agent)
    if runtime is not None:
        try:
            await runtime.abandon_replies(state.id)
        except Exception as abandon_exc:
            log.warning("could not mark the cut answer in chat %s: %s", state.platform_args.chat_id, abandon_exc)
    await _tell(state, agent, "model_down" if isinstance(exc, ModelError) else "run_failed")


async def _on_run(state: ContextState, agent: Host) -> None:
    """When the model kept getting it wrong and nothing reached the user, say so instead of staying silent."""
    if state.values.get(_NOTIFIED) or state.values.get(REPLY_TO) is None:
        return
    delivered = failed = False
    for entry in reversed(state.working_memory.logs):
        if isinstance(entry, InputRef) and entry.type in (MESSAGE, POLL_ANSWER, CHECKLIST_TASKS):
            break
        if isinstance(entry, OutputRef) and entry.type in (MESSAGE, POLL, CHECKLIST) and entry.error is None:
            delivered = True
        elif isinstance(entry, ErrorLog) and entry.source != "stop":  # (a Stop, or BOT_BUSY=interrupt: not a failure)
            failed = True
    if failed and not delivered:
        await _tell(state, agent, "no_answer")


async def _on_input(data: Any, ctx: InputContext, agent: Host) -> None:
    """Remember which message the run answers, so replies thread under it; with ``STT_ECHO=true``, quote
    what was heard in a voice message first (once per batch: a retried batch does not quote twice)."""
    message_id = ctx.input_ref.params.get("message_id", "")
    if message_id.isdigit():
        ctx.state.values.put(REPLY_TO, int(message_id))
    quote = heard_quote(ctx.input_ref) if echoes_heard(agent) else None
    runtime = _runtimes.find(agent)
    if quote is None or runtime is None or not may_post(ctx.state):
        return
    args: ChatArgs = ctx.state.platform_args
    try:
        await post_once(
            ctx.state,
            "telegram:heard",
            quote,
            lambda: runtime.post_reply(
                chat_id=args.chat_id,
                thread_id=args.thread_id,
                text=quote,
                reply_to=int(message_id) if message_id.isdigit() else None,
                markdown=False,
                business=args.business_connection_id,
            ),
        )
    except Exception as exc:
        log.warning("could not quote the voice message in chat %s: %s", args.chat_id, exc)


async def _subscribe(send: Send, agent: Setup) -> Any:
    """Start receiving messages (when the runtime listens); returns its unsubscribe function."""
    return await get_runtime(agent).subscribe(send, agent)


async def _post(text: str, ctx: OutputContext, agent: Host) -> None:
    """Post the reply to the conversation's chat (and topic), as a reply to the message being answered; an
    answer shown while it was written gets its final text instead. In a queued run the reply follows the
    run's ledger: posted exactly once."""
    args: ChatArgs = ctx.state.platform_args
    await get_runtime(agent).deliver(
        key=(ctx.state.id, ctx.step, ctx.index),
        chat_id=args.chat_id,
        thread_id=args.thread_id,
        text=text,
        reply_to=ctx.state.values.get(REPLY_TO),
        ledger=ctx.state.ledger,
        business=args.business_connection_id,
    )


async def _post_poll(data: PollArgs, ctx: OutputContext, agent: Host) -> None:
    """Post the poll in the conversation's chat, once per batch (``post_once``: a batch run again after a crash
    does not post it twice). Its votes come back as ``telegram:poll_answer`` inputs."""
    args: ChatArgs = ctx.state.platform_args
    runtime = get_runtime(agent)
    await post_once(
        ctx.state,
        f"{POLL}:{ctx.step}:{ctx.index}",
        data.question,
        lambda: runtime.post_poll(
            args=args,
            question=data.question,
            options=list(data.options),
            multiple=data.multiple,
            reply_to=ctx.state.values.get(REPLY_TO),
        ),
    )


async def _post_checklist(data: ChecklistArgs, ctx: OutputContext, agent: Host) -> None:
    """Post the checklist (or change the one ``data.replace`` names) on behalf of the business account whose chat
    this is, once per batch (``post_once``); in a chat not reached through a business connection, a
    ``PlatformError`` tells the model why (``NO_BUSINESS``). Tasks marked done or added come back as
    ``telegram:checklist_tasks`` inputs."""
    args: ChatArgs = ctx.state.platform_args
    if args.business_connection_id is None:
        raise PlatformError(NO_BUSINESS)
    runtime = get_runtime(agent)
    await post_once(
        ctx.state,
        f"{CHECKLIST}:{ctx.step}:{ctx.index}",
        data.title,
        lambda: runtime.post_checklist(
            args=args,
            title=data.title,
            tasks=list(data.tasks),
            reply_to=ctx.state.values.get(REPLY_TO),
            replace=data.replace,
        ),
    )


def _while_running(state: ContextState, agent: Host) -> AbstractAsyncContextManager[Any]:
    """Shows "typing..." in the chat for as long as a run answers it, wherever it runs (a queue worker too)."""
    runtime = _runtimes.find(agent)
    args: ChatArgs = state.platform_args
    if runtime is None:
        return contextlib.nullcontext()
    return runtime.typing(args.chat_id, args.thread_id, business=args.business_connection_id)


telegram_chat = context(
    type="telegram:chat",
    schema=ChatArgs,
    key=_key,
    description="A Telegram conversation: one private chat, one group, or one topic of a forum group",
    instructions=_instructions,
    while_running=_while_running,
    on_error=_on_error,
    on_run=_on_run,
    settings_from=lambda args: ChatArgs(chat_id=args.chat_id) if args.thread_id is not None else None,
    conversation=True,
    chat_of=lambda args: PlatformChat(
        platform="telegram",
        chat_id=str(args.chat_id),
        user_id=str(args.chat_id) if args.chat_id > 0 else None,  # (a private chat's id is its user's)
        thread_id=None if args.thread_id is None else str(args.thread_id),
        args=args,
    ),
    example_args=ChatArgs(chat_id=1),  # (a private chat: a user's id, positive)
)
"""The ``telegram:chat`` context, keyed by chat (and forum topic: a topic starts from its group's chat settings)."""

telegram_message_input = input(
    type=MESSAGE,
    schema=str,
    handler=_on_input,
    subscribe=_subscribe,
    context=telegram_chat,
)

telegram_message_output = output(
    type=MESSAGE,
    description="Send a message to the Telegram chat you are talking in",
    instructions="Write the reply in Markdown; long replies are split into several messages for you.",
    schema=str,
    handler=_post,
    context=telegram_chat,
    examples=[f'<output type="{MESSAGE}">Hello **Ann**! Here is the `code` you asked for.</output>'],
)

telegram_poll_output = output(
    type=POLL,
    description="Post a poll in the Telegram chat you are talking in; each vote comes back to you as a "
    f"{POLL_ANSWER} input",
    instructions="The content is JSON: the question, 2 to 12 options, and multiple (true when several may be chosen).",
    schema=PollArgs,
    handler=_post_poll,
    context=telegram_chat,
    examples=[f'<output type="{POLL}">{{"question": "Tea or coffee?", "options": ["Tea", "Coffee"]}}</output>'],
)

telegram_poll_answer_input = input(
    type=POLL_ANSWER,
    schema=str,
    handler=_on_input,  # (the answer threads under the poll)
    context=telegram_chat,
)
"""A vote in one of the bot's polls: who chose which options."""

telegram_checklist_output = output(
    type=CHECKLIST,
    description="Post a checklist in the Telegram chat you are talking in, on behalf of the business account whose "
    f"chat it is (only there: elsewhere it is refused); tasks the person marks done or adds come back to you as "
    f"{CHECKLIST_TASKS} inputs",
    instructions="The content is JSON: the title, 1 to 30 tasks, and replace (the message_id of a checklist you "
    "posted, to change it) when you change one.",
    schema=ChecklistArgs,
    handler=_post_checklist,
    context=telegram_chat,
    errors_to_model=True,  # (a refusal, no business connection here, is the model's to tell the person)
    examples=[f'<output type="{CHECKLIST}">{{"title": "Moving day", "tasks": ["Book the van", "Pack"]}}</output>'],
)

telegram_checklist_tasks_input = input(
    type=CHECKLIST_TASKS,
    schema=str,
    handler=_on_input,  # (the answer threads under the checklist)
    context=telegram_chat,
)
"""Tasks of a checklist in the chat marked done, not done or added: by whom, which."""
