"""The nearest embeddings in Python, where SQLite cannot load ``sqlite-vec``: fast without numpy.

Each vector is stored once more, quantized (``quantize``): its components scaled so the largest is 1,023, as
unsigned 11-bit numbers (offset by 1,024) with the scale in front. ``VectorIndex`` keeps, for each dimension, one
Python integer holding that component of every passage in its own slot; a question's dot product with every
passage is then one small-integer multiplication and addition per dimension (384 big-integer operations in C, not
384 times the passages in Python), read back slot by slot. A 32-bit slot holds the sum of up to 1,025 dimensions
of at most 2,047 times 2,047 (``WIDE_AT``); larger vectors (1,536 dimensions and more) get 64-bit slots. The
quantized scores choose the candidates; the stored
float32 vectors rank those exactly (``cosine``).
"""

from __future__ import annotations

import array
import heapq
import math
import struct
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ("WIDE_AT", "VectorIndex", "cosine", "quantize")

LEVEL = 1023
"""The largest quantized component (in size); the offset is ``LEVEL + 1``."""
OFFSET = LEVEL + 1
WIDE_AT = (2**32 - 1) // (2 * LEVEL + 1) ** 2 + 1
"""Vectors of this many dimensions (1,026) or more have 64-bit slots: their sums may not fit 32 bits."""
_SCALE = struct.Struct("<f")


def quantize(vector: Sequence[float]) -> bytes:
    """``vector`` as the index stores it: its scale (float32) then each component as an unsigned 16-bit number."""
    largest = max((abs(x) for x in vector), default=0.0)
    scale = LEVEL / largest if largest > 0 and math.isfinite(largest) else 0.0
    levels = array.array("H", [round(x * scale) + OFFSET for x in vector])
    if sys.byteorder == "big":  # pragma: no cover - stored little-endian, as the slots are read
        levels.byteswap()
    return _SCALE.pack(scale) + levels.tobytes()


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two vectors (0 when either is zero)."""
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


@dataclass(kw_only=True, frozen=True, slots=True)
class VectorIndex:
    """Every stored vector of one size, by passage id (``build``), searched by ``nearest``."""

    ids: Sequence[int]
    """The passages' ids, in slot order."""
    collections: Sequence[str]
    """Each passage's collection."""
    scales: Sequence[float]
    """Each passage's quantization scale."""
    sums: Sequence[int]
    """Each passage's quantized components summed (to take the offsets back out)."""
    columns: Sequence[int]
    """Per dimension, every passage's component in its slot."""
    width: int
    """Bytes a slot (4, or 8 for ``WIDE_AT`` dimensions or more)."""

    @classmethod
    def build(cls, rows: Iterable[tuple[int, str, bytes]]) -> VectorIndex:
        """The index of ``rows`` (passage id, collection, ``quantize``'s bytes); vectors of another size than the
        first are left out (one model per knowledge base: they would be an old model's)."""
        ids: list[int] = []
        collections: list[str] = []
        scales: list[float] = []
        parts: list[bytes] = []
        for pid, collection, blob in rows:
            if parts and len(blob) - _SCALE.size != len(parts[0]):
                continue
            ids.append(pid)
            collections.append(collection)
            scales.append(_SCALE.unpack_from(blob)[0])
            parts.append(blob[_SCALE.size :])
        dims = len(parts[0]) // 2 if parts else 0
        width = 8 if dims >= WIDE_AT else 4
        flat = b"".join(parts)
        count = len(parts)
        columns: list[int] = []
        for j in range(dims):
            slots = bytearray(count * width)
            slots[0::width] = flat[2 * j :: 2 * dims]
            slots[1::width] = flat[2 * j + 1 :: 2 * dims]
            columns.append(int.from_bytes(slots, "little"))
        sums = _slots(sum(columns), count, width)
        return cls(ids=ids, collections=collections, scales=scales, sums=sums, columns=columns, width=width)

    def __len__(self) -> int:
        return len(self.ids)

    def nearest(self, vector: Sequence[float], *, count: int, collections: Sequence[str] | None = None) -> list[int]:
        """The ids of the ``count`` passages (of ``collections``; None: all) nearest ``vector`` by the quantized
        cosine, nearest first (rank them exactly with the float vectors)."""
        if not self.ids or len(vector) != len(self.columns):
            return []
        largest = max((abs(x) for x in vector), default=0.0)
        if not largest > 0 or not math.isfinite(largest):
            return []
        scale = LEVEL / largest
        levels = [round(x * scale) + OFFSET for x in vector]
        total = 0
        for level, column in zip(levels, self.columns, strict=True):
            total += level * column
        raw = _slots(total, len(self.ids), self.width)
        # sum((q - O)(v - O)) = sum(q v) - O sum(v) - O sum(q) + O^2 dims, q and v the offset levels
        constant = OFFSET * OFFSET * len(self.columns) - OFFSET * sum(levels)
        wanted = set(collections) if collections is not None else None
        scored = (
            ((r - OFFSET * s + constant) / (scale * sc) if sc else 0.0, i)
            for i, (r, s, sc, c) in enumerate(zip(raw, self.sums, self.scales, self.collections, strict=True))
            if wanted is None or c in wanted
        )
        return [self.ids[i] for _, i in heapq.nlargest(count, scored)]


def _slots(number: int, count: int, width: int) -> array.array[int]:
    """The ``count`` slots of ``width`` bytes of ``number``, lowest first."""
    found = array.array("I" if width == 4 else "Q")
    found.frombytes(number.to_bytes(count * width, "little"))
    if sys.byteorder == "big":  # pragma: no cover
        found.byteswap()
    return found
