"""In the terminal a picture the bot makes is saved as a file whose path the model is told."""

from __future__ import annotations

import json
from pathlib import Path

from core import InMemoryStore, ScriptedModel, create_agent
from core.media.pictures import Pictures
from extensions.terminal import chat, cli_extension

PNG = b"\x89PNG\r\n\x1a\n" + b"pixels"


class _Maker:
    async def make(self, prompt: str) -> tuple[bytes, str]:
        return PNG, "image/png"


async def test_a_picture_is_saved_in_the_media_folder(tmp_path: Path) -> None:
    call = json.dumps({"prompt": "a cat"})
    model = ScriptedModel(
        [
            f'<response><action_call name="make_picture">{call}</action_call></response>',
            '<response><output type="cli:message">Saved it.</output></response>',
        ]
    )
    agent = create_agent(
        model=model,
        extensions=[cli_extension(media_dir=tmp_path)],
        memory=InMemoryStore(),
        plugins=[Pictures(_Maker())],
    )
    lines = ["draw a cat"]
    written: list[str] = []

    async def read_line() -> str | None:
        return lines.pop(0) if lines else None

    async with agent:
        await chat(agent, read_line=read_line, write=written.append)
    [saved] = list(tmp_path.iterdir())  # noqa: ASYNC240 (a test, after the agent stopped)
    assert saved.read_bytes() == PNG and saved.name.startswith("picture-") and saved.suffix == ".png"
    assert str(saved) in model.requests[1].prompt
    assert "bot> Saved it." in "".join(written)
