"""``core.media.ogg``: a voice message's duration and waveform read from its OGG/Opus pages, never from bytes that
only look like them (a truncated stream, a wrong version, no Opus header)."""

from __future__ import annotations

from core.media.ogg import ogg_duration, ogg_packets, ogg_waveform
from tests.discord.test_e2e_pictures_voice import ogg_stream


def test_the_duration_is_the_last_granule_less_the_pre_skip() -> None:
    data = ogg_stream(3.0, packets=150)
    assert ogg_duration(data) == 3.0
    found = ogg_packets(data)
    assert found is not None and len(found[0]) == 152 and found[2] == 312
    waveform = ogg_waveform(data)
    assert waveform is not None and len(waveform) == 64 and max(waveform) == 255


def test_bytes_that_are_not_a_whole_ogg_opus_stream_give_none() -> None:
    data = ogg_stream(1.0)
    fake = b"OggS\x00\x02" + b"fake-opus" * 8
    for bad in (b"", b"OggS", fake, data[:-1], data[:40], data.replace(b"OpusHead", b"OpusHeaX")):
        assert ogg_duration(bad) is None and ogg_waveform(bad) is None
    assert ogg_duration(data[:4] + b"\x01" + data[5:]) is None  # an OGG version that does not exist
