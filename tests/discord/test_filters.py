"""Who gets an answer: the filter on plain facts, every rule and its order."""

from __future__ import annotations

from typing import Any

import pytest

from extensions.discord import DiscordSettings
from extensions.discord.filters import BotHops, MessageFacts, Verdict, decide

GUILD, CHANNEL, THREAD, OTHER = 10, 20, 21, 30
ALICE, BOTTY = 1, 2


def facts(**overrides: Any) -> MessageFacts:
    values: dict[str, Any] = {
        "author_id": ALICE,
        "author_is_bot": False,
        "own": False,
        "channel_id": CHANNEL,
        "guild_id": GUILD,
    }
    values.update(overrides)
    return MessageFacts(**values)


def verdict(f: MessageFacts, hops: BotHops | None = None, **settings: Any) -> Verdict:
    return decide(f, DiscordSettings(**settings), hops or BotHops())


def test_dms_are_always_answered() -> None:
    assert verdict(facts(guild_id=None, channel_id=99)) is Verdict.ANSWER
    assert verdict(facts(guild_id=None, channel_id=99), reply_policy="off") is Verdict.ANSWER
    assert verdict(facts(guild_id=None, channel_id=99), allow_dms=False) is Verdict.DMS_OFF


@pytest.mark.parametrize(
    ("policy", "mentioned", "replied", "expected"),
    [
        ("mention", False, False, Verdict.POLICY),
        ("mention", True, False, Verdict.ANSWER),
        ("mention", False, True, Verdict.ANSWER),
        ("always", False, False, Verdict.ANSWER),
        ("off", True, True, Verdict.POLICY),
    ],
)
def test_reply_policy(policy: str, mentioned: bool, replied: bool, expected: Verdict) -> None:
    assert verdict(facts(mentioned=mentioned, replied_to_bot=replied), reply_policy=policy) is expected


def test_channel_override_and_thread_inherits_parent() -> None:
    settings: dict[str, Any] = {"reply_policy": "off", "channel_policies": {CHANNEL: "always"}}
    assert verdict(facts(), **settings) is Verdict.ANSWER
    assert verdict(facts(channel_id=THREAD, parent_id=CHANNEL), **settings) is Verdict.ANSWER
    assert verdict(facts(channel_id=OTHER), **settings) is Verdict.POLICY
    own_override = {**settings, "channel_policies": {CHANNEL: "always", THREAD: "off"}}
    assert verdict(facts(channel_id=THREAD, parent_id=CHANNEL, mentioned=True), **own_override) is Verdict.POLICY


def test_own_messages_are_never_answered() -> None:
    assert verdict(facts(own=True, author_is_bot=True), reply_policy="always", allow_bots=True) is Verdict.OWN


def test_allowlists() -> None:
    m = facts(mentioned=True)
    assert verdict(m, allowed_guilds=[GUILD + 1]) is Verdict.GUILD_NOT_ALLOWED
    assert verdict(m, allowed_guilds=[GUILD]) is Verdict.ANSWER
    assert verdict(m, allowed_channels=[OTHER]) is Verdict.CHANNEL_NOT_ALLOWED
    assert verdict(facts(channel_id=THREAD, parent_id=CHANNEL, mentioned=True), allowed_channels=[CHANNEL]) is (
        Verdict.ANSWER
    )
    assert verdict(m, allowed_users=[ALICE + 1]) is Verdict.USER_NOT_ALLOWED
    assert verdict(facts(guild_id=None, author_id=ALICE + 1), allowed_users=[ALICE]) is Verdict.USER_NOT_ALLOWED
    assert verdict(facts(guild_id=None), allowed_channels=[OTHER], allowed_guilds=[GUILD + 1]) is Verdict.ANSWER


def test_bots_need_allow_bots_and_stop_at_the_hop_limit() -> None:
    bot = facts(author_id=BOTTY, author_is_bot=True, mentioned=True)
    assert verdict(bot) is Verdict.BOT
    hops = BotHops()
    results = [verdict(bot, hops, allow_bots=True, bot_hop_limit=2) for _ in range(3)]
    assert results == [Verdict.ANSWER, Verdict.ANSWER, Verdict.BOT_HOPS]
    assert verdict(
        facts(channel_id=OTHER, author_id=BOTTY, author_is_bot=True, mentioned=True), hops, allow_bots=True
    ) is (
        Verdict.ANSWER  # the count is per channel
    )
    verdict(facts(), hops, allow_bots=True)  # a person writes in the channel (not answered: no mention)
    assert verdict(bot, hops, allow_bots=True, bot_hop_limit=2) is Verdict.ANSWER


def test_bot_hops_stay_bounded() -> None:
    hops = BotHops(size=3)
    for channel in range(10):
        hops.bot(channel)
    assert [hops.count(c) for c in range(10)] == [0] * 7 + [1] * 3
