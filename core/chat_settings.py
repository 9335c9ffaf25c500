"""Settings of one conversation, changed from inside the chat (``/model``, ``/persona``, ``/language``,
``/reply``, ``/timezone``, ``/voice``).

They are stored with the conversation, in the agent's memory store under ``settings:<context id>`` (SQLite in
one process; in Redis ``<prefix>{<context id>}:mem:settings``, written at once, so every worker reads the change
on its next run). ``/reset`` leaves them alone: it forgets what was said, not how the chat was set up.

The operator's rules (``ChatPolicy``) decide what may be chosen: the models of ``LLM_ALLOWED_MODELS``, the
length of a persona, the languages of the bot's own messages, and values pinned per conversation
(``*_CHANNEL_SETTINGS``), which no command can change. A group's reply policy (``/reply``: every message, or
only when the bot is mentioned) overrides the operator's (``DISCORD_REPLY_POLICY``, ``DISCORD_CHANNEL_POLICIES``,
``TELEGRAM_REPLY_POLICY``) in that conversation. ``effective`` merges the two for a run.
"""

from __future__ import annotations

import enum
import zoneinfo
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from .errors import MemoryStoreError
from .escape import escape_text

__all__ = (
    "REPLY_CHOICES",
    "VOICE_CHOICES",
    "ChatPolicy",
    "ChatSetting",
    "ChatSettings",
    "ChatSettingsStore",
    "escape_persona",
    "known_zone",
)


class ChatSetting(enum.StrEnum):
    """The settings a conversation can change."""

    MODEL = "model"
    """The model that answers (one of ``LLM_ALLOWED_MODELS``)."""
    PERSONA = "persona"
    """Who the bot is in this conversation (replaces ``BOT_PERSONA``)."""
    LANGUAGE = "language"
    """Language of the bot's own messages (errors, help, notices)."""
    REPLY = "reply"
    """When the bot answers in a group or server channel (``always`` or ``mention``; private chats always)."""
    TIMEZONE = "timezone"
    """The IANA time zone reminders and schedules are read in (``Europe/Paris``; ``BOT_TIMEZONE`` by default)."""
    VOICE = "voice"
    """Spoken replies (``on``: every answer is also spoken; ``off``: none; by default the answers to voice messages)."""


REPLY_CHOICES = ("always", "mention")
"""The reply policies a conversation may choose (the operator's ``off`` is not one: a group could not turn the
bot back on, since commands would be ignored too)."""
VOICE_CHOICES = ("on", "off")
"""The spoken-replies choices of a conversation (``/voice``); None keeps the default (answers to voice messages)."""


class ChatSettings(BaseModel):
    """What one conversation chose; ``None`` keeps the operator's default."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    model: str | None = None
    """The model name sent to the provider (one of ``LLM_ALLOWED_MODELS``)."""
    persona: str | None = None
    """The persona given in the chat, as written (escaped when it enters the prompt)."""
    language: str | None = None
    """Language code of the bot's own messages (``en``, ``fr``)."""
    reply: str | None = None
    """When the bot answers in a group (one of ``REPLY_CHOICES``); None keeps the operator's policy."""
    timezone: str | None = None
    """The chat's IANA time zone (``Europe/Paris``); None keeps the operator's (``ChatPolicy.default_timezone``)."""
    voice: str | None = None
    """Spoken replies (one of ``VOICE_CHOICES``); None: the answers to voice messages only."""

    def get(self, setting: ChatSetting) -> str | None:
        """The value of ``setting``."""
        value: str | None = getattr(self, setting.value)
        return value

    def over(self, parent: ChatSettings) -> ChatSettings:
        """These choices, and ``parent``'s where this conversation chose nothing (a thread over its channel)."""
        mine = self.model_dump()
        return ChatSettings(**{k: mine[k] if mine[k] is not None else v for k, v in parent.model_dump().items()})


_NOTHING = ChatSettings()
"""The settings of a conversation that chose nothing."""


def known_zone(name: str) -> bool:
    """True when ``name`` is an IANA time zone this machine knows (``Europe/Paris``, ``UTC``)."""
    if not name or name != name.strip() or len(name) > 64:
        return False
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file
        return False
    return True


def escape_persona(text: str) -> str:
    """A persona written in a chat, as it enters the system prompt: user text like any other, escaped by the
    one trust boundary (``core.escape.escape_text``), so it can neither open nor close a protocol element."""
    return escape_text(text)


@dataclass(kw_only=True)
class ChatPolicy:
    """The operator's rules for settings changed from the chat."""

    allowed_models: tuple[str, ...] = ()
    """Models a conversation may choose (``LLM_ALLOWED_MODELS``); empty: ``/model`` only shows the model."""
    default_model: str = ""
    """The model used when a conversation chose none (``LLM_MODEL``, for display)."""
    persona_max_chars: int = 1000
    """A longer persona is refused (``BOT_PERSONA_MAX_CHARS``)."""
    languages: tuple[str, ...] = ("en", "fr")
    """Languages of the bot's own messages a conversation may choose."""
    default_language: str = "en"
    """Language of the bot's own messages when a conversation chose none (``BOT_LANGUAGE``)."""
    default_timezone: str = "UTC"
    """The time zone of a conversation that chose none (``BOT_TIMEZONE``)."""
    admin_users: frozenset[str] = frozenset()
    """Platform-qualified user ids (``discord:123``, ``telegram:456``) who may change settings anywhere."""
    disabled_commands: frozenset[str] = frozenset()
    """Commands turned off entirely (``BOT_DISABLED_COMMANDS``: ``model``, ``persona``, ``stats``...)."""
    pinned: dict[str, dict[str, str]] = field(default_factory=dict)
    """Values fixed per context id by the operator (``*_CHANNEL_SETTINGS``): no command changes them. An
    empty value pins the operator's default."""

    def pins_of(self, context_id: str, parents: Sequence[str] = ()) -> Mapping[str, str]:
        """The values pinned in ``context_id``, and in the conversations it takes its settings from (``parents``,
        nearest first: a thread's channel), where it has no pin of its own."""
        pins: dict[str, str] = {}
        for cid in (*reversed(parents), context_id):
            pins.update(self.pinned.get(cid, {}))
        return pins

    def is_pinned(self, context_id: str, setting: ChatSetting, parents: Sequence[str] = ()) -> bool:
        """True when the operator fixed ``setting`` in ``context_id`` (or in one of its ``parents``)."""
        return setting.value in self.pins_of(context_id, parents)

    def zone_of(self, settings: ChatSettings) -> str:
        """The time zone of a conversation with the effective ``settings``: its own, else the operator's."""
        return settings.timezone or self.default_timezone

    def effective(self, context_id: str, chosen: ChatSettings, parents: Sequence[str] = ()) -> ChatSettings:
        """What a run of ``context_id`` uses: the conversation's choices, the operator's pins over them, and
        nothing the policy no longer allows (a model taken off ``LLM_ALLOWED_MODELS``, an unknown language)."""
        pins = self.pins_of(context_id, parents) if self.pinned else {}
        if not pins and chosen == _NOTHING:  # most conversations: nothing chosen, nothing pinned
            return chosen
        values: dict[str, Any] = chosen.model_dump()
        for name, value in pins.items():
            values[name] = value or None
        if values.get("model") is not None and values["model"] not in self.allowed_models:
            values["model"] = None
        if values.get("language") is not None and values["language"] not in self.languages:
            values["language"] = None
        if values.get("reply") is not None and values["reply"] not in REPLY_CHOICES:
            values["reply"] = None
        if values.get("timezone") is not None and not known_zone(values["timezone"]):
            values["timezone"] = None
        if values.get("voice") is not None and values["voice"] not in VOICE_CHOICES:
            values["voice"] = None
        persona = values.get("persona")
        if persona is not None:
            values["persona"] = persona[: self.persona_max_chars] or None
        return ChatSettings(**values)


class ChatSettingsStore:
    """Reads and writes conversations' settings in a memory store (``settings:<context id>``)."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory
        """The agent's memory store."""

    @staticmethod
    def key(context_id: str) -> str:
        """The memory key of ``context_id``'s settings."""
        return f"settings:{context_id}"

    async def get(self, context_id: str) -> ChatSettings:
        """What ``context_id`` chose (all ``None`` when nothing)."""
        stored = await self.memory.get(self.key(context_id))
        if not isinstance(stored, dict):
            return ChatSettings()
        try:
            return ChatSettings.model_validate(stored)
        except ValueError as exc:
            raise MemoryStoreError(f"the stored settings of {context_id} are not valid: {exc}") from exc

    async def chosen(self, context_id: str, parents: Sequence[str] = ()) -> ChatSettings:
        """What ``context_id`` chose, over what its ``parents`` chose (nearest first) where it chose nothing."""
        settings = await self.get(context_id)
        for parent in parents:
            settings = settings.over(await self.get(parent))
        return settings

    async def change(self, context_id: str, **values: str | None) -> ChatSettings:
        """Set (or, with ``None``, clear) some of ``context_id``'s settings; returns the new settings."""
        current = await self.get(context_id)
        updated = current.model_copy(update=values)
        data = {k: v for k, v in updated.model_dump().items() if v is not None}
        if data:
            await self.memory.set(self.key(context_id), data)
        else:
            await self.memory.delete(self.key(context_id))
        return updated
