"""The newest records of this boot, in memory, as the journal wrote them.

The writer thread hands each batch of lines it has written to :meth:`History.add`
(after the write, so memory never holds a record the disk does not); the
journal service reads them from the event loop. Older records are read from
the segments on disk (:mod:`vehicle_middleware.server.journal.archive`).

Bounded by records and by bytes (the lines' lengths): the oldest go first.
Offsets in memory increase by :func:`~vehicle_middleware.contract.journal.chain.succ` with
gaps where records were lost, and may wrap at 2^32: they are compared by
their distance from the oldest held. Thread-safe: one lock, held for a list
append or a slice of at most one answer.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from vehicle_middleware.contract.journal.chain import distance, pred

__all__ = ["History", "Slice"]

_COMPACT_AT: Final = 4096
"""Evicted entries kept at the lists' heads before they are cut off (amortized O(1))."""


@dataclass(frozen=True, slots=True)
class Slice:
    """Records read after an offset: the lines wanted, and how far the read went."""

    lines: tuple[bytes, ...]
    """The wanted records' journal lines, in offset order, as written."""
    last_offset: int
    """Offset of the last record read (wanted or skipped by the filter): read on after it."""
    end: bool
    """Whether the read reached the newest record held (nothing more to read now)."""
    newest: int
    """The newest offset held when read."""


class History:
    """The newest written records: offsets, lines and kinds, bounded."""

    def __init__(self, *, max_records: int, max_bytes: int) -> None:
        if max_records < 1 or max_bytes < 1:
            raise ValueError("history bounds must be >= 1")
        self.max_records = max_records
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._offsets: list[int] = []
        self._lines: list[bytes] = []
        self._kinds: list[str] = []
        self._head = 0  # index of the oldest held entry
        self._bytes = 0
        self.added = 0
        """Records ever added (the writer's count of records written this boot)."""
        self._armed = False
        self._on_add: Callable[[], None] | None = None

    # -- the writer thread ----------------------------------------------------------

    def add(self, offsets: Sequence[int], lines: Sequence[bytes], kinds: Sequence[str]) -> None:
        """Append records just written, oldest first; evict beyond the bounds. O(batch)."""
        with self._lock:
            self._offsets.extend(offsets)
            self._lines.extend(lines)
            self._kinds.extend(kinds)
            self._bytes += sum(map(len, lines))
            self.added += len(offsets)
            self._evict()
            wake = self._on_add if self._armed else None
            self._armed = False
        if wake is not None:
            wake()

    def _evict(self) -> None:
        lines = self._lines
        head = self._head
        end = len(lines)
        while end - head > 1 and (end - head > self.max_records or self._bytes > self.max_bytes):
            self._bytes -= len(lines[head])
            head += 1
        self._head = head
        if head >= _COMPACT_AT and head * 2 >= end:
            del self._offsets[:head], self._lines[:head], self._kinds[:head]
            self._head = 0

    # -- readers --------------------------------------------------------------------

    def on_add(self, wake: Callable[[], None]) -> None:
        """Call ``wake()`` (from the writer thread) after the next :meth:`add` once armed."""
        self._on_add = wake

    def arm(self) -> None:
        """Have the next :meth:`add` call the ``on_add`` function once.

        Arm first, then look for records, then wait: a record added in between
        is then either seen or wakes the waiter.
        """
        self._armed = True

    def window(self) -> tuple[int, int] | None:
        """``(n0, n1)``: the oldest and newest offsets held, or None when empty."""
        with self._lock:
            if self._head == len(self._offsets):
                return None
            return self._offsets[self._head], self._offsets[-1]

    def __len__(self) -> int:
        with self._lock:
            return len(self._offsets) - self._head

    @property
    def bytes(self) -> int:
        """The held lines' bytes."""
        return self._bytes

    def after(
        self,
        offset: int,
        *,
        max_records: int,
        max_bytes: int,
        want: frozenset[str] | None = None,
        scan: int | None = None,
    ) -> Slice | None:
        """The records after ``offset``, or None when ``offset`` is not in memory.

        ``offset`` is in memory when it is the newest record or older but not
        older than the record before the oldest held (``p(n0)``: "nothing of
        it held yet"). At most ``max_records`` wanted records (``want``: their
        kinds; None: every kind) and ``max_bytes`` of lines (at least one
        record), reading at most ``scan`` records (default ``10 * max_records``).
        O(log n + records read).
        """
        scan = 10 * max_records if scan is None else scan
        with self._lock:
            offsets = self._offsets
            head = self._head
            end = len(offsets)
            if head == end:
                return None
            n0, n1 = offsets[head], offsets[-1]
            if offset == pred(n0):
                start = head
            else:
                d = distance(n0, offset)
                if d > distance(n0, n1):
                    return None
                start = bisect_right(offsets, d, head, end, key=lambda o: distance(n0, o))
            stop = min(end, start + max(1, scan))
            lines = self._lines
            if want is None:
                picked: list[bytes] = []
                size = 0
                i = start
                while i < stop and len(picked) < max_records:
                    line = lines[i]
                    if picked and size + len(line) > max_bytes:
                        break
                    picked.append(line)
                    size += len(line)
                    i += 1
            else:
                kinds = self._kinds
                picked, size, i = [], 0, start
                while i < stop and len(picked) < max_records:
                    if kinds[i] in want:
                        line = lines[i]
                        if picked and size + len(line) > max_bytes:
                            break
                        picked.append(line)
                        size += len(line)
                    i += 1
            last = offsets[i - 1] if i > start else offset
            return Slice(tuple(picked), last, i == end, n1)

    def tail(self, offset: int, keep: int) -> int:
        """``offset`` if it is in memory (see :meth:`after`); else the position just
        before the newest ``keep`` records held (``keep`` 0: the newest record).
        ``offset`` when nothing is held."""
        with self._lock:
            offsets = self._offsets
            head, end = self._head, len(offsets)
            if head == end:
                return offset
            n0, n1 = offsets[head], offsets[-1]
            if offset == pred(n0) or distance(n0, offset) <= distance(n0, n1):
                return offset
            if keep <= 0:
                return n1
            return pred(offsets[max(head, end - keep)])

    def check(self) -> None:
        """Assert every invariant (tests)."""
        with self._lock:
            held = len(self._offsets) - self._head
            assert len(self._lines) == len(self._offsets) == len(self._kinds)
            assert 0 <= self._head <= len(self._offsets)
            assert self._bytes == sum(map(len, self._lines[self._head :]))
            assert held <= 1 or (held <= self.max_records and self._bytes <= self.max_bytes)
            if held:
                n0 = self._offsets[self._head]
                ds = [distance(n0, o) for o in self._offsets[self._head :]]
                assert ds == sorted(ds), "offsets not increasing"
                assert len(set(ds)) == len(ds), "an offset twice"
