"""The Slack side of the agent's approvals (``core.approvals.Asker``): the request posted in the conversation (or
the operator's approval channel) with Approve and Deny buttons (Block Kit), the decision shown in their place, and
the presses (``block_actions``), decided by the desk by the presser's tier (``BOT_ADMIN_USERS``, ``TRUST_*``)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from core.approvals import Approval, Pressed
from core.errors import PlatformError

from ..chat.approvals import ChatApprovals, button_data, button_labels, parse_button, press_answer, request_text
from ..chat.approvals import settled_text as settled
from .definitions import ConversationArgs

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient

    from ..chat.trust import TrustRules

__all__ = ("SlackApprovals",)

log = logging.getLogger("extensions.slack")


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "plain_text", "text": text[:2900], "emoji": True}}


def _buttons(approval_id: str, language: str | None) -> dict[str, Any]:
    approve, deny = button_labels(language)
    return {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "style": "primary",
                "text": {"type": "plain_text", "text": approve, "emoji": True},
                "action_id": button_data(approval_id, approve=True),
            },
            {
                "type": "button",
                "style": "danger",
                "text": {"type": "plain_text", "text": deny, "emoji": True},
                "action_id": button_data(approval_id, approve=False),
            },
        ],
    }


class _WebAPI(Protocol):
    """What the approvals use of the Slack runtime (``SlackRuntime``): its client, and its bounded calls."""

    def require_client(self) -> AsyncWebClient: ...

    async def call(self, method: Callable[..., Any], /, **params: Any) -> Any: ...


class SlackApprovals(ChatApprovals):
    """Approval requests with buttons in Slack, and the presses on them."""

    platform = "slack"

    def __init__(
        self,
        runtime: _WebAPI,
        *,
        rules: Callable[[], TrustRules],
        timeout: float,
        language: Callable[[Approval], Awaitable[str | None]] | None = None,
    ) -> None:
        super().__init__(rules=rules, timeout=timeout, language=language)
        self.runtime = runtime

    async def ask(self, approval: Approval, *, target: str | None) -> str | None:
        where = _conversation(approval, target)
        language = await self.language_of(approval)
        text = request_text(approval, language)
        client = self.runtime.require_client()
        response = await self.runtime.call(
            client.chat_postMessage,
            channel=where.channel,
            thread_ts=where.thread_ts,
            text=text,
            blocks=[_section(text), _buttons(approval.id, language)],
        )
        return f"{where.channel}:{response.get('ts', '')}"

    async def settle(self, approval: Approval) -> None:
        if approval.prompt is None:
            return
        channel, _, ts = approval.prompt.partition(":")
        text = settled(approval, await self.language_of(approval))
        try:
            client = self.runtime.require_client()
            await self.runtime.call(client.chat_update, channel=channel, ts=ts, text=text, blocks=[_section(text)])
        except PlatformError as exc:
            log.warning("could not show the decision on approval %s: %s", approval.id, exc)

    async def on_action(self, ack: Callable[..., Awaitable[Any]], body: dict[str, Any]) -> None:
        """A button was pressed: an approval's is decided (if the presser may), and the presser told."""
        await ack()
        actions = body.get("actions") or [{}]
        parsed = parse_button(str(actions[0].get("action_id", "")))
        desk = self.desk()
        if parsed is None or desk is None:
            return
        approval_id, approve = parsed
        user = str((body.get("user") or {}).get("id", ""))
        channel = str((body.get("channel") or {}).get("id", ""))
        message_ts = str((body.get("message") or {}).get("ts", "") or (body.get("container") or {}).get("message_ts"))
        pressed, approval = await desk.press(
            approval_id,
            approve=approve,
            by=f"slack:{user}",
            name=str((body.get("user") or {}).get("name") or user),
            tier=self.rules().tier("slack", user),
            asked_here=lambda found: found.platform == "slack" and found.prompt == f"{channel}:{message_ts}",
        )
        if pressed is Pressed.DECIDED and approval is not None:
            await self.settle(approval)  # (the buttons give way to the decision)
            return
        language = await self.language_of(approval)
        try:
            client = self.runtime.require_client()
            await self.runtime.call(
                client.chat_postEphemeral, channel=channel, user=user, text=press_answer(pressed, approval, language)
            )
        except PlatformError as exc:
            log.warning("could not answer a press on approval %s: %s", approval_id, exc)


def _conversation(approval: Approval, target: str | None) -> ConversationArgs:
    """Where the request of ``approval`` goes: the operator's approval channel (``slack:<channel>[/<ts>]``), or
    the conversation that asked."""
    if target:
        channel, _, thread = target.partition("/")
        return ConversationArgs(channel=channel, thread_ts=thread or None)
    return ConversationArgs.model_validate(approval.args)
