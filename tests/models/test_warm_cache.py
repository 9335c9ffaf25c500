"""The embedded model's warm cache (``core.models.slot_cache``): a start restores the slots an earlier start warmed,
instead of evaluating their prompts again (issue 47, start-up), and anything wrong with a file costs only that.

The real SmolLM2-135M through xllamacpp, its cache in ``tmp_path``; each "start" is a new ``LocalModel`` (a new
llama.cpp server), as a new process would make. What llama.cpp reports of the first answer's prompt (tokens taken
from the cache, tokens evaluated) says whether the warm state was there.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.models import LocalModel, ModelRequest, local
from core.models.base import ToolSpec
from core.models.slot_cache import FOLDER, Identity, SlotCache
from core.models.tool_routing import ROUTE_TASK

from .support import collect, smollm2_path

SYSTEM = "You are Pip, a cheerful assistant of a small bakery. " + "Answer in one short sentence, kindly. " * 12


def request(text: str) -> ModelRequest:
    return ModelRequest(
        system=SYSTEM,
        prompt="",
        plain=True,
        turns=(("user", text),),
        max_tokens=4,
        metadata={"context_id": "chat:1"},
    )


def start(cache: Path) -> LocalModel:
    path = smollm2_path()
    assert path is not None
    return LocalModel(model_path=path, weights_dir=cache, context_size=1024, temperature=0.0, seed=1, threads=2)


def slot_files(cache: Path) -> list[Path]:
    return sorted((cache / FOLDER).glob("*.slot"))


async def warmed(cache: Path, caplog: pytest.LogCaptureFixture) -> tuple[LocalModel, str]:
    """A new model warmed with the first message's request: it and the log line saying how it was warmed."""
    caplog.clear()
    model = start(cache)
    await model.warm(request("Hello!"))
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("warmed up in")]
    return model, line


async def test_a_second_start_restores_the_warm_slots_instead_of_evaluating_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="core.models")
    first, said = await warmed(tmp_path, caplog)
    try:
        assert "0 of 1 prompts restored" in said
        cached, evaluated = first.last_prompt_tokens or (0, 0)
        assert evaluated > 100, "the first start evaluates the system prompt"
    finally:
        first.close()
    [kept] = slot_files(tmp_path)
    assert kept.name.endswith(f"-{hashlib.sha256(kept.read_bytes()).hexdigest()}.slot")

    second, said = await warmed(tmp_path, caplog)
    try:
        assert "1 of 1 prompts restored" in said
        assert (await collect(second, request("Do you sell bread?"))).strip()
        cached, new = second.last_prompt_tokens or (0, 0)
        assert cached > 100 and new < 30, f"the system prompt came from the cache ({cached} cached, {new} evaluated)"
    finally:
        second.close()
    assert slot_files(tmp_path) == [kept], "nothing saved again"


async def test_a_damaged_cache_file_is_evaluated_and_replaced(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="core.models")
    first, _ = await warmed(tmp_path, caplog)
    first.close()
    [kept] = slot_files(tmp_path)
    data = bytearray(kept.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte of the saved KV cache: llama.cpp itself would restore it
    kept.write_bytes(bytes(data))

    again, said = await warmed(tmp_path, caplog)
    try:
        assert "0 of 1 prompts restored" in said
        assert any("damaged" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
        assert (await collect(again, request("Do you sell bread?"))).strip()
    finally:
        again.close()
    [made] = slot_files(tmp_path)
    assert made.name.endswith(f"-{hashlib.sha256(made.read_bytes()).hexdigest()}.slot"), "a whole file again"


async def test_a_file_llama_cpp_refuses_is_evaluated_and_removed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file whose bytes match its name but that is no slot of this model (written by something else): llama.cpp
    refuses it, the prompt is evaluated and the file replaced, and the model answers."""
    caplog.set_level(logging.INFO, logger="core.models")
    first, _ = await warmed(tmp_path, caplog)
    first.close()
    [kept] = slot_files(tmp_path)
    key = kept.name.split("-")[0]
    kept.unlink()
    foreign = b"ggsq" + os.urandom(4096)
    (tmp_path / FOLDER / f"{key}-{hashlib.sha256(foreign).hexdigest()}.slot").write_bytes(foreign)

    again, said = await warmed(tmp_path, caplog)
    try:
        assert "0 of 1 prompts restored" in said
        assert any("refused" in r.getMessage() for r in caplog.records)
        assert (await collect(again, request("Do you sell bread?"))).strip()
    finally:
        again.close()
    [made] = slot_files(tmp_path)
    assert made.read_bytes() != foreign and made.name.startswith(key)


async def test_a_read_only_weights_folder_keeps_the_cache_in_the_user_s_cache_folder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Docker image's weights folder is not the bot's to write: the warm cache goes to the user's cache folder."""
    caplog.set_level(logging.INFO, logger="core.models")
    blocked = tmp_path / "weights"
    blocked.write_text("a file where the folder would be")
    monkeypatch.setattr("core.models.local.user_cache_dir", lambda: tmp_path / "user-cache")
    model, said = await warmed(blocked, caplog)
    model.close()
    assert "0 of 1 prompts restored" in said
    assert len(slot_files(tmp_path / "user-cache")) == 1
    again, said = await warmed(blocked, caplog)
    again.close()
    assert "1 of 1 prompts restored" in said


async def test_a_cache_that_cannot_be_written_is_said_once_and_the_model_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No folder to write in at all: one line says so, the prompts are evaluated as without the cache."""
    caplog.set_level(logging.INFO, logger="core.models")
    blocked = tmp_path / "weights"
    blocked.write_text("a file where the folder would be")
    monkeypatch.setattr("core.models.local.user_cache_dir", lambda: blocked / "cache")
    model, said = await warmed(blocked, caplog)
    try:
        assert "0 of 1 prompts restored" in said
        assert (await collect(model, request("Do you sell bread?"))).strip()
    finally:
        model.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "LLM_WEIGHTS_DIR" in warnings[0], warnings


async def test_without_the_cache_nothing_is_written(tmp_path: Path) -> None:
    model = start(tmp_path)
    model.warm_cache = False
    try:
        await model.warm(request("Hello!"))
    finally:
        model.close()
    assert not (tmp_path / FOLDER).exists()


async def test_a_bot_s_first_start_evaluates_only_its_own_part_of_the_decision_s_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decision's prompt for a bot's own tools starts with worked examples every such bot shares (some 2,400
    tokens): kept once in the warm cache, a later bot's first start restores them and evaluates only its own part.
    (Here with the first three of them: the same path, an eighth of the tokens.)"""
    monkeypatch.setattr(local, "ROUTE_DEMOS", local.ROUTE_DEMOS[:3])

    async def first_start(tools: tuple[ToolSpec, ...]) -> list[tuple[int, int]]:
        """How many tokens of each decision prompt warming took from the slot and evaluated: (cached, new)."""
        path = smollm2_path()
        assert path is not None
        model = LocalModel(model_path=path, weights_dir=tmp_path, context_size=4096, temperature=0.0, seed=1)
        model.calls_tools = True  # (SmolLM2's template has no tool calls; the decision's prompt is a plain chat)
        seen: list[tuple[int, int]] = []
        evaluate = model._collect

        async def spy(server: object, body: dict[str, Any]) -> str:
            text = await evaluate(server, body)
            if body["messages"][0]["content"] == ROUTE_TASK:
                seen.append(model.last_prompt_tokens or (0, 0))
            return text

        monkeypatch.setattr(model, "_collect", spy)
        try:
            await model.warm(replace(request("Add milk to my list, please."), tools=tools))
        finally:
            model.close()
        return seen

    todo = (ToolSpec(name="add_todo", description="Add an item to the todo list."),)
    units = (ToolSpec(name="convert", description="Convert an amount between two units."),)
    shared, own = await first_start(todo)  # the worked examples with a probe, then its own prompt after them
    assert shared[1] > 150 and own[0] >= shared[1] - 50 and own[1] < shared[1] / 2, (shared, own)
    [other] = await first_start(units)  # the worked examples restored: its own part only
    assert other[0] >= shared[1] - 50 and other[1] < shared[1] / 2, (shared, other)


IDENTITY = Identity(
    model="sha256:abc",
    llama="1",
    context_size=512,
    slots=2,
    batch=2048,
    ubatch=512,
    cache_types="1/1/-1",
    chat_template="",
)


def test_the_key_holds_the_body_and_the_setup_not_the_slot(tmp_path: Path) -> None:
    cache = SlotCache(tmp_path, IDENTITY)
    body = {"messages": [{"role": "user", "content": "Hi"}], "id_slot": 3, "max_tokens": 1}
    assert cache.key(body) == cache.key({**body, "id_slot": 0})
    assert cache.key(body) != cache.key({**body, "messages": [{"role": "user", "content": "Hi!"}]})
    other = SlotCache(tmp_path, Identity(**{**IDENTITY.__dict__, "context_size": 1024}))
    assert other.key(body) != cache.key(body)


def test_a_file_is_kept_whole_under_its_hash_and_fetched_by_a_link(tmp_path: Path) -> None:
    cache = SlotCache(tmp_path / "cache", IDENTITY)
    own = tmp_path / "own"
    own.mkdir()
    (own / "saved.bin").write_bytes(b"state" * 100)
    assert cache.keep("k1", own / "saved.bin")
    [kept] = (tmp_path / "cache").iterdir()
    assert kept.name == f"k1-{hashlib.sha256(b'state' * 100).hexdigest()}.slot"
    assert cache.fetch("k1", own / "restore.bin") == kept
    assert (own / "restore.bin").read_bytes() == b"state" * 100
    assert cache.fetch("k2", own / "other.bin") is None and not (own / "other.bin").exists()


def test_a_half_written_file_is_never_fetched_and_a_leftover_one_is_removed(tmp_path: Path) -> None:
    """Another process's file being written has a temporary name until it is whole; one left by a process that died
    while writing it is removed after a while."""
    folder = tmp_path / "cache"
    folder.mkdir()
    cache = SlotCache(folder, IDENTITY)
    writing = folder / f"partial-k1-{os.getpid()}-1.tmp"
    writing.write_bytes(b"sta")
    assert cache.fetch("k1", tmp_path / "into.bin") is None
    cache.prune()
    assert writing.exists(), "(still being written)"
    os.utime(writing, (1, 1))
    cache.prune()
    assert not writing.exists()


def test_the_folder_keeps_the_most_recently_used_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("core.models.slot_cache.KEEP", 3)
    cache = SlotCache(tmp_path / "cache", IDENTITY)
    source = tmp_path / "saved.bin"
    for number in range(5):
        source.write_bytes(f"state {number}".encode())
        assert cache.keep(f"k{number}", source)
        for age, path in enumerate(sorted((tmp_path / "cache").iterdir(), key=lambda p: p.name)):
            os.utime(path, (1000 + age, 1000 + age))  # (older first, k0 the oldest)
    assert cache.fetch("k2", tmp_path / "used.bin") is not None  # used now: the newest
    source.write_bytes(b"state 5")
    cache.keep("k5", source)
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "cache").iterdir()) == ["k2", "k4", "k5"]


async def test_two_starts_at_once_evaluate_each_prompt_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Two processes starting the same bot at once (a gateway's workers): the second waits for the first's
    evaluation of the prompt and restores it, rather than evaluating it beside it on the same cores."""
    caplog.set_level(logging.INFO, logger="core.models")
    one, two = start(tmp_path), start(tmp_path)
    try:
        await asyncio.gather(one.warm(request("Hello!")), two.warm(request("Hello!")))
    finally:
        one.close()
        two.close()
    said = sorted(
        r.getMessage().split(":")[1].split(" from ")[0] for r in caplog.records if "prompts restored" in r.getMessage()
    )
    assert said == [" 0 of 1 prompts restored", " 1 of 1 prompts restored"]
    assert len(slot_files(tmp_path)) == 1


def test_a_claimed_key_waits_for_its_holder_and_then_says_so(tmp_path: Path) -> None:
    cache = SlotCache(tmp_path, IDENTITY)
    first = cache.claim("k")
    assert not first.waited
    threading.Timer(0.3, first.release).start()
    second = cache.claim("k", wait=30)  # (held until the first lets it go: then restore, not evaluate)
    assert second.waited
    given_up = cache.claim("k", wait=0.2)  # (still held: given up after the wait, evaluated here too)
    assert given_up.waited
    given_up.release()
    second.release()
    third = cache.claim("k", wait=0.2)
    assert not third.waited
    third.release()
