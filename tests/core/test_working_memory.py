"""Working memory keeps the settled entries' JSON form and prompt text: what it saves, what it reports unprocessed
and what the prompt shows are those of its entries as they are, however the list was changed."""

from __future__ import annotations

from typing import Any

from core import InputRef, OutputRef, WorkingMemory
from core.entries import Log
from core.media.attachment import Attachment, AttachmentKind
from core.prompt import format_log, window


def _fresh(memory: WorkingMemory) -> list[dict[str, Any]]:
    return [entry.model_dump(mode="json") for entry in memory.logs]


def _naive_unprocessed(memory: WorkingMemory) -> list[Log]:
    return [entry for entry in memory.logs if not entry.processed]


def _check(memory: WorkingMemory) -> None:
    assert memory.dump() == _fresh(memory)
    assert memory.unprocessed() == _naive_unprocessed(memory)


def test_dump_and_unprocessed_follow_pushes_trims_and_reloads() -> None:
    memory = WorkingMemory(limit=5)
    for i in range(4):
        memory.push(InputRef(type="m", data=f"in {i}", processed=i != 2))
    _check(memory)
    memory.logs[2].processed = True  # the model was shown it after the save
    memory.push(OutputRef(type="m", content="out"))
    _check(memory)
    for i in range(4):
        memory.push(InputRef(type="m", data=f"more {i}", processed=True))
        memory.trim()
        _check(memory)
    reloaded = WorkingMemory.load(memory.dump(), limit=5)
    _check(reloaded)
    reloaded.push(InputRef(type="m", data="new"))
    _check(reloaded)


def test_a_list_changed_at_its_front_or_replaced_is_read_again() -> None:
    memory = WorkingMemory(limit=50)
    for i in range(5):
        memory.push(InputRef(type="m", data=f"in {i}", processed=True))
    _check(memory)
    memory.logs.insert(0, InputRef(type="m", data="first", processed=False))
    _check(memory)
    _check(memory)
    del memory.logs[:2]
    _check(memory)
    memory.logs = [InputRef(type="m", data="other", processed=False)]
    _check(memory)
    memory.logs.clear()
    _check(memory)


def test_the_prompt_text_is_kept_only_for_settled_entries_without_attachments() -> None:
    memory = WorkingMemory()
    reply = OutputRef(type="m", content="Hel", processed=True)
    picture = InputRef(
        type="m",
        data="look",
        processed=True,
        attachments=[Attachment(kind=AttachmentKind.IMAGE, source="telegram", ref="p1")],
    )
    memory.push(reply)
    memory.push(picture)

    def shown() -> str:
        return "\n".join(window(memory, count=10, token_budget=10_000))

    assert ">Hel</output>" in shown()
    reply.content = "Hello"  # an entry of the run still changes: shown as it is now
    assert ">Hello</output>" in shown()
    assert memory.prompt_texts() == {}
    memory.dump()  # saved: settled from now on
    first = shown()
    assert shown() == first
    assert list(memory.prompt_texts()) == [reply.id]  # what an attachment shows depends on the run's media
    assert memory.prompt_texts()[reply.id] == format_log(reply)


def test_the_oldest_entries_leave_a_quarter_of_the_limit_at_a_time() -> None:
    memory = WorkingMemory(limit=8)  # (a step of 2)
    pushed: list[Log] = []
    firsts = []
    for i in range(30):
        entry = InputRef(type="m", data=f"in {i}", processed=True)
        pushed.append(entry)
        memory.push(entry)
        memory.trim()
        assert 8 - 2 < len(memory.logs) <= 8 or len(pushed) <= 8
        assert memory.logs == pushed[-len(memory.logs) :]  # the newest, in order
        firsts.append(memory.logs[0].id)
        _check(memory)
    assert len(set(firsts)) == 1 + (30 - 8 + 1) // 2  # the first entry moves every other push once past the limit


def test_the_window_starts_at_a_multiple_of_a_quarter_of_its_size() -> None:
    memory = WorkingMemory(limit=200)
    texts: list[str] = []
    for n in range(1, 40):
        entry = InputRef(type="m", data=f"entry {n:02d}", processed=True)
        memory.push(entry)
        texts.append(format_log(entry))
        start = max(0, -(-(n - 8) // 2) * 2)  # the first multiple of 2 that leaves at most 8
        assert window(memory, count=8, token_budget=10_000) == texts[start:], n
    memory.push(InputRef(type="m", data="new", processed=False))  # an update at an aligned position: skipped
    assert window(memory, count=8, token_budget=10_000) == texts[32:]
    budget = len("".join(texts[-5:])) // 4  # room for the newest four and a bit: the window starts at a multiple
    assert window(memory, count=8, token_budget=budget) == texts[36:]  # of 2 that fits, three entries


def test_an_entry_alone_past_the_budget_is_still_shown() -> None:
    memory = WorkingMemory()
    for n in range(3):
        memory.push(InputRef(type="m", data="x" * 400 + str(n), processed=True))
    assert window(memory, count=8, token_budget=10) == [format_log(memory.logs[-1])]
