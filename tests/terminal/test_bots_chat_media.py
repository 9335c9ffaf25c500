"""``bots chat`` with pictures and spoken replies (issue 41), built as ``bots.app.build_agent`` builds it from the
settings: what the bot makes is saved under ``BOT_DATA_DIR``/media, the user's alone; an images or speech server
that refuses the key (401) or fails (500) gives a message naming the setting to check, and never the key."""

from __future__ import annotations

import json
import logging
import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bots.app import build_agent
from bots.settings import Settings
from core import ScriptedModel
from extensions.terminal import chat, cli_session
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-terminal-media-secret-4242"


def picture_call(prompt: str) -> str:
    return f'<response><action_call name="make_picture">{json.dumps({"prompt": prompt})}</action_call></response>'


def said(text: str) -> str:
    return f'<response><output type="cli:message">{text}</output></response>'


@pytest.fixture
async def openai() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(api_key=KEY) as server:
        yield server


def settings_for(tmp_path: Path, openai: FakeOpenAIServer, *, key: str = KEY) -> Settings:
    return Settings(  # type: ignore[call-arg]
        _env_file=None,
        bot={"data_dir": tmp_path / "data"},
        llm={"provider": "scripted"},
        images={"base_url": openai.url, "api_key": key},
        tts={"base_url": openai.url, "api_key": key},
    )


async def talk(
    settings: Settings, model: ScriptedModel, lines: list[str], *, before: Callable[[int], None] = lambda n: None
) -> str:
    """``bots chat``: the lines typed, one by one (``before(n)`` runs before the n-th); what the terminal shows."""
    agent = build_agent(settings, platforms=["cli"], model=model)
    written: list[str] = []
    typed = list(lines)
    count = 0

    async def read_line() -> str | None:
        nonlocal count
        if not typed:
            return None
        before(count)
        count += 1
        return typed.pop(0)

    async with agent:
        await agent.chat_settings.change(agent.context_id(cli_session, "default"), voice="on")  # (/voice on)
        await chat(agent, read_line=read_line, write=written.append)
    return "".join(written)


async def test_bots_chat_saves_pictures_and_spoken_replies_under_the_data_folder(
    tmp_path: Path, openai: FakeOpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = settings_for(tmp_path, openai)
    model = ScriptedModel([picture_call("a cat on a mat"), said("There is your cat.")])
    shown = await talk(settings, model, ["draw a cat"])
    folder = tmp_path / "data" / "media"
    saved = {p.name.split("-")[0]: p for p in folder.iterdir()}
    assert set(saved) == {"picture", "voice"}
    assert saved["picture"].read_bytes() == openai.picture and saved["voice"].read_bytes() == openai.speech
    printed = capsys.readouterr().out  # (the terminal prints where each file went)
    assert str(saved["picture"]) in printed and str(saved["voice"]) in printed and "There is your cat." in shown
    assert str(saved["picture"]) in model.requests[1].prompt  # the model is told where the picture is
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in saved.values()} == {0o600}


@pytest.mark.parametrize(("status", "named"), [(401, "IMAGES_API_KEY"), (500, "IMAGES_MODEL and IMAGES_BASE_URL")])
async def test_an_images_server_that_refuses_or_fails_names_the_setting_never_the_key(
    tmp_path: Path, openai: FakeOpenAIServer, status: int, named: str, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "sk-wrong-key-never-shown-0000"
    settings = settings_for(tmp_path, openai, key=wrong if status == 401 else KEY)
    openai.picture_status = 200 if status == 401 else 500
    model = ScriptedModel([picture_call("a cat"), said("No picture, sorry.")])
    with caplog.at_level(logging.INFO):
        shown = await talk(settings, model, ["draw a cat"])
    told = model.requests[1].prompt  # what the model was told of the failure, to say to the user
    assert named in told and ("answered 500" in told or "refused" in told)
    for text in (told, shown, caplog.text):
        assert wrong not in text and KEY not in text
    assert not list((tmp_path / "data").glob("media/picture-*"))


@pytest.mark.parametrize(("status", "named"), [(401, "TTS_API_KEY"), (500, "TTS_MODEL and TTS_BASE_URL")])
async def test_a_speech_server_that_refuses_or_fails_names_the_setting_never_the_key(
    tmp_path: Path, openai: FakeOpenAIServer, status: int, named: str, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "sk-wrong-key-never-shown-1111"
    settings = settings_for(tmp_path, openai, key=wrong if status == 401 else KEY)
    openai.speech_status = 200 if status == 401 else 500
    settings.images.base_url = None
    model = ScriptedModel([said("It is sunny.")], repeat_last=True)
    with caplog.at_level(logging.WARNING):
        shown = await talk(settings, model, ["weather?"])
    assert "It is sunny." in shown  # the text answer is delivered whatever the speech did
    [warning] = [r.getMessage() for r in caplog.records if "spoken reply" in r.getMessage()]
    assert named in warning
    for text in (warning, shown, caplog.text):
        assert wrong not in text and KEY not in text
