"""What a voice message needs to know of its OGG/Opus bytes without decoding them: how long it lasts (the granule
position of its last page, 48 kHz, less the header's pre-skip) and a rough waveform for the platforms that draw one
(Discord): the size of each Opus packet, which grows with what the packet carries, scaled to 0-255. Pages are
walked by their headers; bytes that are not a well-formed OGG stream give None."""

from __future__ import annotations

__all__ = ("ogg_duration", "ogg_packets", "ogg_waveform")

_RATE = 48_000
"""Opus's granule rate (samples a second), whatever the input's rate was."""


def ogg_packets(data: bytes) -> tuple[list[int], int, int] | None:
    """The sizes of the stream's packets (the headers' too), the granule position of its last page and the
    header's pre-skip; None when ``data`` is not a well-formed OGG/Opus stream."""
    sizes: list[int] = []
    granule, pos, current = -1, 0, 0
    while pos < len(data):
        if data[pos : pos + 4] != b"OggS" or len(data) < pos + 27 or data[pos + 4] != 0:
            return None
        count = data[pos + 26]
        table = data[pos + 27 : pos + 27 + count]
        if len(table) != count:
            return None
        body = sum(table)
        if len(data) < pos + 27 + count + body:
            return None
        page_granule = int.from_bytes(data[pos + 6 : pos + 14], "little", signed=True)
        if page_granule >= 0:
            granule = page_granule
        for lacing in table:
            current += lacing
            if lacing < 255:
                sizes.append(current)
                current = 0
        pos += 27 + count + body
    head = data.find(b"OpusHead")
    if head < 0 or len(data) < head + 12 or granule < 0:
        return None
    return sizes, granule, int.from_bytes(data[head + 10 : head + 12], "little")


def ogg_duration(data: bytes) -> float | None:
    """Seconds of OGG/Opus audio; None when ``data`` is not OGG/Opus."""
    found = ogg_packets(data)
    if found is None:
        return None
    _sizes, granule, pre_skip = found
    return max(0.0, (granule - pre_skip) / _RATE)


def ogg_waveform(data: bytes, *, points: int = 64) -> bytes | None:
    """At most ``points`` amplitudes (0-255) drawn from the sizes of the audio packets (the two header packets
    left out), each the largest of its share of the stream; None when ``data`` is not OGG/Opus or has no audio."""
    found = ogg_packets(data)
    if found is None:
        return None
    audio = found[0][2:]
    if not audio:
        return None
    count = min(points, len(audio))
    buckets = [max(audio[i * len(audio) // count : (i + 1) * len(audio) // count] or [0]) for i in range(count)]
    top = max(buckets) or 1
    return bytes(min(255, round(255 * b / top)) for b in buckets)
