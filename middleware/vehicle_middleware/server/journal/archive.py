"""The journal's records on disk, by boot and offset: what the journal service reads
beyond its in-memory history.

:meth:`Archive.boots` lists the boots whose segments the directory holds, in
time order, each with the first and last offsets it holds; :meth:`Archive.read_after`
reads a boot's records after an offset. A segment's first offset is read once
(its first line); its last is the one before the next segment's first, so only
the final segment of a boot that ended is read whole, once (cached by name and
size). Reading on from where the previous read of a boot ended goes on from
the segment left open there (a small cache of open readers, closed when
evicted or when retention removes their segment), not a rescan: a gzip
segment cannot seek without inflating it from its start, so a catch-up that
reopened it per answer would read it once per answer.

Thread-safe (the writer thread plans retention with it while the event loop
reads): a lock around the caches; files are read outside it (an open reader
taken from the cache belongs to one read until it is put back). A segment that
retention removes while it is read ends the read early: the caller asks again.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from vehicle_middleware.contract.journal.chain import distance, pred
from vehicle_middleware.contract.journal.segments import segment_boot, segment_files
from vehicle_middleware.server.journal.history import Slice

__all__ = ["Archive", "BootSpan", "Segment"]

_READERS: Final = 16
"""Open segment readers kept (each a file handle, and for gzip its inflate state): one
per consumer catching up from disk is enough (``journal_max_consumers`` is 16)."""


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
        self._firsts: dict[str, tuple[int, str]] = {}  # name -> (first offset, its prev_hash)
        self._lasts: dict[tuple[str, int], int] = {}  # (name, size) -> last offset
        # (boot, offset) -> an open reader just after the record with that offset
        self._readers: OrderedDict[tuple[str, int], _Reader] = OrderedDict()

    def segments(self, *, closed_boots: bool = True) -> list[Segment]:
        """Every segment with at least one whole record, oldest first.

        A segment's ``last`` is the offset before the first of the next segment
        of its boot (offsets between them are records the journal lost); a
        boot's newest segment has ``last`` None unless ``closed_boots`` and the
        boot is not the newest one in the directory: it ended, so that segment
        is read to its end, once.
        """
        files = segment_files(self.directory)
        found: list[tuple[Path, str, int, int]] = []  # path, boot, size, first
        for path in files:
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            head = self._first(path)
            if head is not None:
                found.append((path, segment_boot(path) or "", size, head[0]))
        newest_boot = segment_boot(files[-1]) if files else None
        out: list[Segment] = []
        for i, (path, boot, size, first) in enumerate(found):
            nxt = found[i + 1] if i + 1 < len(found) else None
            last: int | None = None
            if nxt is not None and nxt[1] == boot:
                last = pred(nxt[3])
            elif closed_boots and boot != newest_boot:
                last = self._last(path, size)
            out.append(Segment(path, boot, size, first, last))
        return out

    def _first(self, path: Path) -> tuple[int, str] | None:
        """A segment's first offset and its prev_hash (read once: its first line)."""
        with self._lock:
            cached = self._firsts.get(path.name)
        if cached is not None:
            return cached
        for rec in _records(path):
            got = int(rec["offset"]), str(rec.get("prev_hash") or "")
            with self._lock:
                self._firsts[path.name] = got
                if len(self._firsts) > 4096:
                    names = {p.name for p in segment_files(self.directory)}
                    self._firsts = {k: v for k, v in self._firsts.items() if k in names}
                    self._lasts = {k: v for k, v in self._lasts.items() if k[0] in names}
            return got
        return None

    def _last(self, path: Path, size: int) -> int | None:
        """The offset of a segment's last whole record (read once per size)."""
        with self._lock:
            cached = self._lasts.get((path.name, size))
        if cached is not None:
            return cached
        last: int | None = None
        for rec in _records(path):
            last = int(rec["offset"])
        if last is not None:
            with self._lock:
                self._lasts[(path.name, size)] = last
        return last

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
                last = self._last(segs[-1].path, segs[-1].size)
            if last is None:
                continue
            first = self._first(segs[0].path)
            spans.append(BootSpan(boot, segs[0].first, last, first is not None and not first[1]))
        return spans

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
        held = self.segments(closed_boots=False)
        segs = [s for s in held if s.boot_id == boot_id]
        paths = {s.path for s in held}
        with self._lock:
            cursor = self._readers.pop((boot_id, offset), None)
            gone = [k for k, r in self._readers.items() if r.path not in paths]
            stale = [self._readers.pop(k) for k in gone]  # retention removed their segment
        for r in stale:
            r.close()
        # The segment holding the record after `offset`: the last starting at or before it.
        index = 0
        for i, seg in enumerate(segs):
            if distance(base, seg.first) <= target + 1:
                index = i
        picked: list[bytes] = []
        size = 0
        read = 0
        last = offset
        reader: _Reader | None = None
        done = False
        try:
            for seg in segs[index:]:
                if reader is not None:
                    reader.close()
                if cursor is not None and cursor.path == seg.path:
                    reader, cursor = cursor, None
                else:
                    reader = _Reader.open(seg.path)
                    if reader is None:
                        continue  # removed meanwhile: the caller asks again
                while (item := reader.next()) is not None:
                    rec, line = item
                    if distance(base, int(rec["offset"])) <= target:
                        continue
                    if want is None or rec.get("kind") in want:
                        if picked and (len(picked) >= max_records or size + len(line) > max_bytes):
                            reader.unread(item)  # the next read starts with it
                            done = True
                            break
                        picked.append(line)
                        size += len(line)
                    read += 1
                    last = int(rec["offset"])
                    if read >= scan:
                        done = True
                        break
                if done:
                    break
        except BaseException:
            if reader is not None:
                reader.close()
            raise
        finally:
            if cursor is not None:
                cursor.close()
        if reader is not None:
            self._keep(boot_id, last, reader)
        return Slice(tuple(picked), last, not done, last)

    def _keep(self, boot_id: str, last: int, reader: _Reader) -> None:
        """Keep ``reader`` (just after record ``last``) for the next read from there."""
        if not reader.ok:
            reader.close()
            return
        with self._lock:
            closing = [r for r in (self._readers.pop((boot_id, last), None),) if r is not None]
            self._readers[(boot_id, last)] = reader
            while len(self._readers) > _READERS:
                closing.append(self._readers.popitem(last=False)[1])
        for r in closing:
            r.close()

    def removed(self, paths: Iterable[Path]) -> None:
        """Retention removed these segments: close their open readers, which would
        keep the disk space of the removed files."""
        gone = set(paths)
        with self._lock:
            keys = [k for k, r in self._readers.items() if r.path in gone]
            closing = [self._readers.pop(k) for k in keys]
        for r in closing:
            r.close()

    def close(self) -> None:
        """Close the open readers (they are opened again when needed)."""
        with self._lock:
            readers, self._readers = list(self._readers.values()), OrderedDict()
        for r in readers:
            r.close()


class _Reader:
    """One segment open for reading, record by record from its start; a record read and
    not taken (:meth:`unread`) is the next one :meth:`next` gives."""

    def __init__(self, path: Path, fh: IO[bytes]) -> None:
        self.path = path
        self._fh = fh
        self._gzip = path.suffix == ".gz"
        self._position = 0  # byte position (of the uncompressed lines) after the last line
        self._held: tuple[dict[str, Any], bytes] | None = None
        self.ok = True
        """Whether it can read on later (False after a gzip member cut short, or an error)."""

    @classmethod
    def open(cls, path: Path) -> _Reader | None:
        try:
            return cls(path, _open(path))
        except FileNotFoundError:
            return None

    def next(self) -> tuple[dict[str, Any], bytes] | None:
        """The next whole record and its line; None at the end (for now: a growing
        segment may have more later). Torn or foreign lines are skipped; a torn last
        line (being written) is read again next time."""
        if self._held is not None:
            item, self._held = self._held, None
            return item
        fh = self._fh
        while True:
            try:
                line = fh.readline()
            except (EOFError, gzip.BadGzipFile, OSError, ValueError):
                self.ok = False  # a gzip member cut by a crash, or a file closed meanwhile
                return None
            if not line:
                return None
            if not line.endswith(b"\n"):
                # Torn (a crash), or still being written: read it again when it is whole.
                if self._gzip:
                    self.ok = False  # a gzip reader cannot step back cheaply: reopen then
                else:
                    fh.seek(self._position)
                return None
            self._position += len(line)
            try:
                rec = json.loads(line)
                int(rec["offset"])
            except (ValueError, KeyError, TypeError):
                continue
            if isinstance(rec, dict):
                return rec, line

    def unread(self, item: tuple[dict[str, Any], bytes]) -> None:
        self._held = item

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._fh.close()


def _open(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def _records(path: Path) -> Iterator[dict[str, Any]]:
    """The whole records of a segment, from its start (torn or foreign lines skipped)."""
    reader = _Reader.open(path)
    if reader is None:
        return
    try:
        while (item := reader.next()) is not None:
            yield item[0]
    finally:
        reader.close()
