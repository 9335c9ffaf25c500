"""Approvals in Discord (``core.approvals``): the request posted with two buttons (Approve / Deny), a press (a
component interaction) answered, and the decision shown in place of the buttons.

The request goes to the conversation's channel (or thread), or to ``ACTIONS_APPROVAL_CHATS``' Discord channel;
the call's name and arguments are shown as inline code (Markdown and mentions inert; no mention is allowed
anyway). The presser's tier is computed like a message author's, from what the interaction carries (the member's
permissions in the channel, their roles): admins and owners decide, anyone else gets an ephemeral refusal.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from core.approvals import Approval, Pressed
from core.errors import PlatformError

from ..chat.approvals import (
    ChatApprovals,
    button_data,
    button_labels,
    parse_button,
    press_answer,
    request_text,
    settled_text,
)
from ._lib import discord
from .platform_errors import platform_error

if TYPE_CHECKING:
    from core.trust import Tier

    from ..chat.trust import TrustRules

__all__ = ("DiscordApprovals", "presser_tier")

log = logging.getLogger("extensions.discord")


def presser_tier(interaction: discord.Interaction, rules: TrustRules) -> Tier:
    """The tier of whoever pressed (``TRUST_*``): in a server, one of ``TRUST_ADMIN_PERMISSIONS`` in the channel
    (as the interaction says) or one of ``TRUST_ADMIN_ROLES`` makes an admin."""
    user = interaction.user
    roles: list[str] = []
    admin = False
    joined: float | None = None
    if isinstance(user, discord.Member):
        if user.joined_at is not None:
            joined = (discord.utils.utcnow() - user.joined_at).total_seconds() / 86400
        for role in user.roles:
            roles += (str(role.id), role.name)
        if rules.chat_admins and interaction.guild_id is not None:
            permissions = interaction.permissions
            admin = any(getattr(permissions, name, False) is True for name in rules.admin_permissions)
    return rules.tier("discord", user.id, is_bot=user.bot, admin=admin, roles=roles, joined_days=joined)


def _buttons(approval_id: str, language: str | None) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    approve, deny = button_labels(language)
    approve_id = button_data(approval_id, approve=True)
    deny_id = button_data(approval_id, approve=False)
    view.add_item(discord.ui.Button(style=discord.ButtonStyle.success, label=approve, custom_id=approve_id))
    view.add_item(discord.ui.Button(style=discord.ButtonStyle.danger, label=deny, custom_id=deny_id))
    return view


class DiscordApprovals(ChatApprovals):
    """The Discord side of the agent's approvals (``core.approvals.Asker``) and its presses."""

    platform = "discord"

    def __init__(
        self,
        *,
        client: Callable[[], discord.Client | None],
        rules: Callable[[], TrustRules],
        timeout: float,
        language: Callable[[Approval], Awaitable[str | None]] | None = None,
    ) -> None:
        super().__init__(rules=rules, timeout=timeout, language=language)
        self.client = client

    def _client(self) -> discord.Client:
        client = self.client()
        if client is None:
            raise PlatformError("the Discord client is not started: call await agent.start() first")
        return client

    # -- core.approvals.Asker -------------------------------------------------------------------------

    async def ask(self, approval: Approval, *, target: str | None) -> str | None:
        channel_id = _channel_of(approval, target)
        language = await self.language_of(approval)
        view = _buttons(approval.id, language)
        try:
            async with asyncio.timeout(self.timeout):
                channel = self._client().get_partial_messageable(channel_id)
                sent = await channel.send(request_text(approval, language, escape=True), view=view)
        except discord.HTTPException as exc:
            raise platform_error(exc, "post an approval request") from exc
        finally:
            view.stop()  # the presses go to on_component, whichever process receives them
        return f"{channel_id}:{sent.id}"

    async def settle(self, approval: Approval) -> None:
        if approval.prompt is None:
            return
        channel, _, message = approval.prompt.rpartition(":")
        text = settled_text(approval, await self.language_of(approval), escape=True)
        try:
            async with asyncio.timeout(self.timeout):
                partial = self._client().get_partial_messageable(int(channel)).get_partial_message(int(message))
                await partial.edit(content=text, view=None)
        except (discord.HTTPException, ValueError, TimeoutError) as exc:
            log.warning("could not show the decision on approval %s: %s", approval.id, exc)

    # -- a press ----------------------------------------------------------------------------------------

    async def on_component(self, interaction: discord.Interaction) -> None:
        """A button was pressed: an approval's is decided (if the presser may) and answered; others are left
        to whoever posted them."""
        data: Any = interaction.data or {}
        parsed = parse_button(str(data.get("custom_id", "")))
        desk = self.desk()
        if parsed is None or desk is None:
            return
        approval_id, approve = parsed
        user = interaction.user
        tier = presser_tier(interaction, self.rules())
        target = desk.admin_chats.get(self.platform)
        message = interaction.message
        pressed, approval = await desk.press(
            approval_id,
            approve=approve,
            by=f"discord:{user.id}",
            name=user.display_name,
            tier=tier,
            asked_here=lambda found: (
                message is not None and _posted_at(found, target, interaction.channel_id, message.id)
            ),
        )
        language = await self.language_of(approval)
        try:
            async with asyncio.timeout(self.timeout):
                if pressed is Pressed.DECIDED and approval is not None:
                    text = settled_text(approval, language, escape=True)
                    await interaction.response.edit_message(content=text, view=None)
                else:
                    answer = press_answer(pressed, approval, language)
                    await interaction.response.send_message(answer, ephemeral=True)
        except (discord.HTTPException, TimeoutError) as exc:
            log.warning("could not answer a press on approval %s: %s", approval_id, exc)


def _channel_of(approval: Approval, target: str | None) -> int:
    """The channel (or thread) the request of ``approval`` goes to."""
    args: dict[str, Any] = approval.args if isinstance(approval.args, dict) else {}
    return int(target) if target else int(args["channel_id"])


def _posted_at(approval: Approval, target: str | None, channel_id: int | None, message_id: int) -> bool:
    """True when ``approval``'s request was posted as the message ``message_id`` of ``channel_id`` (or, while where
    it was posted is not noted yet, goes to that channel): the tier of a presser is computed where they pressed."""
    if approval.platform != "discord":
        return False
    if approval.prompt is not None:
        return approval.prompt == f"{channel_id}:{message_id}"
    try:
        return _channel_of(approval, target) == channel_id
    except (KeyError, TypeError, ValueError):
        return False
