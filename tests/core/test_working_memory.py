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
