"""What a run keeps for itself is kept by slot in ``ContextState.values`` (issue 52): the attachments it fetched are
``core.media.attachment.LOADED``'s, a platform's message to reply to its ``REPLY_TO``'s, not fields of the state."""

from __future__ import annotations

import dataclasses

from core import InMemoryStore, InputRef, ScriptedModel, context, create_agent
from core.definitions import ContextState
from core.media import Attachment, AttachmentKind, MediaReader
from core.media.attachment import LOADED, loaded_of
from core.media.plugin import Media
from core.slots import RunValues, Slot


def test_values_are_kept_by_slot() -> None:
    values = RunValues()
    number: Slot[int] = Slot("number")
    assert values.get(number) is None
    values.put(number, 3)
    assert values.get(number) == 3 and values.setdefault(number, lambda: 4) == 3
    made = values.setdefault(LOADED, dict)
    assert loaded_of(values) is made and values.get(LOADED) is made


def test_the_state_has_no_feature_field() -> None:
    """Neither the attachments a run fetched nor a string-keyed bag of per-run values: both are kept in ``values``."""
    assert not {"media", "options"} & {f.name for f in dataclasses.fields(ContextState)}


async def test_a_run_keeps_what_it_fetched_under_loaded() -> None:
    class Files:
        async def __call__(self, attachment: Attachment) -> bytes:
            return b"hello from the file"

    seen: list[ContextState] = []
    chat = context(type="chat", schema=str, key=lambda s: s, on_run=lambda state, host: seen.append(state))
    reader = MediaReader()
    reader.fetchers["test"] = Files()
    agent = create_agent(
        model=ScriptedModel(lambda request: "<response></response>"),
        contexts=[chat],
        memory=InMemoryStore(),
        plugins=[Media(reader)],
    )
    note = Attachment(kind=AttachmentKind.FILE, name="note.txt", mime="text/plain", size=19, source="test", ref="n")
    async with agent:
        await agent.run(chat, "c1", [InputRef(type="chat", data="read this", attachments=[note])])
    [state] = seen
    [loaded] = loaded_of(state.values).values()
    assert loaded.attachment.id == note.id and loaded.text == "hello from the file"
