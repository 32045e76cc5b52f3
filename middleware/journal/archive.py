"""The journal's records on disk, by boot and offset: what the journal service reads
beyond its in-memory history.

:meth:`Archive.boots` lists the boots whose segments the directory holds, in
time order, each with the first and last offsets it holds; :meth:`Archive.read_after`
reads a boot's records after an offset. A segment's first offset is read once
(its first line); a closed segment's last offset once (its whole file), and
cached by name and size. Reading on from where the previous read of a boot
ended costs a seek (a small cache of cursors), not a rescan of the segment.

Thread-safe (the writer thread plans retention with it while the event loop
reads): a lock around the caches; files are read outside it. A segment that
retention removes while it is read ends the read early: the caller asks again.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from middleware.journal.chain import distance, pred
from middleware.journal.history import Slice
from middleware.journal.segments import segment_boot, segment_files

__all__ = ["Archive", "BootSpan", "Segment"]

_CURSORS: Final = 64


@dataclass(frozen=True, slots=True)
class Segment:
    """One segment file: its boot, size and the offsets of its first and last records."""

    path: Path
    boot_id: str
    size: int
    first: int
    """Offset of its first whole record."""
    last: int | None
    """Offset of its last whole record; None for a boot's newest segment (may grow)."""


@dataclass(frozen=True, slots=True)
class BootSpan:
    """What the disk holds of one boot."""

    boot_id: str
    first: int
    """The oldest offset held."""
    last: int
    """The newest offset held."""
    starts: bool
    """Whether the boot's first record is held (its ``prev_hash`` is empty):
    ``first`` is then where the boot began, and an offset before it was never written."""


class Archive:
    """The segments of one journal directory, read by boot and offset."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        # name -> (size, first offset, first prev_hash, last offset or None)
        self._spans: dict[str, tuple[int, int, str, int | None]] = {}
        # (boot, offset) -> (path, byte position after the record with that offset)
        self._cursors: OrderedDict[tuple[str, int], tuple[Path, int]] = OrderedDict()

    def segments(self, *, closed_boots: bool = True) -> list[Segment]:
        """Every segment with at least one whole record, oldest first.

        A boot's newest segment has ``last`` None unless ``closed_boots`` and
        the boot is not the newest one in the directory (it ended: its last
        segment no longer grows), in which case it is read.
        """
        files = segment_files(self.directory)
        out: list[Segment] = []
        boots = [segment_boot(p) or "" for p in files]
        newest_boot = boots[-1] if boots else None
        last_of_boot = {boot: i for i, boot in enumerate(boots)}
        for i, (path, boot) in enumerate(zip(files, boots, strict=True)):
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            closed = last_of_boot[boot] > i or (closed_boots and boot != newest_boot)
            span = self._span(path, size, closed=closed)
            if span is None:
                continue
            first, _, last = span
            out.append(Segment(path, boot, size, first, last if closed else None))
        return out

    def _span(self, path: Path, size: int, *, closed: bool) -> tuple[int, str, int | None] | None:
        with self._lock:
            cached = self._spans.get(path.name)
        if cached is not None and cached[0] == size and (cached[3] is not None or not closed):
            return cached[1], cached[2], cached[3]
        first: tuple[int, str] | None = None
        last: int | None = None
        if cached is not None:
            first = cached[1], cached[2]
        for rec, _ in _records(path, 0):
            if first is None:
                first = int(rec["offset"]), str(rec.get("prev_hash") or "")
                if not closed:
                    break
            last = int(rec["offset"])
        if first is None:
            return None
        if not closed:
            last = None
        with self._lock:
            self._spans[path.name] = (size, first[0], first[1], last)
            if len(self._spans) > 4096:
                names = {p.name for p in segment_files(self.directory)}
                self._spans = {k: v for k, v in self._spans.items() if k in names}
        return first[0], first[1], last

    def boots(self, *, current: str = "", current_last: int | None = None) -> list[BootSpan]:
        """Boots held on disk, in time order (by their oldest segment).

        ``current`` is the running boot, whose newest offset the caller knows
        (``current_last``: the journal's in-memory history) without reading its
        growing segment; a boot that is not the current one has ended.
        """
        by_boot: dict[str, list[Segment]] = {}
        for seg in self.segments():
            by_boot.setdefault(seg.boot_id, []).append(seg)
        spans: list[BootSpan] = []
        for boot, segs in by_boot.items():
            last = segs[-1].last
            if boot == current and current_last is not None:
                last = current_last
            elif last is None:
                last = self._last_of(segs[-1])
            if last is None:
                continue
            with self._lock:
                cached = self._spans.get(segs[0].path.name)
            starts = cached is not None and cached[2] == ""
            spans.append(BootSpan(boot, segs[0].first, last, starts))
        return spans

    def _last_of(self, seg: Segment) -> int | None:
        last: int | None = None
        for rec, _ in _records(seg.path, 0):
            last = int(rec["offset"])
        return last

    def read_after(
        self,
        boot_id: str,
        offset: int,
        *,
        base: int,
        max_records: int,
        max_bytes: int,
        want: frozenset[str] | None = None,
        scan: int | None = None,
    ) -> Slice:
        """The records of ``boot_id`` after ``offset``, as :meth:`History.after` reads them.

        ``base`` is the boot's oldest offset held (offsets are compared by
        their distance from it). An empty slice with ``last_offset == offset``
        means nothing after ``offset`` is on disk (now).
        """
        scan = 10 * max_records if scan is None else scan
        target = distance(base, offset) if offset != pred(base) else -1
        segs = [s for s in self.segments(closed_boots=False) if s.boot_id == boot_id]
        with self._lock:
            cursor = self._cursors.pop((boot_id, offset), None)
        # The segment holding the record after `offset`: the last starting at or before it.
        index = 0
        for i, seg in enumerate(segs):
            if distance(base, seg.first) <= target + 1:
                index = i
        picked: list[bytes] = []
        size = 0
        read = 0
        last = offset
        position: tuple[Path, int] | None = None
        done = False
        for seg in segs[index:]:
            start = cursor[1] if cursor is not None and cursor[0] == seg.path else 0
            for rec, (line, end) in _records(seg.path, start, raw=True):
                if distance(base, int(rec["offset"])) <= target:
                    continue
                if want is None or rec.get("kind") in want:
                    if picked and (len(picked) >= max_records or size + len(line) > max_bytes):
                        done = True
                        break
                    picked.append(line)
                    size += len(line)
                read += 1
                last = int(rec["offset"])
                position = (seg.path, end)
                if read >= scan:
                    done = True
                    break
            if done:
                break
        if position is not None:
            with self._lock:
                self._cursors[(boot_id, last)] = position
                while len(self._cursors) > _CURSORS:
                    self._cursors.popitem(last=False)
        return Slice(tuple(picked), last, not done, last)


def _open(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def _records(
    path: Path, start: int, *, raw: bool = False
) -> Iterator[tuple[dict[str, Any], tuple[bytes, int]]]:
    """Whole records of a segment from byte ``start`` (of its uncompressed lines):
    each with its line and the byte position after it. Torn or foreign lines are skipped."""
    try:
        fh = _open(path)
    except FileNotFoundError:
        return
    with fh:
        if start:
            fh.seek(start)
        position = start
        while True:
            try:
                line = fh.readline()
            except (EOFError, gzip.BadGzipFile, OSError):
                return  # a gzip member cut by a crash, or a file removed meanwhile
            if not line:
                return
            position += len(line)
            if not line.endswith(b"\n"):
                return  # torn (a crash), or still being written
            try:
                rec = json.loads(line)
                int(rec["offset"])
            except (ValueError, KeyError, TypeError):
                continue
            if isinstance(rec, dict):
                yield rec, (line if raw else b"", position)
