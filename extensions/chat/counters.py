"""What a chat adapter tells the operator's metrics, written once for both adapters: messages received,
messages ignored (and why), and requests the platform answered with 429.

Extensions never import ``bots``: they report through ``agent.observe`` with the kinds ``bots.metrics``
counts (``message_received``, ``message_ignored:<reason>``, ``rate_limited``, ``reply_uncertain:<outcome>``),
and the process that runs the agent (``bots run``, ``bots gateway``) turns them into Prometheus counters. An
agent without observers counts nothing; a ``ChatMetrics`` not bound to an agent yet drops what it is told.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core import Host
    from core.definitions import Context

__all__ = ("ChatMetrics", "Ignored")


class Ignored(enum.StrEnum):
    """Why a message got no answer: the ``reason`` label of ``bots_messages_ignored_total``."""

    OWN = "own"
    """The bot's own message (Discord shows the bot what it posted)."""
    BOT = "bot"
    """Written by another bot or a webhook, and bots are not answered."""
    BOT_HOPS = "bot_hops"
    """Bots are answered, but this bot-to-bot exchange reached its hop limit."""
    BOT_CAP = "bot_cap"
    """An allowed bot's message over the answers to bots a chat gets per window (``TRUST_BOT_REPLIES``)."""
    POLICY = "policy"
    """Not addressed to the bot under the reply policy (no mention in a group, DMs turned off, a command
    for another bot, no sender)."""
    ALLOWLIST = "allowlist"
    """The chat, server, channel or user is not in an allowlist."""
    DUPLICATE = "duplicate"
    """The platform delivered the same message again."""
    EMPTY = "empty"
    """Nothing to read: no text, caption or attachment."""
    BUSY = "busy"
    """The conversation's inbox was full; the user was asked to send it again."""
    STOPPING = "stopping"
    """It arrived while the bot was shutting down."""


class ChatMetrics:
    """One adapter's reports: ``bind(agent)`` at start, then ``received``, ``ignored`` and ``rate_limited``."""

    def __init__(self, platform: str) -> None:
        self.platform = platform
        """The platform label (``discord``, ``telegram``)."""
        self._agent: Host | None = None

    def bind(self, agent: Host) -> None:
        """Report to ``agent``'s observers from now on."""
        self._agent = agent

    def received(self, context: Context, args: Any) -> None:
        """A message reached the bot in the conversation ``args`` names (counted whether answered or not)."""
        if self._agent is not None:
            self._agent.observe("message_received", self._agent.context_id(context, args))

    def ignored(self, context: Context, args: Any, reason: Ignored) -> None:
        """A message that reached the bot gets no answer, for ``reason``."""
        if self._agent is not None:
            self._agent.observe(f"message_ignored:{reason.value}", self._agent.context_id(context, args))

    def uncertain_reply(self, outcome: str) -> None:
        """A retried batch found a post an earlier attempt sent and never heard back about, and resolved it
        (``resend`` or ``skip``)."""
        if self._agent is not None:
            self._agent.observe(f"reply_uncertain:{outcome}", self.platform)

    def rate_limited(self) -> None:
        """The platform answered a request with 429 Too Many Requests (the client waits and retries)."""
        if self._agent is not None:
            self._agent.observe("rate_limited", self.platform)
