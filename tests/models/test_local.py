"""The embedded SmolLM2-135M through xllamacpp: one real answer through the grammar and the step loop.

The model is loaded once per session (``local_model`` in conftest) and answers greedily; token budgets are
small so this runs in CI on two cores.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from core import AgentOptions, InMemoryStore, context, create_agent, output
from core.errors import ModelError
from core.media.plugin import Media
from core.models import LocalModel, ModelRequest
from core.parser import TagEnd, TagStart, Text, parse

from .support import Recording, smollm2_path


async def test_one_real_answer_is_a_complete_response_with_an_output(local_model: LocalModel) -> None:
    model = Recording(local_model)
    sent: list[str] = []
    chat = context(type="chat", schema=str, key=lambda s: s, max_steps=1)
    say = output(type="chat:message", description="Reply to the user", handler=lambda data, c, a: sent.append(data))
    agent = create_agent(
        model=model, contexts=[chat], outputs=[say], memory=InMemoryStore(), options=AgentOptions(max_tokens=96)
    )
    await agent.start()
    try:
        await agent.send(chat, "ann", {"type": "chat:message", "data": "Hello! What is the capital of France?"})
    finally:
        await agent.stop()

    (text,) = model.texts
    assert text.startswith("<response>") and text.endswith("</response>"), text
    events = parse(text)
    assert not [e for e in events if isinstance(e, Text) and e.text.strip()], text
    ends = [e for e in events if isinstance(e, TagEnd)]
    assert all(e.complete for e in ends), text
    assert ends[0].name == "reasoning" and ends[-1].name == "response"
    outputs = [e for e in ends if e.name == "output"]
    assert outputs and all(e.attrs == {"type": "chat:message"} and e.content.strip() for e in outputs), text
    assert sent == [e.content.strip() for e in outputs]
    usage = local_model.last_usage
    assert usage is not None and 0 < usage.output_tokens <= 96 and usage.input_tokens > 100


async def test_the_grammar_with_actions_is_accepted_by_llama_cpp(local_model: LocalModel) -> None:
    request = ModelRequest(
        system="Answer in XML.",
        prompt="Hi",
        max_tokens=6,
        output_types=("chat:message", "chat:reaction"),
        action_names=("remember", "recall", "current_time"),
    )
    text = "".join([c async for c in local_model.stream(request)])
    assert text.startswith("<response>")
    assert isinstance(parse(text)[0], TagStart)


async def test_closing_the_stream_stops_the_generation(local_model: LocalModel) -> None:
    request = ModelRequest(system="", prompt="Tell me a long story.", max_tokens=64, output_types=("chat:message",))
    stream = local_model.stream(request)
    first = await anext(stream)
    assert first
    await asyncio.wait_for(stream.aclose(), timeout=60)  # returns once llama.cpp has stopped
    # the slot is free again: a new answer starts at once
    again = local_model.stream(ModelRequest(system="", prompt="Hi", max_tokens=4, output_types=("chat:message",)))
    assert await anext(again)
    await again.aclose()


async def test_a_broken_gguf_file_is_a_model_error(tmp_path: Path) -> None:
    path = smollm2_path()
    assert path is not None
    broken = tmp_path / "broken.gguf"
    with path.open("rb") as f:
        broken.write_bytes(f.read(100_000))  # a valid header, then nothing
    model = LocalModel(model_path=broken, threads=1)
    with pytest.raises(ModelError, match="LLM_MODEL_PATH"):
        await model.load()
    assert not model.loaded


async def test_a_prompt_longer_than_the_context_names_llm_context_size(local_model: LocalModel) -> None:
    request = ModelRequest(system="", prompt="word " * 3000, max_tokens=8, output_types=("chat:message",))
    with pytest.raises(ModelError, match="LLM_CONTEXT_SIZE"):
        async for _ in local_model.stream(request):
            pass


async def test_the_embedded_model_answers_a_photo_from_its_stand_in_text(local_model: LocalModel) -> None:
    from core.entries import InputRef
    from core.media import Attachment, AttachmentKind

    requests: list[ModelRequest] = []

    class Seen:
        name = local_model.name
        model = ""
        last_usage = None
        vision = local_model.vision

        def stream(self, request: ModelRequest) -> Any:
            requests.append(request)
            return local_model.stream(request)

    sent: list[str] = []
    chat = context(type="chat", schema=str, key=lambda s: s, max_steps=1)
    say = output(type="chat:message", handler=lambda data, c, a: sent.append(data))
    agent = create_agent(
        model=Seen(),
        contexts=[chat],
        outputs=[say],
        memory=InMemoryStore(),
        plugins=[Media()],  # the attachments are read (the bot's media plugin): the model is told it cannot see
        options=AgentOptions(max_tokens=64, compact_prompt=True),
    )
    photo = Attachment(kind=AttachmentKind.IMAGE, name="photo.jpg", mime="image/jpeg", size=83_000, source="x", ref="1")
    await agent.run(chat, "ann", [InputRef(type="chat:message", data="look!", attachments=[photo])])
    [request] = requests
    assert request.images == ()
    assert '[image "photo.jpg" (image/jpeg, 83 KB) (an image came, but this model cannot see images)]' in request.prompt
    assert sent and sent[0].strip()


async def test_two_conversations_are_generated_side_by_side() -> None:
    """Issue 55: llama.cpp's parallel sequences serve two conversations at once, each in its own slot: the second
    one's first words come while the first is still being written (one after the other, they would come after its
    last). Both are written to the end (``ignore_eos``), so the order says it, not the time."""
    path = smollm2_path()
    assert path is not None
    model = LocalModel(model_path=path, context_size=512, temperature=0.0, seed=3, slots=2, threads=1)
    try:
        await model.load()
        events: list[str] = []

        def body(context: str, text: str) -> dict[str, Any]:
            request = ModelRequest(system="", prompt=text, plain=True, max_tokens=96, metadata={"context_id": context})
            return {**model._body(request, slot=model._take_slot(context)), "ignore_eos": True}

        async def write(name: str, first_words: asyncio.Event | None, text: str) -> str:
            written = ""
            async for chunk in model._generate(model._server, body(name, text)):
                if not written and first_words is not None:
                    first_words.set()
                written += chunk
                events.append(name)
            events.append(f"{name} done")
            return written

        started = asyncio.Event()
        first = asyncio.create_task(write("a", started, "Count from one to fifty."))
        await asyncio.wait_for(started.wait(), timeout=300)
        second = await write("b", None, "Name some fruits.")
        assert (await first).strip() and second.strip()
        assert events.index("b") < events.index("a done"), "the second conversation waited for the first to end"
        assert model._slot_of == {"a": 0, "b": 1}
    finally:
        model.close()
