"""Talking to the bot in Telegram: private chats, groups and forum topics, through python-telegram-bot.

``telegram_extension(settings)`` brings the ``telegram:chat`` context (one per chat, one per forum
topic, and one per chat of a Telegram Business account the bot answers for), the ``telegram:message`` input and
output, polls and checklists as outputs and their answers as inputs, the /start, /help and /reset commands, and the
PTB Application's lifecycle as a service. Importing this package needs no python-telegram-bot; building the
runtime does (``pip install daydreams-bots[telegram]``).
"""

from __future__ import annotations

import typing

from core.definitions import Extension, extension, service
from core.media import media_posters

from .definitions import (
    CHECKLIST,
    CHECKLIST_TASKS,
    MESSAGE,
    POLL,
    POLL_ANSWER,
    ChatArgs,
    ChecklistArgs,
    PollArgs,
    bind_runtime,
    get_runtime,
    telegram_chat,
    telegram_checklist_output,
    telegram_checklist_tasks_input,
    telegram_message_input,
    telegram_message_output,
    telegram_poll_answer_input,
    telegram_poll_output,
)
from .guest import telegram_guest, telegram_guest_answer_output, telegram_guest_message_input
from .settings import TelegramMode, TelegramSettings

if typing.TYPE_CHECKING:
    from core import Setup

    from ..chat.answer_book import AnswerBook, Ephemeral
    from ..chat.trust import TrustRules
    from .runtime import TelegramRuntime

__all__ = (
    "CHECKLIST",
    "CHECKLIST_TASKS",
    "POLL",
    "POLL_ANSWER",
    "ChatArgs",
    "ChecklistArgs",
    "PollArgs",
    "TelegramMode",
    "TelegramSettings",
    "bind_runtime",
    "get_runtime",
    "telegram_chat",
    "telegram_checklist_output",
    "telegram_checklist_tasks_input",
    "telegram_extension",
    "telegram_message_input",
    "telegram_message_output",
    "telegram_poll_answer_input",
    "telegram_poll_output",
    "telegram_runtime",
)


def telegram_runtime(
    settings: TelegramSettings, *, listen: bool = True, answers: AnswerBook | None = None
) -> TelegramRuntime:
    """Build the python-telegram-bot side on its own (``telegram_extension`` does this for you)."""
    try:
        from .runtime import TelegramRuntime
    except ImportError as exc:  # the optional extra is missing
        from core.errors import ConfigError

        raise ConfigError(
            "the Telegram adapter needs python-telegram-bot: pip install 'daydreams-bots[telegram]', "
            "or leave TELEGRAM_TOKEN unset"
        ) from exc
    return TelegramRuntime(settings, listen=listen, answers=answers)


def telegram_extension(
    settings: TelegramSettings,
    *,
    listen: bool = True,
    trust: TrustRules | None = None,
    answers: AnswerBook | None = None,
    ephemeral: Ephemeral | None = None,
) -> Extension:
    """The Telegram extension. ``listen=False`` (queue workers) only builds the bot for sending: no
    polling, no webhook server; replies, typing and error notices still work. ``trust``: how authors get their
    tier and which bots are answered (``TRUST_*``). ``answers``: where the bot's answers are noted, so that a
    reaction on one counts as feedback (default: in this process; a fleet gives ``core.fleet.RedisAnswerBook``).
    ``ephemeral``: a fleet's expiry of the queue's keys of a guest request once answered
    (``core.fleet.RedisEphemeral``)."""
    runtime = telegram_runtime(settings, listen=listen, answers=answers)
    runtime.ephemeral = ephemeral
    if trust is not None:
        runtime.set_trust(trust)

    def install(agent: Setup) -> None:
        bind_runtime(agent, runtime)
        media_posters(agent).add(telegram_chat.type, runtime.posting, reply_output=MESSAGE)
        for channel, pins in settings.channel_settings.items():  # TELEGRAM_CHANNEL_SETTINGS
            agent.pin_settings(f"telegram:chat:{channel}", pins)

    return extension(
        name="telegram",
        install=install,
        contexts=[telegram_chat, telegram_guest],
        inputs=[
            telegram_message_input,
            telegram_poll_answer_input,
            telegram_checklist_tasks_input,
            telegram_guest_message_input,
        ],
        outputs=[
            telegram_message_output,
            telegram_poll_output,
            telegram_checklist_output,
            telegram_guest_answer_output,
        ],
        services=[service(name="telegram", start=runtime.start, stop=runtime.stop)],
    )
