"""The watched-key set: one bit per key id, set iff some app subscribes to it.

The ESS tests this bit first on every ``data_updated``; for an unwatched key
that test is the whole cost. The bitmap grows with the id space (ids are kept
dense by the V-Store), never per event.
"""

from __future__ import annotations

from bitarray import bitarray
from bitarray.util import zeros

__all__ = ["WatchedKeys"]


class WatchedKeys:
    """A growable bitmap indexed by key id."""

    __slots__ = ("_bits",)

    def __init__(self, size: int = 1) -> None:
        self._bits: bitarray = zeros(max(size, 1))

    @property
    def bits(self) -> bitarray:
        """The bitmap itself, for the ESS hot path: read it, never write it.

        The object stays the same when the bitmap grows, so a cached reference
        remains valid.
        """
        return self._bits

    def __len__(self) -> int:
        return len(self._bits)

    def __contains__(self, key_id: int) -> bool:
        return 0 <= key_id < len(self._bits) and bool(self._bits[key_id])

    def ensure(self, key_id: int) -> None:
        """Grow the bitmap (with zeros) so that ``key_id`` is a valid index."""
        missing = key_id + 1 - len(self._bits)
        if missing > 0:
            # Grow geometrically so a provider adding keys one by one is O(1) amortized.
            self._bits.extend(zeros(max(missing, len(self._bits) // 2)))

    def set(self, key_id: int) -> None:
        """Mark ``key_id`` watched."""
        self.ensure(key_id)
        self._bits[key_id] = 1

    def clear(self, key_id: int) -> None:
        """Mark ``key_id`` unwatched."""
        if key_id < len(self._bits):
            self._bits[key_id] = 0

    def watched(self) -> list[int]:
        """The ids whose bit is set, ascending."""
        return list(self._bits.search(1))

    def count(self) -> int:
        """How many ids are watched."""
        return int(self._bits.count(1))
