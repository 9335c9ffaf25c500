"""The bot's commands in Matrix, and who may use them: ``/help``, ``/reset``, ``/forget``, and the settings commands
and ``/stop`` of ``extensions.chat.commands``. A command is written ``/name`` or ``!name`` (clients such as Element
keep ``/`` for their own commands: ``!`` needs no escape there), with the bot's name before it in a group
(``bot: /stop``) or not.

Who administers a room: its moderators (power level 50 or more), the other person of a private room, and
``BOT_ADMIN_USERS`` everywhere. A command's answer is a notice (``m.notice``) quoting the command.
"""

from __future__ import annotations

import logging
import re

from core.errors import PlatformError

from ..chat.adapter import ChatAdapter
from ..chat.commands import COMMANDS, Caller, ChatCommands
from ..chat.i18n import say
from .definitions import Facts, matrix_room
from .posting import Poster

__all__ = ("HELP", "OWN_COMMANDS", "PERSONAL_ELSEWHERE", "RESET_REFUSED", "Commands", "command_of")

log = logging.getLogger("extensions.matrix")

OWN_COMMANDS = ("help", "start", "reset", "forget")
"""The commands served here; the rest are ``extensions.chat.commands.COMMANDS``."""
HELP = (
    "Hi! Write to me in a room of our own, or mention me in a group room; each thread is its own conversation.\n"
    "!help shows this text\n!stop stops the answer I am writing\n!reset makes me forget this conversation\n"
    "!forget erases it and its whole history\n!settings shows its settings (!model, !persona, !language, !reply, "
    "!timezone)\n!reminders lists its reminders\n!stats shows your usage\n(/name works too where your client lets "
    "it through.)"
)
"""The answer to ``!help``."""
RESET_REFUSED = "Only a moderator of this room can make me forget this conversation."
"""The answer to ``!reset`` or ``!forget`` by a member of a group room who is not one of its moderators."""
PERSONAL_ELSEWHERE = "I show what I keep about you only in a room of our own: write !memory to me there."
"""The answer to ``!memory`` in a group room."""
_COMMAND = re.compile(r"^\s*(?:[^\s:]{1,64}:\s+)?[/!]([a-z]{2,20})(?:@\S+)?(?:\s+(.*))?$", re.IGNORECASE | re.DOTALL)


def command_of(text: str) -> tuple[str, str | None] | None:
    """``(name, argument)`` when ``text`` is one of the bot's commands (``/stop``, ``!model gpt``, ``bot: !stop``),
    else None."""
    found = _COMMAND.match(text)
    if found is None:
        return None
    name = found.group(1).lower()
    if name not in OWN_COMMANDS and name not in COMMANDS:
        return None
    arg = found.group(2)
    return name, arg.strip() if arg is not None else None


class Commands:
    """Answers the commands of one bot account."""

    def __init__(self, adapter: ChatAdapter, poster: Poster) -> None:
        self.adapter = adapter
        self.poster = poster

    async def say(self, facts: Facts, key: str, **values: object) -> None:
        """Post the notice ``key`` (``extensions.chat.i18n``) in the conversation's language, quoting the message
        of ``facts`` (best effort: a failure is only logged)."""
        language = await self.adapter.language(matrix_room, facts.args)
        await self.notice(facts, say(key, language, **values))

    async def notice(self, facts: Facts, text: str) -> None:
        """Post ``text`` as a notice quoting the message of ``facts`` (best effort)."""
        try:
            await self.poster.post_all(facts.args, text, reply_to=facts.event_id, notice=True)
        except PlatformError as exc:
            log.warning("could not answer in room %s: %s", facts.args.room_id, exc)

    def caller(self, facts: Facts) -> Caller:
        """Who runs a command: a moderator of the room, or the other person of a private room, manages it."""
        return Caller(user=f"matrix:{facts.sender}", manages_chat=facts.private or facts.admin)

    async def serve(self, facts: Facts, name: str, arg: str | None) -> None:
        """Answer the command ``name`` (with ``arg``) of the message of ``facts``."""
        agent = self.adapter.agent
        assert agent is not None
        if name in ("help", "start"):
            await self.notice(facts, HELP)
            return
        if name in ("reset", "forget"):
            if name in self.adapter.disabled_commands():
                await self.say(facts, "disabled", command=name)
                return
            caller = self.caller(facts)
            if not (caller.manages_chat or agent.is_admin(caller.user)):
                log.info("room %s: !%s by %s refused (not a moderator)", facts.args.room_id, name, facts.sender)
                await self.notice(facts, RESET_REFUSED)
                return
            if name == "forget":
                await agent.forget(matrix_room, facts.args)
                await self.say(facts, "forget_done")
            else:
                await agent.reset(matrix_room, facts.args)
                await self.say(facts, "reset_done")
            return
        commands, cid = ChatCommands.of(agent, matrix_room, facts.args)
        answer = await commands.run(name, cid, self.caller(facts), arg)
        text = answer.text
        if answer.personal and not facts.private:  # (what the bot keeps about a person is not the room's to read)
            text = PERSONAL_ELSEWHERE
        elif answer.choices:
            text += "\n" + "\n".join(f"!{value.replace(':', ' ', 1)} ({label})" for label, value in answer.choices)
        await self.notice(facts, text)
