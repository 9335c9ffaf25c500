"""What both chat adapters do alike with an approval (``core.approvals``): the request under the buttons, the
decision in their place and the answer to a press, in the conversation's language (``extensions.chat.i18n``); the
buttons' data and labels; joining the agent's desk (``ChatApprovals``). The platform packages post and edit."""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, ClassVar

from core.approvals import Approval, ApprovalDesk, ApprovalStatus, Pressed, desk_of, shorten, valid_id

from .i18n import say

if TYPE_CHECKING:
    from core import Host

    from .trust import TrustRules

__all__ = (
    "PREFIX",
    "ChatApprovals",
    "button_data",
    "button_labels",
    "parse_button",
    "press_answer",
    "request_text",
    "settled_text",
)

PREFIX = "appr:"
"""The buttons' data start with this: ``appr:<id>:y`` (approve) or ``appr:<id>:n`` (deny)."""

ARGUMENT_CHARS = 300
"""Characters of the call's arguments shown to the approvers at most."""


def button_data(approval_id: str, *, approve: bool) -> str:
    """The data of the Approve (``approve``) or Deny button (within Telegram's 64 bytes)."""
    return f"{PREFIX}{approval_id}:{'y' if approve else 'n'}"


def parse_button(data: str) -> tuple[str, bool] | None:
    """``(approval id, approve)`` of a button's data, or None when it is not an approval button."""
    if not data.startswith(PREFIX):
        return None
    approval_id, _, choice = data.removeprefix(PREFIX).rpartition(":")
    if not valid_id(approval_id) or choice not in ("y", "n"):
        return None
    return approval_id, choice == "y"


def request_text(approval: Approval, language: str | None = None, *, escape: bool = False) -> str:
    """The request the approvers read, in ``language`` (plain text; ``escape``: for Markdown, as Discord shows
    it). The arguments are the model's, written from a user's words: shortened, on one line, and quoted as code."""
    arguments = shorten(approval.arguments or "{}", ARGUMENT_CHARS).replace("`", "'")
    who = approval.user or say("approval.someone", language)
    if approval.asker:
        asker = approval.asker.replace("`", "'")
        who = f"`{asker}` ({who})" if escape else f"{asker} ({who})"
    minutes = max(1, round((approval.expires_at - approval.created_at) / 60))
    name = approval.action.replace("`", "'")
    key = "approval.request_markdown" if escape else "approval.request"
    return say(key, language, who=who, name=name, arguments=arguments, minutes=minutes)


def settled_text(approval: Approval, language: str | None = None, *, escape: bool = False) -> str:
    """The request (``request_text``) with what became of it, shown in place of the buttons."""
    request = request_text(approval, language, escape=escape)
    who = shorten(approval.decider or approval.decided_by or say("approval.an_admin", language), 60)
    if escape and (approval.decider or approval.decided_by):  # a display name: Markdown in it stays inert
        who = "`{}`".format(who.replace("`", "'"))
    if approval.status is ApprovalStatus.EXPIRED:
        return f"{request}\n{say('approval.expired', language)}"
    if approval.status is ApprovalStatus.WITHDRAWN:
        return f"{request}\n{say('approval.withdrawn', language)}"
    if approval.status is ApprovalStatus.DENIED:
        return f"{request}\n{say('approval.denied', language, who=who)}"
    return f"{request}\n{say('approval.approved', language, who=who)}"


def press_answer(pressed: Pressed, approval: Approval | None, language: str | None = None) -> str:
    """What the presser is told (a Telegram alert, a Discord ephemeral message), in ``language``."""
    if pressed is Pressed.NOT_ALLOWED:
        return say("approval.not_allowed", language)
    if pressed is Pressed.UNKNOWN or approval is None:
        return say("approval.unknown", language)
    if pressed is Pressed.DECIDED:
        key = "approval.runs_now" if approval.status is ApprovalStatus.APPROVED else "approval.will_not_run"
        return say(key, language)
    status = approval.status if approval.status is not ApprovalStatus.DONE else "settled"
    return say("approval.already", language, status=say(f"approval.status.{status}", language))


def button_labels(language: str | None = None) -> tuple[str, str]:
    """The labels of the Approve and Deny buttons, in ``language``."""
    return say("approval.approve", language), say("approval.deny", language)


class ChatApprovals(abc.ABC):
    """What the Telegram and the Discord side of the agent's approvals share: joining its desk as the asker of
    their platform, the desk a press goes to, and the language of an approval's texts (its conversation's, as
    the adapter reads it; English when it cannot be read)."""

    platform: ClassVar[str]
    """The platform whose conversations these approvals ask for (``telegram``)."""

    def __init__(
        self,
        *,
        rules: Callable[[], TrustRules],
        timeout: float,
        language: Callable[[Approval], Awaitable[str | None]] | None = None,
    ) -> None:
        self.rules = rules
        """The tiers' rules (``TRUST_*``), as the adapter has them."""
        self.timeout = timeout
        """Seconds a platform request may take."""
        self.language = language
        """The language of the conversation of an approval (``ChatAdapter.language``); None: English."""
        self._agent: Host | None = None
        self._undo: Callable[[], None] | None = None

    def attach(self, agent: Host) -> None:
        """Ask the approvers of this platform's conversations through this bot, when the agent has approvals."""
        desk = desk_of(agent)
        self._agent = agent
        if desk is not None and self._undo is None:
            self._undo = desk.add_asker(self.platform, self)

    def detach(self) -> None:
        undo, self._undo = self._undo, None
        if undo is not None:
            undo()

    @abc.abstractmethod
    async def ask(self, approval: Approval, *, target: str | None) -> str | None:
        """Post the request (``core.approvals.Asker``)."""

    @abc.abstractmethod
    async def settle(self, approval: Approval) -> None:
        """Show what became of it where it was posted (``core.approvals.Asker``)."""

    def desk(self) -> ApprovalDesk | None:
        """The agent's desk, once attached to an agent that has one."""
        return desk_of(self._agent) if self._agent is not None else None

    async def language_of(self, approval: Approval | None) -> str | None:
        """The language of ``approval``'s texts (None: English)."""
        if approval is None or self.language is None:
            return None
        try:
            return await self.language(approval)
        except ValueError:  # args that no longer read as the context's (pydantic's ValidationError)
            return None
