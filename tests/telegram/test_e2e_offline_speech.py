"""The offline speech engine (``TTS_ENGINE=espeak``, issue 41): a voice message sent through the real
python-telegram-bot client to the fake Bot API is answered with a voice message ``espeak-ng`` spoke and ``opusenc``
(or ffmpeg) encoded, OGG/Opus, on this machine. ``.ci/run`` installs Debian's espeak-ng and opus-tools; the tests
skip, saying so, only where they are missing."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator

import pytest

from bots.plugins import Deployment, spoken_replies
from bots.settings import Settings
from core import ScriptedModel
from core.errors import ConfigError
from core.media import OpenAISpeech, OpenAITranscriber
from core.media.espeak import EspeakSpeech
from core.media.ogg import ogg_duration, ogg_waveform
from core.media.reader import READER
from core.media.spoken import SpokenReplies
from core.usage import InMemoryUsage, day_of
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import StartBot, answer

needs_espeak = pytest.mark.skipif(
    shutil.which("espeak-ng") is None or not (shutil.which("opusenc") or shutil.which("ffmpeg")),
    reason="needs Debian's espeak-ng and opus-tools (apt-get install espeak-ng opus-tools; .ci/run installs them)",
)


@pytest.fixture
async def openai() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        yield server


@needs_espeak
async def test_a_voice_message_is_answered_with_a_voice_message_spoken_offline(
    server: FakeTelegramServer, start_bot: StartBot, openai: FakeOpenAIServer
) -> None:
    openai.transcript = "what is the capital of France"
    usage = InMemoryUsage()
    speaker = EspeakSpeech(voice="en")
    model = ScriptedModel([answer("Paris is the capital of France.")], repeat_last=True)
    agent = await start_bot(model, agent_options={"plugins": [SpokenReplies(speaker, usage=usage, max_chars=200)]})
    stt = agent.provided(READER).transcriber = OpenAITranscriber(base_url=openai.url)
    try:
        update = server.user_sends("voice", b"OggS" + bytes(300))
        [reply] = await server.wait_replies(1)
        await server.wait_for(lambda: bool(server.media), timeout=20)
    finally:
        await stt.aclose()
    assert reply.text == "Paris is the capital of France."
    [voice] = server.media
    assert voice.method == "sendVoice" and voice.reply_to == update["message"]["message_id"]
    data = voice.file.data
    assert data.startswith(b"OggS") and b"OpusHead" in data[:200]
    duration = ogg_duration(data)
    assert duration is not None and 0.8 < duration < 10  # about two seconds of speech
    waveform = ogg_waveform(data)  # (what Discord draws of a voice message)
    assert waveform is not None and 8 <= len(waveform) <= 64 and max(waveform) == 255
    assert not [r for r in openai.requests if r.path.endswith("/audio/speech")]  # nothing asked of a server
    async with asyncio.timeout(10):  # (counted right after the post)
        while (await usage.totals("speech:user:telegram:1001", [day_of()])).output_tokens != len(reply.text):
            await asyncio.sleep(0.02)


@needs_espeak
async def test_text_reaches_espeak_as_text_never_as_an_option() -> None:
    speaker = EspeakSpeech(voice="en")
    data = await speaker.speak("--help -v xx --stdout")  # spoken, not taken as options
    assert data.startswith(b"OggS") and (ogg_duration(data) or 0) > 0.5


@needs_espeak
def test_tts_engine_espeak_builds_the_offline_speaker_from_the_settings() -> None:
    settings = Settings(_env_file=None, tts={"engine": "espeak"})  # type: ignore[call-arg]
    [plugin] = spoken_replies().build(Deployment(settings=settings, usage=InMemoryUsage()))
    assert isinstance(plugin, SpokenReplies) and isinstance(plugin.speaker, EspeakSpeech)
    assert plugin.speaker.voice == "en"  # (TTS_VOICE's default, alloy, is the server's: espeak speaks en)
    with pytest.raises(ConfigError, match="TTS_VOICE"):
        EspeakSpeech(voice="-x; rm")


def test_without_espeak_the_engine_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match="apt-get install espeak-ng opus-tools"):
        EspeakSpeech()


async def test_voice_on_and_off_in_a_telegram_group_its_admins_choose(
    server: FakeTelegramServer, start_bot: StartBot, openai: FakeOpenAIServer
) -> None:
    group, ann, bob = -100777, 1001, 1002
    server.chat(group, kind="supergroup", title="Crew")
    server.admins[group] = {ann}
    speaker = OpenAISpeech(base_url=openai.url)
    model = ScriptedModel([answer("Fair winds.")], repeat_last=True)
    await start_bot(model, agent_options={"plugins": [SpokenReplies(speaker)]})

    async def said(text: str, user_id: int) -> str:
        before = len([m for m in server.sent if m.chat_id == group])
        server.user_says(text, user_id=user_id, first_name="Ann", chat_id=group)
        return (await server.wait_replies(before + 1, chat_id=group))[-1].text

    try:
        assert await said("/voice on", bob) == "Sorry, only this chat's admins can change the spoken replies here."
        assert await said("/voice on", ann) == "Done: spoken replies in this chat: every answer is also spoken."
        assert await said("/voice", bob) == (
            "Spoken replies in this chat: every answer is also spoken. Choose: on, off, default"
        )
        # a text message, answered aloud too
        assert await said("@daydream_test_bot how is the sea?", bob) == "Fair winds."
        await server.wait_for(lambda: bool(server.media))
        assert await said("/voice off", ann) == "Done: spoken replies in this chat: never, not even to a voice message."
        assert await said("@daydream_test_bot and now?", bob) == "Fair winds."
        assert await said("@daydream_test_bot and still?", bob) == "Fair winds."  # (the run before it has ended)
    finally:
        await speaker.aclose()
    [voice] = server.media
    assert voice.method == "sendVoice" and voice.file.data == openai.speech
