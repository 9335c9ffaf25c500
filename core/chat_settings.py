"""Settings of one conversation, changed from inside the chat (``/model``, ``/persona``, ``/language``,
``/reply``, ``/timezone``, ``/voice``, ``/busy``, ``/quiet``).

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
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from .busy import QUIET_CHAT_MAX_MS, BusyPolicy
from .errors import MemoryStoreError
from .escape import escape_text
from .recent import Recent

__all__ = (
    "BUSY_CHOICES",
    "REPLY_CHOICES",
    "SETTINGS_CACHE",
    "VOICE_CHOICES",
    "ChatPolicy",
    "ChatSetting",
    "ChatSettings",
    "ChatSettingsStore",
    "ControlDefaults",
    "ControlsMirror",
    "escape_persona",
    "known_zone",
    "quiet_choice",
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
    BUSY = "busy"
    """What a message sent while the bot answers does (``core.busy.BusyPolicy``; ``BOT_BUSY`` by default)."""
    QUIET = "quiet"
    """The quiet window, in milliseconds: messages sent within it are answered together (``BOT_QUIET_MS``)."""


REPLY_CHOICES = ("always", "mention")
"""The reply policies a conversation may choose (the operator's ``off`` is not one: a group could not turn the
bot back on, since commands would be ignored too)."""
VOICE_CHOICES = ("on", "off")
"""The spoken-replies choices of a conversation (``/voice``); None keeps the default (answers to voice messages)."""
BUSY_CHOICES = tuple(policy.value for policy in BusyPolicy)
"""The busy policies a conversation may choose (``/busy``); None keeps the operator's (``BOT_BUSY``)."""


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
    busy: str | None = None
    """What a message sent while the bot answers does (one of ``BUSY_CHOICES``); None keeps the operator's."""
    quiet: str | None = None
    """The quiet window in milliseconds, as digits (``0`` to ``core.busy.QUIET_CHAT_MAX_MS``; ``0``: none); None
    keeps the operator's (``BOT_QUIET_MS``). Text like every setting, so a pin in ``*_CHANNEL_SETTINGS`` is one."""

    @classmethod
    def stored(cls, raw: str | bytes | None) -> ChatSettings:
        """The settings as a memory store keeps them (JSON, ``ChatSettingsStore``), read without the store (a queue
        worker reads them with a batch); nothing chosen when ``raw`` is missing or not valid."""
        if not raw:
            return _NOTHING
        try:
            return cls.model_validate_json(raw)
        except ValueError:
            return _NOTHING

    def busy_policy(self) -> BusyPolicy | None:
        """The busy policy chosen (``/busy``, or a pin in effective settings), or None: the operator's applies."""
        return BusyPolicy(self.busy) if self.busy in BUSY_CHOICES else None

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


def quiet_choice(text: str | None) -> int | None:
    """The quiet window ``text`` chooses, in milliseconds (``"800"``, ``"0"``), or None when it is no valid choice
    (not digits, or above ``QUIET_CHAT_MAX_MS``)."""
    if text is None or not text.isascii() or not text.isdigit() or len(text) > 6:
        return None
    value = int(text)
    return value if value <= QUIET_CHAT_MAX_MS else None


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
    default_busy: str = BusyPolicy.STEER.value
    """The busy policy of a conversation that chose none (``BOT_BUSY``; set from ``AgentOptions.busy``)."""
    default_quiet_ms: int = 0
    """The quiet window of a conversation that chose none (``BOT_QUIET_MS``; set from ``AgentOptions.quiet_ms``)."""
    quiet_ms_by_context: dict[str, int] = field(default_factory=dict)
    """The quiet window of the conversations of some context types instead (``AgentOptions.quiet_ms_by_context``)."""
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

    def quiet_of(self, context_id: str, settings: ChatSettings) -> int:
        """The quiet window (ms) of ``context_id`` (``<context type>:<key>``) with the effective ``settings``: its
        choice (``/quiet``), else its context type's, else the operator's."""
        chosen = quiet_choice(settings.quiet)
        return chosen if chosen is not None else self.quiet_default(context_id)

    def quiet_default(self, context_id: str, default: int | None = None) -> int:
        """The quiet window (ms) of ``context_id`` when it chose none: its context type's, else ``default`` (the
        operator's: ``default_quiet_ms`` unless given)."""
        for context_type, window in self.quiet_ms_by_context.items():
            if context_id.startswith(context_type + ":"):
                return window
        return self.default_quiet_ms if default is None else default

    def control_defaults(
        self, context_id: str, parents: Sequence[str] = (), *, busy: str | None = None, quiet_ms: int | None = None
    ) -> ControlDefaults:
        """What the operator decides of ``context_id``'s busy policy and quiet window before its own choice: a pin
        (``*_CHANNEL_SETTINGS``, its own or its ``parents'``), else the default (``busy`` and ``quiet_ms`` when given:
        a fleet's ``QueueConfig``; else ``default_busy`` and ``quiet_default``). A queue's ingest and take
        (``core.fleet``) apply the conversation's own choice over it where nothing is pinned."""
        pins = self.pins_of(context_id, parents) if self.pinned else {}
        busy_default = busy if busy is not None else self.default_busy
        quiet_default = self.quiet_default(context_id, quiet_ms)
        busy_pin = pins.get(ChatSetting.BUSY.value)
        quiet_pin = pins.get(ChatSetting.QUIET.value)
        pinned_quiet = quiet_choice(quiet_pin) if quiet_pin else None
        return ControlDefaults(
            busy=busy_pin if busy_pin in BUSY_CHOICES else busy_default,
            busy_pinned=busy_pin is not None,
            quiet_ms=pinned_quiet if pinned_quiet is not None else quiet_default,
            quiet_pinned=quiet_pin is not None,
        )

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
        if values.get("busy") is not None and values["busy"] not in BUSY_CHOICES:
            values["busy"] = None
        if values.get("quiet") is not None and quiet_choice(values["quiet"]) is None:
            values["quiet"] = None
        persona = values.get("persona")
        if persona is not None:
            values["persona"] = persona[: self.persona_max_chars] or None
        return ChatSettings(**values)


@dataclass(frozen=True, kw_only=True)
class ControlDefaults:
    """A conversation's busy policy and quiet window as the operator decides them (``ChatPolicy.control_defaults``)."""

    busy: str
    """The busy policy when the conversation chose none, or the pinned one (one of ``BUSY_CHOICES``)."""
    busy_pinned: bool
    """The operator pinned it: the conversation's own ``/busy`` does not count."""
    quiet_ms: int
    """The quiet window when the conversation chose none, or the pinned one (ms)."""
    quiet_pinned: bool
    """The operator pinned it: the conversation's own ``/quiet`` does not count."""


class ControlsMirror(Protocol):
    """Where a conversation's own busy policy and quiet window are kept besides its settings: a queue's dispatcher
    keeps them with the conversation's inbox, read by the ingest and the take at no extra cost (``core.fleet``)."""

    async def set_controls(self, context_id: str, *, busy: str | None, quiet_ms: int | None) -> None:
        """``context_id`` chose ``busy`` (one of ``BUSY_CHOICES``) and ``quiet_ms``; None: the operator's."""
        ...


SETTINGS_CACHE = 10_000
"""Conversations whose settings one process keeps read, at most (the least recently read go first)."""


class ChatSettingsStore:
    """Reads and writes conversations' settings in a memory store (``settings:<context id>``). With ``cache``
    (one process: every change goes through this store), what was read or written is kept in memory, so a run
    does not read the store again before its model call (a read that waits behind the previous run's writes:
    3 to 12 ms of a web chat message's 5 before its model call, issue 51); a fleet reads the store every time
    (another process may have changed them)."""

    def __init__(self, memory: Any, *, controls: ControlsMirror | None = None, cache: bool = False) -> None:
        self.memory = memory
        """The agent's memory store."""
        self.controls = controls
        """Told when a conversation's ``/busy`` or ``/quiet`` changes (the agent's dispatcher); None: nobody."""
        self.cache = cache
        """Keep the settings read or written in this process (only where no other process changes them)."""
        self._kept: Recent[str, ChatSettings] = Recent(SETTINGS_CACHE)

    @staticmethod
    def key(context_id: str) -> str:
        """The memory key of ``context_id``'s settings."""
        return f"settings:{context_id}"

    async def get(self, context_id: str) -> ChatSettings:
        """What ``context_id`` chose (all ``None`` when nothing)."""
        kept = self._kept.used(context_id)
        if kept is not None:
            return kept
        stored = await self.memory.get(self.key(context_id))
        if not isinstance(stored, dict):
            settings = ChatSettings()
        else:
            try:
                settings = ChatSettings.model_validate(stored)
            except ValueError as exc:
                raise MemoryStoreError(f"the stored settings of {context_id} are not valid: {exc}") from exc
        self._keep(context_id, settings)
        return settings

    async def erase(self, context_id: str) -> None:
        """Delete what ``context_id`` chose (its conversation is forgotten)."""
        self._kept.pop(context_id, None)
        await self.memory.delete(self.key(context_id))

    def _keep(self, context_id: str, settings: ChatSettings) -> None:
        if self.cache:
            self._kept.keep(context_id, settings)  # (frozen: shared safely)

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
        self._kept.pop(context_id, None)  # (a failed write: read again next time)
        if data:
            await self.memory.set(self.key(context_id), data)
        else:
            await self.memory.delete(self.key(context_id))
        self._keep(context_id, updated)
        if self.controls is not None and ("busy" in values or "quiet" in values):
            busy = updated.busy if updated.busy in BUSY_CHOICES else None
            await self.controls.set_controls(context_id, busy=busy, quiet_ms=quiet_choice(updated.quiet))
        return updated
