"""``TRUST_*`` and ``ACTIONS_*``: who may make the bot act, and the bots it answers (issue 26, ``core.trust``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode

from core.trust import ActionsPolicy
from extensions.platforms import all_platforms

from .schedules import address_of_channel
from .setting_values import comma_separated

__all__ = ("ActionsSettings", "TrustSettings")


def _names(*, bot_ids: bool = False) -> set[str]:
    """The registered platforms' names (``extensions.platforms``); ``bot_ids``: those whose bots may be named."""
    return {p.name for p in all_platforms() if p.bot_ids or not bot_ids}


class TrustSettings(BaseModel):
    """``TRUST_*``: the tier of a message's author, computed from the platform's facts, and other bots."""

    @field_validator("admin_roles", "admin_permissions", "member_users", "member_roles", "bots", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return comma_separated(value)

    @field_validator("bots", mode="after")
    @classmethod
    def _bots(cls, value: frozenset[str]) -> frozenset[str]:
        for bot in value:
            platform, _, who = bot.partition(":")
            named = who == "*" or who.isdigit() or (who.startswith("@") and len(who) > 1)  # (otherbot: never matches)
            if bot != "*" and (platform.lower() not in _names(bot_ids=True) or not named):
                raise ValueError(
                    f"TRUST_BOTS: {bot[:40]!r} names no bot; write telegram:@name, telegram:123, discord:123, "
                    "discord:@name, telegram:* or discord:* (every bot there), or *"
                )
        return frozenset(b.lower() for b in value)  # (names are compared lowercased; ids are digits)

    @field_validator("member_users", mode="after")
    @classmethod
    def _members(cls, value: frozenset[str]) -> frozenset[str]:
        for user in value:
            platform, _, uid = user.partition(":")
            if platform not in _names() or not uid:
                raise ValueError(
                    f"TRUST_MEMBER_USERS: {user[:40]!r} is not a platform-qualified user id; write telegram:123 or "
                    "discord:456"
                )
        return value

    chat_admins: bool = Field(
        default=True,
        description="A Telegram group's administrators and Discord members with TRUST_ADMIN_PERMISSIONS are admins "
        "(false: only TRUST_ADMIN_ROLES and BOT_ADMIN_USERS)",
    )
    admin_permissions: Annotated[frozenset[str], NoDecode] = Field(
        default=frozenset({"manage_guild"}),
        description="Discord permissions that make a member an admin, comma-separated discord.py names "
        "(manage_guild, manage_channels, manage_messages, administrator)",
    )
    admin_roles: Annotated[frozenset[str], NoDecode] = Field(
        default_factory=frozenset, description="Discord role names or ids whose members are admins, comma-separated"
    )
    member_users: Annotated[frozenset[str], NoDecode] = Field(
        default_factory=frozenset,
        description="Platform-qualified user ids (telegram:123, discord:456) who are members; when this or "
        "TRUST_MEMBER_ROLES is set, everyone else is a guest",
    )
    member_roles: Annotated[frozenset[str], NoDecode] = Field(
        default_factory=frozenset,
        description="Discord role names or ids whose members are members (a verified role); when set, people "
        "without one are guests",
    )
    guest_days: float = Field(
        default=0.0,
        ge=0,
        le=3650,
        description="Discord members who joined the server less than this many days ago are guests (0: nobody; "
        "Telegram does not say when someone joined)",
    )
    cache_seconds: float = Field(
        default=60.0, ge=0, le=3600, description="Seconds what Telegram said about a group's administrators is kept"
    )
    bots: Annotated[frozenset[str], NoDecode] = Field(
        default_factory=frozenset,
        description="Other bots the bot answers, comma-separated: telegram:@name, telegram:123, discord:123, "
        "discord:@name, or * for every bot (empty: bots are ignored)",
    )
    bot_replies: int = Field(
        default=5,
        ge=1,
        le=1000,
        description="Answers to other bots in one chat per TRUST_BOT_WINDOW at most; more are ignored and counted "
        '(bots_messages_ignored_total{reason="bot_cap"}), which stops two bots answering each other',
    )
    bot_window: float = Field(default=600.0, gt=0, le=86400, description="The window of TRUST_BOT_REPLIES, seconds")


class ActionsSettings(BaseModel):
    """``ACTIONS_*``: which tier may call which action or MCP tool, and which calls wait for an approval."""

    policy: str = Field(
        default="",
        description="Minimum tier (owner, admin, member, guest, summoned, bot, off) and rule (allow, approve) per "
        "action: compact mcp:*=admin,remember=guest,mcp:tickets:open=member/approve, a JSON object, or the path of "
        "a file holding either; defaults: actions open to members, MCP tools (mcp:<server>:<tool>) to admins",
    )
    approval_timeout: float = Field(
        default=3600.0,
        gt=0,
        le=7 * 86400,
        description="Seconds a call waiting for an approval (rule approve) waits for an admin's press; then it "
        "expires, is not run, and the model is told",
    )
    approval_chats: Annotated[frozenset[str], NoDecode] = Field(
        default=frozenset(),
        description="Where approval requests go, one chat per platform: telegram:<chat id>[:<topic id>], "
        "discord:<channel id> (comma-separated); default: the conversation where the call was asked for",
    )

    @field_validator("approval_chats", mode="before")
    @classmethod
    def _chats(cls, value: Any) -> Any:
        return comma_separated(value)

    @field_validator("approval_chats", mode="after")
    @classmethod
    def _one_per_platform(cls, value: frozenset[str]) -> frozenset[str]:
        platforms = [chat.partition(":")[0] for chat in value]
        for chat in value:
            try:
                address_of_channel(chat)  # the forms BOT_SCHEDULES' channels are written in
            except ValueError as exc:
                raise ValueError(f"ACTIONS_APPROVAL_CHATS: {exc}") from None
        if len(set(platforms)) != len(platforms):
            raise ValueError("ACTIONS_APPROVAL_CHATS: name one chat per platform")
        return value

    def admin_chats(self) -> dict[str, str]:
        """``ACTIONS_APPROVAL_CHATS`` by platform: ``{"telegram": "-100123:5"}``."""
        return dict(chat.partition(":")[::2] for chat in self.approval_chats)

    def parsed(self) -> ActionsPolicy:
        """The policy (read from the file when ``policy`` names one); ``ValueError`` saying what to fix."""
        text = self.policy.strip()
        where = "ACTIONS_POLICY"
        if text and not text.startswith("{") and "=" not in text:
            path = Path(text).expanduser()
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:  # (not UTF-8 text: a ValueError without the variable)
                raise ValueError(f"ACTIONS_POLICY names the file {str(path)!r}, which cannot be read: {exc}") from None
            where = f"ACTIONS_POLICY (the file {str(path)!r})"
        try:
            return ActionsPolicy.parse(text)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
