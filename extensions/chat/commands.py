"""The settings commands both adapters serve, written once: ``/model``, ``/persona``, ``/language``,
``/reply``, ``/timezone``, ``/voice``, ``/busy``, ``/quiet``, ``/settings``, ``/stats``, ``/reminders``
(``extensions.chat.reminders``) and ``/memory`` (``extensions.chat.memory``: what the bot keeps about the caller,
shown to them alone), and ``/stop`` (the answer being written here stops, on whichever worker writes it). The
adapter says who is asking (``Caller``) and shows the ``Answer`` (Discord as an ephemeral reply, Telegram as a
message with an inline keyboard for the choices).

Who may change what: a chat's admins (the adapter decides: Discord's Manage Server or Manage Channels,
Telegram's chat administrators), the owner of a private chat, and ``BOT_ADMIN_USERS`` everywhere. Anyone may
look (``/settings``, ``/model`` and ``/persona`` without a change, ``/stats`` for their own figures). A
setting the operator pinned in a channel cannot be changed; a command in ``BOT_DISABLED_COMMANDS`` answers
that it is off. Answers are in the chat's language.
"""

from __future__ import annotations

import functools
import json
import zoneinfo
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.busy import QUIET_CHAT_MAX_MS
from core.chat_settings import (
    BUSY_CHOICES,
    REPLY_CHOICES,
    VOICE_CHOICES,
    ChatSetting,
    ChatSettings,
    known_zone,
    quiet_choice,
)
from core.errors import NotAllowedError
from core.media.spoken import speaks
from core.usage import CACHED, USAGE, InMemoryUsage, UsageTotals, last_days

from .i18n import LANGUAGE_NAMES, say
from .knowledge import knowledge_command
from .memory import memory_text
from .policy import ReplyPolicy
from .reminders import CANCEL_PREFIX, SHOWN, describe, find, schedules_or_none, short_id

if TYPE_CHECKING:
    from core import Host
    from core.definitions import Context

__all__ = (
    "COMMANDS",
    "STOP_BUTTON",
    "Answer",
    "Caller",
    "ChatCommands",
    "all_zones",
    "parse_channel_settings",
    "zone_named",
)

COMMANDS = (
    "model",
    "persona",
    "language",
    "reply",
    "timezone",
    "voice",
    "busy",
    "quiet",
    "settings",
    "stats",
    "reminders",
    "memory",
    "knowledge",
    "stop",
)
"""The settings commands and ``/stop``, by name (``BOT_DISABLED_COMMANDS`` takes these names, and ``reset``)."""
QUIET_OFFERED = (0, 400, 1000, 3000)
"""The quiet windows (ms) ``/quiet`` offers as buttons (any other up to ``QUIET_CHAT_MAX_MS`` may be written)."""
STOP_BUTTON = "bots:stop"
"""The id of the Stop button under an answer being written (its label ``say("stop_button")``): pressing it is
``/stop`` in the conversation where it was pressed (the conversation is taken from the press, never from the id)."""


@dataclass(frozen=True, kw_only=True)
class Caller:
    """Who runs a command, as the adapter knows them."""

    user: str
    """Platform-qualified user id (``discord:123``, ``telegram:456``)."""
    manages_chat: bool
    """An admin of this chat (or the user of a private chat)."""
    ask_manages: Callable[[], Awaitable[bool]] | None = None
    """When ``manages_chat`` was not asked because it costs a request (Telegram's getChatMember): how to ask, for
    a command that needs it only when the caller is not otherwise allowed (``/stop`` of an answer not for them)."""


@dataclass(frozen=True, kw_only=True)
class Answer:
    """What a command answers."""

    text: str
    """The message, in the chat's language."""
    choices: list[tuple[str, str]] = field(default_factory=list)
    """``(label, value)`` buttons to offer (Telegram's inline keyboard); a value is ``<setting>:<choice>``."""
    changed: bool = False
    """A setting was changed."""
    personal: bool = False
    """It shows what the bot keeps about the caller (``/memory``): the platform shows it to them alone."""


class ChatCommands:
    """Serves the settings commands of one agent's conversations."""

    def __init__(self, agent: Host, parents: Sequence[str] = (), *, quote: Callable[[str], str] | None = None) -> None:
        self.agent = agent
        self.parents = tuple(parents)
        """The conversations whose settings the one commanded starts from (a Discord thread's channel): their
        choices show through where it chose nothing, and their pins hold in it too."""
        self.quote: Callable[[str], str] = quote or str
        """How text people wrote (a persona, a reminder) is put in an answer: as is, or made inert where the
        platform renders markup in the bot's messages (Discord's Markdown: a masked link would render)."""

    @classmethod
    def of(
        cls, agent: Host, context: Context, args: Any, *, quote: Callable[[str], str] | None = None
    ) -> tuple[ChatCommands, str]:
        """The settings commands of the conversation of ``context`` and ``args`` (with the conversations it takes
        its settings from, ``Context.settings_from``), and its context id."""
        return cls(agent, agent.settings_parents(context, args), quote=quote), agent.context_id(context, args)

    # -- helpers ---------------------------------------------------------------------------------------

    def may_change(self, caller: Caller) -> bool:
        """True when ``caller`` may change this chat's settings."""
        return caller.manages_chat or self.agent.is_admin(caller.user)

    def enabled(self, command: str) -> bool:
        """False when the operator turned ``command`` off (``BOT_DISABLED_COMMANDS``)."""
        return command not in self.agent.chat_policy.disabled_commands

    async def effective(self, context_id: str) -> ChatSettings:
        """The settings a run of ``context_id`` would use now."""
        return await self.agent.chat_of(context_id, self.parents)

    async def language(self, context_id: str) -> str:
        """The language of the bot's own messages in ``context_id``."""
        chosen = (await self.effective(context_id)).language
        return chosen or self.agent.chat_policy.default_language

    async def reply_policy(self, context_id: str, default: ReplyPolicy) -> ReplyPolicy:
        """When the bot answers in the group ``context_id``: the policy it chose (``/reply``, or its parent's) over
        the operator's ``default``, unless the operator turned the bot off in groups (``off`` stays off)."""
        if default is ReplyPolicy.OFF:
            return default
        chosen = (await self.effective(context_id)).reply
        return ReplyPolicy(chosen) if chosen is not None else default

    def _model_shown(self, settings: ChatSettings) -> str:
        policy = self.agent.chat_policy
        return settings.model or policy.default_model or str(self.agent.model.name)

    def _refusal(self, context_id: str, caller: Caller, setting: ChatSetting, lang: str) -> str | None:
        what = say(f"setting.{setting.value}", lang)
        if self.agent.chat_policy.is_pinned(context_id, setting, self.parents):
            return say("pinned", lang, setting=what)
        if not self.may_change(caller):
            return say("not_allowed", lang, setting=what)
        return None

    # -- the commands ----------------------------------------------------------------------------------

    async def run(self, command: str, context_id: str, caller: Caller, arg: str | None = None) -> Answer:
        """Answer ``/command arg`` in ``context_id``."""
        if command == "stop" and self.enabled(command):
            return await self.stop(context_id, caller)  # at once: the chat's language is read after
        lang = await self.language(context_id)
        if command not in COMMANDS:
            raise ValueError(f"unknown settings command {command!r}")
        if not self.enabled(command):
            return Answer(text=say("disabled", lang, command=command))
        arg = arg.strip() if arg is not None else None
        if command == "model":
            return await self.model(context_id, caller, arg or None)
        if command == "persona":
            return await self.persona(context_id, caller, arg)
        if command == "language":
            return await self.set_language(context_id, caller, arg or None)
        if command == "reply":
            return await self.reply(context_id, caller, arg or None)
        if command == "timezone":
            return await self.timezone(context_id, caller, arg or None)
        if command == "voice":
            return await self.voice(context_id, caller, arg or None)
        if command == "busy":
            return await self.busy(context_id, caller, arg or None)
        if command == "quiet":
            return await self.quiet(context_id, caller, arg or None)
        if command == "settings":
            return await self.settings(context_id)
        if command == "reminders":
            return await self.reminders(context_id, caller, arg or None)
        if command == "memory":
            return await self.memory(context_id, caller, arg or None)
        if command == "knowledge":
            text, changed = await knowledge_command(
                self.agent, context_id, arg or None, may_change=self.may_change(caller), language=lang, quote=self.quote
            )
            return Answer(text=text, changed=changed)
        return await self.stats(context_id, caller)

    async def model(self, context_id: str, caller: Caller, name: str | None) -> Answer:
        """``/model``: show the model and the choices, or (an admin) choose one."""
        lang = await self.language(context_id)
        current = await self.effective(context_id)
        allowed = self.agent.chat_policy.allowed_models
        shown = self._model_shown(current)
        if name is None:
            if not allowed:
                return Answer(text=say("model_only", lang, model=shown))
            return Answer(
                text=say("model_choose", lang, model=shown, choices=", ".join(allowed)),
                choices=[(m, f"model:{m}") for m in allowed],
            )
        refusal = self._refusal(context_id, caller, ChatSetting.MODEL, lang)
        if refusal is not None:
            return Answer(text=refusal)
        if name not in allowed:
            return Answer(text=say("model_unknown", lang, model=name, choices=", ".join(allowed) or shown))
        await self.agent.chat_settings.change(context_id, model=name)
        return Answer(text=say("model_set", lang, model=name), changed=True)

    async def persona(self, context_id: str, caller: Caller, arg: str | None) -> Answer:
        """``/persona`` (show), ``/persona reset``, ``/persona set <text>`` (or ``/persona <text>``)."""
        lang = await self.language(context_id)
        action, _, rest = (arg or "").partition(" ")
        if action.lower() in ("", "show"):
            current = (await self.effective(context_id)).persona
            if current is None:
                return Answer(text=say("persona_default", lang))
            return Answer(text=say("persona_show", lang, persona=self.quote(current)))
        refusal = self._refusal(context_id, caller, ChatSetting.PERSONA, lang)
        if refusal is not None:
            return Answer(text=refusal)
        if action.lower() == "reset":
            await self.agent.chat_settings.change(context_id, persona=None)
            return Answer(text=say("persona_reset", lang), changed=True)
        text = rest.strip() if action.lower() == "set" else (arg or "").strip()
        if not text:
            return Answer(text=say("persona_empty", lang))
        limit = self.agent.chat_policy.persona_max_chars
        if len(text) > limit:
            return Answer(text=say("persona_too_long", lang, length=len(text), limit=limit))
        await self.agent.chat_settings.change(context_id, persona=text)
        return Answer(text=say("persona_set", lang, length=len(text)), changed=True)

    async def set_language(self, context_id: str, caller: Caller, code: str | None) -> Answer:
        """``/language``: show the languages, or (an admin) choose one."""
        lang = await self.language(context_id)
        languages = self.agent.chat_policy.languages
        choices = ", ".join(f"{c} ({LANGUAGE_NAMES.get(c, c)})" for c in languages)
        if code is None:
            return Answer(
                text=say("language_now", lang, language=LANGUAGE_NAMES.get(lang, lang), choices=choices),
                choices=[(LANGUAGE_NAMES.get(c, c), f"language:{c}") for c in languages],
            )
        refusal = self._refusal(context_id, caller, ChatSetting.LANGUAGE, lang)
        if refusal is not None:
            return Answer(text=refusal)
        code = code.lower()
        if code not in languages:
            return Answer(text=say("language_unknown", lang, language=code, choices=choices))
        await self.agent.chat_settings.change(context_id, language=code)
        return Answer(text=say("language_set", code), changed=True)

    async def reply(self, context_id: str, caller: Caller, policy: str | None) -> Answer:
        """``/reply``: when the bot answers in this group (every message, or when mentioned), or (an admin)
        choose; ``/reply default`` goes back to the operator's policy. Private chats are always answered."""
        lang = await self.language(context_id)
        choices = ", ".join((*REPLY_CHOICES, "default"))
        if policy is None:
            current = (await self.effective(context_id)).reply
            return Answer(
                text=say("reply_now", lang, policy=say(f"reply.{current or 'default'}", lang), choices=choices),
                choices=[(say(f"reply.{c}", lang), f"reply:{c}") for c in (*REPLY_CHOICES, "default")],
            )
        refusal = self._refusal(context_id, caller, ChatSetting.REPLY, lang)
        if refusal is not None:
            return Answer(text=refusal)
        policy = policy.lower()
        if policy not in (*REPLY_CHOICES, "default"):
            return Answer(text=say("reply_unknown", lang, policy=policy, choices=choices))
        await self.agent.chat_settings.change(context_id, reply=None if policy == "default" else policy)
        return Answer(text=say("reply_set", lang, policy=say(f"reply.{policy}", lang)), changed=True)

    async def timezone(self, context_id: str, caller: Caller, name: str | None) -> Answer:
        """``/timezone``: the chat's time zone (reminders and schedules are read in it), or (an admin) choose one
        by its IANA name; ``/timezone default`` goes back to the operator's (``BOT_TIMEZONE``)."""
        lang = await self.language(context_id)
        policy = self.agent.chat_policy
        if name is None:
            return Answer(text=say("timezone_now", lang, zone=policy.zone_of(await self.effective(context_id))))
        refusal = self._refusal(context_id, caller, ChatSetting.TIMEZONE, lang)
        if refusal is not None:
            return Answer(text=refusal)
        if name.lower() == "default":
            await self.agent.chat_settings.change(context_id, timezone=None)
            return Answer(text=say("timezone_set", lang, zone=policy.default_timezone), changed=True)
        zone = zone_named(name)
        if zone is None:
            return Answer(text=say("timezone_unknown", lang, zone=name[:64]))
        await self.agent.chat_settings.change(context_id, timezone=zone)
        return Answer(text=say("timezone_set", lang, zone=zone), changed=True)

    async def voice(self, context_id: str, caller: Caller, choice: str | None) -> Answer:
        """``/voice``: whether the answers here are also spoken (``on``: every answer; ``off``: none; by default
        the answers to voice messages), or (an admin) choose; ``/voice default`` goes back to the default. Said
        plainly when the bot has no speech engine (``TTS_BASE_URL`` / ``TTS_ENGINE``)."""
        lang = await self.language(context_id)
        if not speaks(self.agent):
            return Answer(text=say("voice.unavailable", lang))
        options = (*VOICE_CHOICES, "default")
        if choice is None:
            current = (await self.effective(context_id)).voice
            shown = say(f"voice.{current or 'default'}", lang)
            return Answer(
                text=say("voice_now", lang, policy=shown, choices=", ".join(options)),
                choices=[(say(f"voice.{c}", lang), f"voice:{c}") for c in options],
            )
        refusal = self._refusal(context_id, caller, ChatSetting.VOICE, lang)
        if refusal is not None:
            return Answer(text=refusal)
        choice = choice.lower()
        if choice not in options:
            return Answer(text=say("voice_unknown", lang, policy=self.quote(choice[:32]), choices=", ".join(options)))
        await self.agent.chat_settings.change(context_id, voice=None if choice == "default" else choice)
        return Answer(text=say("voice_set", lang, policy=say(f"voice.{choice}", lang)), changed=True)

    def _busy_shown(self, policy: str | None, lang: str) -> str:
        if policy is None or policy == "default":
            default = self.agent.chat_policy.default_busy
            return say("busy.default", lang, policy=say(f"busy.{default}", lang))
        return say(f"busy.{policy}", lang)

    async def busy(self, context_id: str, caller: Caller, choice: str | None) -> Answer:
        """``/busy``: what a message sent here while the bot answers does (``core.busy``: ``steer``, ``collect``,
        ``queue``, ``interrupt``), or (an admin) choose; ``/busy default`` goes back to the operator's (``BOT_BUSY``).
        The answer being written keeps the policy it began with; the next one uses the new one."""
        lang = await self.language(context_id)
        options = (*BUSY_CHOICES, "default")
        if choice is None:
            current = (await self.effective(context_id)).busy
            return Answer(
                text=say("busy_now", lang, policy=self._busy_shown(current, lang), choices=", ".join(options)),
                choices=[(c, f"busy:{c}") for c in options],
            )
        refusal = self._refusal(context_id, caller, ChatSetting.BUSY, lang)
        if refusal is not None:
            return Answer(text=refusal)
        choice = choice.lower()
        if choice not in options:
            return Answer(text=say("busy_unknown", lang, policy=self.quote(choice[:32]), choices=", ".join(options)))
        await self.agent.chat_settings.change(context_id, busy=None if choice == "default" else choice)
        return Answer(text=say("busy_set", lang, policy=self._busy_shown(choice, lang)), changed=True)

    def _quiet_shown(self, context_id: str, settings: ChatSettings, lang: str) -> str:
        return say("quiet.ms", lang, ms=self.agent.chat_policy.quiet_of(context_id, settings))

    async def quiet(self, context_id: str, caller: Caller, choice: str | None) -> Answer:
        """``/quiet``: the quiet window here (messages sent within it of each other are answered together,
        ``core.busy``), or (an admin) choose one in milliseconds (``/quiet 800``; ``/quiet 0``: at once; ``/quiet
        default``: the operator's, ``BOT_QUIET_MS``)."""
        lang = await self.language(context_id)
        if choice is None:
            current = await self.effective(context_id)
            return Answer(
                text=say("quiet_now", lang, window=self._quiet_shown(context_id, current, lang), max=QUIET_CHAT_MAX_MS),
                choices=[
                    *((say("quiet.ms", lang, ms=ms), f"quiet:{ms}") for ms in QUIET_OFFERED),
                    ("default", "quiet:default"),
                ],
            )
        refusal = self._refusal(context_id, caller, ChatSetting.QUIET, lang)
        if refusal is not None:
            return Answer(text=refusal)
        choice = choice.lower().removesuffix("ms").strip()
        if choice != "default" and quiet_choice(choice) is None:
            return Answer(text=say("quiet_unknown", lang, window=self.quote(choice[:32]), max=QUIET_CHAT_MAX_MS))
        updated = await self.agent.chat_settings.change(context_id, quiet=None if choice == "default" else choice)
        settings = self.agent.chat_policy.effective(context_id, updated, self.parents)
        if not self.agent.chat_policy.quiet_of(context_id, settings):
            return Answer(text=say("quiet_off", lang), changed=True)
        return Answer(text=say("quiet_set", lang, window=self._quiet_shown(context_id, settings, lang)), changed=True)

    async def reminders(self, context_id: str, caller: Caller, arg: str | None) -> Answer:
        """``/reminders``: this chat's reminders and scheduled messages, soonest first, with a cancel button each;
        ``/reminders cancel <id>`` cancels one (its creator, the chat's admins, ``BOT_ADMIN_USERS``)."""
        action, _, rest = (arg or "").strip().partition(" ")
        if action.lower() == "cancel":
            return await self.cancel_reminder(context_id, caller, rest.strip())
        if action.lower() not in ("", "list"):
            return Answer(text=say("reminders_usage", await self.language(context_id)))
        return await self.list_reminders(context_id)

    async def list_reminders(self, context_id: str, *, before: str = "") -> Answer:
        """The list ``/reminders`` shows (``before``: a line above it, such as what was just cancelled)."""
        lang = await self.language(context_id)
        schedules = schedules_or_none(self.agent)
        if schedules is None:
            return Answer(text=say("reminders_unavailable", lang))
        found = await schedules.by_conversation(context_id)
        if not found:
            text = say("reminders_none", lang)
        else:
            lines = [describe(s, lang=lang, quote=self.quote) for s in found[:SHOWN]]
            if len(found) > SHOWN:
                lines.append(say("reminders_more", lang, count=len(found) - SHOWN))
            text = say("reminders_list", lang, count=len(found), items="\n".join(lines))
        choices = [(say("reminders_cancel_label", lang, id=short_id(s)), CANCEL_PREFIX + s.id) for s in found[:SHOWN]]
        return Answer(text=f"{before}\n\n{text}" if before else text, choices=choices)

    async def cancel_reminder(self, context_id: str, caller: Caller, ident: str) -> Answer:
        """Cancel the reminder ``ident`` (its id or a unique prefix) of this chat, if ``caller`` may."""
        lang = await self.language(context_id)
        schedules = schedules_or_none(self.agent)
        if schedules is None:
            return Answer(text=say("reminders_unavailable", lang))
        if not ident:
            return Answer(text=say("reminders_usage", lang))
        found = find(await schedules.by_conversation(context_id), ident)
        shown = self.quote(ident.strip()[:32])
        if found is None:
            return Answer(text=say("reminders_unknown", lang, id=shown))
        if found.creator != caller.user and not self.may_change(caller):
            return Answer(text=say("reminders_not_yours", lang, id=short_id(found)))
        if await schedules.cancel(found.id) is None:
            return Answer(text=say("reminders_unknown", lang, id=short_id(found)))
        done = say("reminders_cancelled", lang, id=short_id(found))
        answer = await self.list_reminders(context_id, before=done)
        return Answer(text=answer.text, choices=answer.choices, changed=True)

    async def memory(self, context_id: str, caller: Caller, arg: str | None) -> Answer:
        """``/memory``: what the bot keeps about the caller (their facts everywhere, their reminders, their usage);
        ``/memory delete <number>`` deletes one item, ``/memory delete all`` all of it. Anyone, for themselves."""
        lang = await self.language(context_id)
        text, deleted = await memory_text(self.agent, caller.user, arg, here=context_id, lang=lang, quote=self.quote)
        return Answer(text=text, changed=deleted, personal=True)

    async def stop(self, context_id: str, caller: Caller) -> Answer:
        """``/stop``: stop the answer being written in this conversation, wherever it runs (``Host.request_stop``:
        the model call is cancelled, what was written stays with a mark, no later action runs). The people the
        answer is for may, and the chat's admins (``BOT_ADMIN_USERS`` too); anyone else is told who may."""
        try:
            by = None if self.may_change(caller) else caller.user
            try:
                stopped = await self.agent.request_stop(context_id, by=by)
            except NotAllowedError:
                if caller.ask_manages is None or not await caller.ask_manages():
                    raise
                stopped = await self.agent.request_stop(context_id)
        except NotAllowedError:
            return Answer(text=say("stop_not_yours", await self.language(context_id)))
        return Answer(text=say("stop_done" if stopped else "stop_nothing", await self.language(context_id)))

    async def settings(self, context_id: str) -> Answer:
        """``/settings``: every setting of the chat, the pinned ones marked."""
        lang = await self.language(context_id)
        current = await self.effective(context_id)
        policy = self.agent.chat_policy

        def mark(setting: ChatSetting) -> str:
            return say("pinned_mark", lang) if policy.is_pinned(context_id, setting, self.parents) else ""

        persona = current.persona or say("settings_default_persona", lang)
        if len(persona) > 200:
            persona = persona[:199] + "…"
        persona = self.quote(persona) if current.persona else persona
        text = say(
            "settings",
            lang,
            model=self._model_shown(current) + mark(ChatSetting.MODEL),
            persona=persona + mark(ChatSetting.PERSONA),
            language=LANGUAGE_NAMES.get(lang, lang) + mark(ChatSetting.LANGUAGE),
            reply=say(f"reply.{current.reply or 'default'}", lang) + mark(ChatSetting.REPLY),
            timezone=policy.zone_of(current) + mark(ChatSetting.TIMEZONE),
            busy=self._busy_shown(current.busy, lang) + mark(ChatSetting.BUSY),
            quiet=self._quiet_shown(context_id, current, lang) + mark(ChatSetting.QUIET),
        )
        return Answer(text=text)

    async def stats(self, context_id: str, caller: Caller) -> Answer:
        """``/stats``: the caller's own usage and this chat's, today and over 30 days; and, once the model's
        provider has read some of this chat's prompts from its cache, how many of its tokens in were cached."""
        lang = await self.language(context_id)
        usage = self.agent.provided(USAGE)  # (the Usage plugin's store; without it nothing was counted)
        if usage is None:
            usage = InMemoryUsage()
        today, month = last_days(1), last_days(30)
        figures: dict[str, object] = {}
        tokens_in: dict[str, int] = {}
        for prefix, key in (("user", f"user:{caller.user}"), ("chat", f"chat:{context_id}")):
            for suffix, days in (("", today), ("_30", month)):
                totals: UsageTotals = await usage.totals(key, days)
                figures[f"{prefix}_in{suffix}"] = tokens_in[f"{prefix}{suffix}"] = totals.input_tokens
                figures[f"{prefix}_out{suffix}"] = totals.output_tokens
                figures[f"{prefix}_cost{suffix}"] = f"{totals.cost:.4f}"
        text = say("stats", lang, **figures)
        cached = {
            suffix: (await usage.totals(f"{CACHED}chat:{context_id}", days)).input_tokens
            for suffix, days in (("", today), ("_30", month))
        }
        if cached["_30"]:
            text += "\n" + say(
                "stats_cached",
                lang,
                cached=cached[""],
                uncached=tokens_in["chat"] - cached[""],
                cached_30=cached["_30"],
                uncached_30=tokens_in["chat_30"] - cached["_30"],
            )
        return Answer(text=text)

    async def choose(self, context_id: str, caller: Caller, value: str) -> Answer:
        """A choice offered by an ``Answer`` was picked (``model:<name>``, ``language:<code>``)."""
        setting, _, choice = value.partition(":")
        if setting == "model" and self.enabled("model"):
            return await self.model(context_id, caller, choice)
        if setting == "language" and self.enabled("language"):
            return await self.set_language(context_id, caller, choice)
        if setting == "reply" and self.enabled("reply"):
            return await self.reply(context_id, caller, choice)
        if setting == "voice" and self.enabled("voice"):
            return await self.voice(context_id, caller, choice)
        if setting == "busy" and self.enabled("busy"):
            return await self.busy(context_id, caller, choice)
        if setting == "quiet" and self.enabled("quiet"):
            return await self.quiet(context_id, caller, choice)
        if value.startswith(CANCEL_PREFIX) and self.enabled("reminders"):
            return await self.cancel_reminder(context_id, caller, value.removeprefix(CANCEL_PREFIX))
        return Answer(text=say("command_failed", await self.language(context_id)))


@functools.cache
def all_zones() -> dict[str, str]:
    """Every IANA time zone this machine knows, by its lowercase name."""
    return {name.lower(): name for name in zoneinfo.available_timezones()}


def zone_named(text: str) -> str | None:
    """The IANA time zone ``text`` names, whatever its case (``europe/paris`` -> ``Europe/Paris``), or None."""
    text = text.strip()
    if known_zone(text):
        return text
    found = all_zones().get(text.lower()) if len(text) <= 64 else None
    return found if found is not None and known_zone(found) else None


def parse_channel_settings(value: object, variable: str) -> dict[str, dict[str, str]]:
    """``*_CHANNEL_SETTINGS``: values the operator pins per channel or chat, as
    ``id:setting=value;setting=value,id:setting=value`` (an empty value pins the operator's default) or JSON
    (``{"123": {"model": "gpt-4o-mini"}}``). Settings: model, persona, language, reply, timezone, voice, busy,
    quiet."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            value = json.loads(text)
        else:
            parsed: dict[str, dict[str, str]] = {}
            for item in (part.strip() for part in text.split(",")):
                if not item:
                    continue
                channel, sep, rest = item.partition(":")
                if not sep or not channel.strip():
                    raise ValueError(
                        f"{variable} must be id:setting=value pairs separated by commas, for example "
                        f"123:model=gpt-4o-mini;language=fr; got {item!r}"
                    )
                pins = parsed.setdefault(channel.strip(), {})
                for pin in rest.split(";"):
                    name, _, pinned = pin.partition("=")
                    pins[name.strip().lower()] = pinned.strip()
            value = parsed
    if not isinstance(value, dict):
        raise ValueError(f"{variable} must map channel ids to settings; got {value!r}")
    known = {s.value for s in ChatSetting}
    result: dict[str, dict[str, str]] = {}
    for channel, pins in value.items():
        if not isinstance(pins, dict):
            raise ValueError(f"{variable}: the settings of {channel} must be setting=value pairs; got {pins!r}")
        for name in pins:
            if name not in known:
                raise ValueError(f"{variable}: {name!r} is not a setting; use {', '.join(sorted(known))}")
        result[str(channel).strip()] = {str(k): "" if v is None else str(v) for k, v in pins.items()}
    return result
