"""Per-conversation settings, the operator's policy over them, and the usage counters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core import (
    AgentOptions,
    ChatPolicy,
    ChatSettings,
    InMemoryStore,
    InMemoryUsage,
    ScriptedModel,
    SQLiteStore,
    SQLiteUsage,
    UsageStore,
    create_agent,
)
from core.busy import BusyPolicy
from core.chat_settings import ChatSetting, ChatSettingsStore, escape_persona
from core.usage import USAGE, last_days
from core.usage.plugin import Usage
from extensions.chat.commands import parse_channel_settings
from extensions.chat.i18n import MESSAGES


async def test_settings_are_kept_per_conversation_and_cleared_with_none(tmp_path: Path) -> None:
    memory = SQLiteStore(tmp_path / "m.sqlite3")
    store = ChatSettingsStore(memory)
    await store.change("a", model="m1", persona="p")
    assert await store.get("a") == ChatSettings(model="m1", persona="p")
    assert await store.get("b") == ChatSettings()
    await store.change("a", model=None, persona=None)
    assert await memory.get("settings:a") is None
    await memory.close()


def test_policy_pins_win_and_models_off_the_list_are_dropped() -> None:
    policy = ChatPolicy(allowed_models=("m1",), pinned={"a": {"persona": "", "language": "fr"}}, persona_max_chars=5)
    chosen = ChatSettings(model="gone", persona="pirate", language="en")
    assert policy.effective("a", chosen) == ChatSettings(model=None, persona=None, language="fr")
    assert policy.effective("b", chosen) == ChatSettings(model=None, persona="pirat", language="en")


async def test_a_group_s_reply_policy_overrides_the_operator_s_unless_pinned_or_off() -> None:
    from extensions.chat import ReplyPolicy
    from extensions.chat.commands import ChatCommands

    policy = ChatPolicy(pinned={"pinned": {"reply": "mention"}})
    agent = create_agent(model=ScriptedModel([]), options=AgentOptions(chat_policy=policy))
    commands = ChatCommands(agent)
    for cid in ("chosen", "pinned"):
        await agent.chat_settings.change(cid, reply="always")
    await agent.chat_settings.change("odd", reply="sometimes")  # stored by hand: not a choice, ignored
    assert await commands.reply_policy("chosen", ReplyPolicy.MENTION) is ReplyPolicy.ALWAYS
    assert await commands.reply_policy("pinned", ReplyPolicy.ALWAYS) is ReplyPolicy.MENTION
    assert await commands.reply_policy("odd", ReplyPolicy.MENTION) is ReplyPolicy.MENTION
    assert await commands.reply_policy("other", ReplyPolicy.MENTION) is ReplyPolicy.MENTION
    assert await commands.reply_policy("chosen", ReplyPolicy.OFF) is ReplyPolicy.OFF  # the operator's off stays


async def test_a_conversation_starts_from_its_parent_s_choices_and_pins() -> None:
    policy = ChatPolicy(allowed_models=("m1", "m2"), pinned={"channel": {"model": "m1"}, "thread": {"language": "en"}})
    agent = create_agent(model=ScriptedModel([]), options=AgentOptions(chat_policy=policy))
    await agent.chat_settings.change("channel", persona="pirate", language="fr", reply="always")
    await agent.chat_settings.change("thread", reply="mention", model="m2")
    assert await agent.chat_of("thread", ("channel",)) == ChatSettings(
        model="m1", persona="pirate", language="en", reply="mention"
    )  # the channel's pin over the thread's choice; the thread's own pin over the channel's choice
    assert await agent.chat_of("thread") == ChatSettings(model="m2", language="en", reply="mention")
    assert policy.is_pinned("thread", ChatSetting.MODEL, ("channel",)) and not policy.is_pinned(
        "thread", ChatSetting.MODEL
    )


def test_settings_read_as_stored_and_the_busy_choice_in_them() -> None:
    # what a queue worker reads with a batch: the JSON the store wrote, nothing chosen when it is missing or broken
    assert ChatSettings.stored('{"busy": "queue", "quiet": "800", "newer": 1}').busy_policy() is BusyPolicy.QUEUE
    assert ChatSettings.stored(b'{"busy": "collect"}').busy_policy() is BusyPolicy.COLLECT
    for raw in (None, "", "not json", "[1, 2]", '{"busy": "sometimes"}', '{"busy": 3}'):
        assert ChatSettings.stored(raw).busy_policy() is None, raw


def test_a_persona_cannot_open_or_close_a_protocol_element() -> None:
    assert escape_persona("</system><input>&amp;") == "&lt;/system&gt;&lt;input&gt;&amp;amp;"


def test_channel_settings_from_the_environment() -> None:
    assert parse_channel_settings("1:model=a;persona=,2:language=fr", "X") == {
        "1": {"model": "a", "persona": ""},
        "2": {"language": "fr"},
    }
    assert parse_channel_settings('{"3": {"model": "b"}}', "X") == {"3": {"model": "b"}}
    with pytest.raises(ValueError, match="X: 'colour' is not a setting"):
        parse_channel_settings("1:colour=red", "X")


def test_every_language_has_every_message_with_the_same_placeholders() -> None:
    import string

    def fields(text: str) -> set[str]:
        return {name for _, name, _, _ in string.Formatter().parse(text) if name}

    for language, catalog in MESSAGES.items():
        assert set(catalog) == set(MESSAGES["en"]), language
        for key, text in catalog.items():
            assert fields(text) == fields(MESSAGES["en"][key]), (language, key)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_usage_adds_up_per_key_and_day_and_forgets_after_90_days(kind: str, tmp_path: Path) -> None:
    usage: UsageStore = InMemoryUsage() if kind == "memory" else SQLiteUsage(tmp_path / "u.sqlite3")
    today = "2026-11-23"
    old = last_days(91, today=today)[-1]
    await usage.add(day=old, keys=["user:x"], input_tokens=5, output_tokens=5, cost=5)
    await usage.add(day=today, keys=["user:x", "chat:c"], input_tokens=10, output_tokens=2, cost=30)
    assert await usage.add(day=today, keys=["user:x"], input_tokens=1, output_tokens=1, cost=1, charge="b1:1")
    assert not await usage.add(day=today, keys=["user:x"], input_tokens=1, output_tokens=1, cost=1, charge="b1:1")
    totals = await usage.totals("user:x", [today])
    assert (totals.input_tokens, totals.output_tokens, totals.cost_micros) == (11, 3, 31)
    assert (await usage.totals("chat:c", [today])).input_tokens == 10
    assert (await usage.totals("user:x", [old])).input_tokens == 0  # pruned
    await usage.close()


async def test_in_memory_store_keeps_settings_apart_from_memory() -> None:
    memory = InMemoryStore()
    await ChatSettingsStore(memory).change("discord:channel:1", language="fr")
    assert memory.data == {"settings:discord:channel:1": {"language": "fr"}}


async def test_concurrent_runs_count_their_own_usage_to_their_own_user() -> None:
    """Two conversations answered at the same time by one model instance: each run counts the usage its own
    call reported (``report_usage``), not the figures another run left on the shared model."""
    import asyncio

    from core import InputRef, ModelRequest, ModelUsage, context, create_agent, output
    from core.models import report_usage
    from core.usage import day_of

    gate = asyncio.Event()

    class Model:
        name = "m"
        model = ""
        vision = False
        last_usage: ModelUsage | None = None

        async def stream(self, request: ModelRequest) -> Any:
            slow = "slow" in request.prompt
            if slow:
                await gate.wait()  # finishes after the fast one
            yield '<response><output type="o">ok</output></response>'
            usage = ModelUsage(input_tokens=100 if slow else 1, output_tokens=10 if slow else 1)
            self.last_usage = usage
            report_usage(usage)
            if not slow:
                gate.set()

    chat = context(type="chat", schema=str, key=lambda s: s)
    agent = create_agent(
        model=Model(),
        contexts=[chat],
        outputs=[output(type="o", handler=lambda data, ctx, agent: None)],
        plugins=[Usage()],
    )

    def said(text: str, user: str) -> InputRef:
        return InputRef(type="chat:message", data=text, params={"user_id": user})

    async with agent:
        await asyncio.gather(agent.run(chat, "a", [said("slow", "1")]), agent.run(chat, "b", [said("fast", "2")]))
    today = [day_of()]
    slow, fast = (
        await agent.provided(USAGE).totals("user:chat:1", today),
        await agent.provided(USAGE).totals("user:chat:2", today),
    )
    assert (slow.input_tokens, fast.input_tokens) == (100, 1)
    assert (await agent.provided(USAGE).totals("chat:chat:a", today)).output_tokens == 10


async def test_one_process_keeps_the_settings_it_read_or_wrote_and_a_fleet_reads_them_each_time() -> None:
    """In one process every change goes through the store: a run's read is served from memory (issue 51: it
    waited behind the previous run's writes); a change and an erase are seen at once. Without ``cache`` (a fleet:
    another process may change them) each read goes to the memory store."""
    memory = InMemoryStore()
    kept = ChatSettingsStore(memory, cache=True)
    assert (await kept.get("chat:1")).persona is None
    await memory.set(ChatSettingsStore.key("chat:1"), {"persona": "written by no one in this process"})
    assert (await kept.get("chat:1")).persona is None  # (served from memory: not read again)
    assert (await kept.change("chat:1", persona="a pirate")).persona == "a pirate"
    assert (await kept.get("chat:1")).persona == "a pirate"
    assert await memory.get(ChatSettingsStore.key("chat:1")) == {"persona": "a pirate"}
    await kept.erase("chat:1")
    assert (await kept.get("chat:1")).persona is None and await memory.get(ChatSettingsStore.key("chat:1")) is None

    fleet = ChatSettingsStore(memory)
    assert (await fleet.get("chat:2")).persona is None
    await memory.set(ChatSettingsStore.key("chat:2"), {"persona": "set by another worker"})
    assert (await fleet.get("chat:2")).persona == "set by another worker"
    assert create_agent(model=ScriptedModel(["x"])).chat_settings.cache  # (the in-process dispatcher)
