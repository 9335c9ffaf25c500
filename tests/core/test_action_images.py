"""Pictures an action shows with its result (``ActionContext.show_image``)."""

from __future__ import annotations

from typing import Any

import pytest

from core import ActionContext, ActionResult, ScriptedModel, action, context, create_agent, output

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64
chat = context(type="chat", schema=str, key=lambda s: s)
say = output(type="say")
CALL = '<response><action_call name="shot">{}</action_call></response>'
DONE = '<response><output type="say">done</output></response>'


@pytest.mark.parametrize(
    ("vision", "mime", "data", "note"),
    [
        (True, "image/png", PNG, None),
        (False, "image/png", PNG, "not shown: this model reads text only"),
        (True, "image/svg+xml", b"<svg/>", "not shown: image/svg+xml is not an image type the model reads"),
        (True, "image/png", PNG * 200_000, "not shown: larger than"),
    ],
)
async def test_a_picture_goes_with_the_result_or_a_note_says_why_not(
    vision: bool, mime: str, data: bytes, note: str | None
) -> None:
    def shot(args: Any, ctx: ActionContext, agent: Any) -> str:
        ctx.show_image(data, mime=mime, name="screen")
        return "a screenshot"

    model = ScriptedModel([CALL, DONE], vision=vision)
    agent = create_agent(model=model, contexts=[chat], outputs=[say], actions=[action(name="shot", handler=shot)])
    async with agent:
        chain = await agent.run(chat, "a", [agent.make_input({"type": "msg", "data": "go"})])
    [result] = [e for e in chain if isinstance(e, ActionResult)]
    [attachment] = result.attachments
    assert (attachment.name, attachment.mime, attachment.note is None) == ("screen", mime, note is None)
    prompt = model.requests[1].prompt
    if note is None:
        [image] = model.requests[1].images
        assert image.data == data and image.marker in prompt
    else:
        assert model.requests[1].images == () and note in prompt
    assert "a screenshot" in prompt
