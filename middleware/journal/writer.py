"""The journal writer: a bounded buffer on the event loop's side, a thread on disk's.

``Journal.record`` (event loop) stamps a record with its offset and time and
appends it to a bounded deque: an append and a length test, never a wait. If
the buffer is full the record is dropped and counted; the next record that
fits is preceded by a ``journal_dropped`` record with the count. The writer
thread takes records in order, links them into the hash chain, and appends
them as JSON lines to size-rotated segment files (gzip optional), flushing
after each burst, so a crash leaves at most a torn last line. When the
directory holds more than ``max_bytes`` of segments, the oldest go. A write
that fails (a full disk) drops the record, and a ``journal_dropped`` record
says so once writing works again.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from middleware.journal.chain import Chain, OffsetCounter
from middleware.journal.records import LEVEL_OF, Level

__all__ = ["Journal", "segment_files"]

log = logging.getLogger(__name__)

_STOP: Final = object()
_IDLE_WAIT_S: Final = 0.005  # the writer's poll when idle: latency to disk, not to apps


def segment_files(directory: Path) -> list[Path]:
    """The journal's segment files in ``directory``, oldest first (names sort by time)."""
    return sorted(p for p in directory.glob("journal-*.jsonl*") if p.is_file())


class Journal:
    """One middleware process's journal."""

    def __init__(
        self,
        directory: Path,
        *,
        vehicle_id: str,
        boot_id: str,
        level: Level = Level.DROPS,
        segment_bytes: int = 8 * 1024 * 1024,
        max_bytes: int = 256 * 1024 * 1024,
        compress: bool = False,
        buffer: int = 100_000,
        clock: Callable[[], int] = time.time_ns,
        offset_start: int | None = None,
    ) -> None:
        self.directory = directory
        self.vehicle_id = vehicle_id
        self.boot_id = boot_id
        self.level = level
        self.full = level >= Level.FULL
        """Whether per-event records (publish, queued, delivered) are wanted."""
        self.drops = level >= Level.DROPS
        self._segment_bytes = segment_bytes
        self._max_bytes = max_bytes
        self._compress = compress
        self._bound = buffer
        self._clock = clock
        self._offsets = OffsetCounter(offset_start)
        self._buffer: deque[Any] = deque()
        self._dropped = 0  # producer side: records the buffer refused since the last report
        self.dropped_total = 0
        self.written = 0
        self._write_failed = 0  # writer side
        self._chain = Chain()
        self._file: Any = None  # a binary file or a GzipFile
        self._file_bytes = 0
        self._segment = 0
        self._started_ns = clock()
        self._thread = threading.Thread(target=self._run, name="journal-writer", daemon=True)
        self._stopped = threading.Event()

    # -- the event loop's side ------------------------------------------------------

    def start(self, **fields: Any) -> None:
        """Create the directory, start the writer, and record ``start``."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        self.record("start", **fields)

    def record(self, kind: str, **fields: Any) -> None:
        """Stamp and buffer one record (if its level is on). Never blocks."""
        if LEVEL_OF[kind] > self.level:
            return
        buffer = self._buffer
        if len(buffer) >= self._bound:
            self._dropped += 1
            self.dropped_total += 1
            self._offsets.take()  # the gap in offsets shows the loss too
            return
        if self._dropped:
            buffer.append(
                self._stamp("journal_dropped", {"count": self._dropped, "cause": "buffer full"})
            )
            self._dropped = 0
        buffer.append(self._stamp(kind, fields))

    def _stamp(self, kind: str, fields: dict[str, Any]) -> dict[str, Any]:
        return {
            "kind": kind,
            "vehicle_id": self.vehicle_id,
            "boot_id": self.boot_id,
            "offset": self._offsets.take(),
            "time_ns": self._clock(),
            **fields,
        }

    def close(self, reason: str = "shutdown", timeout: float = 10.0) -> None:
        """Record ``stop``, let the writer drain the buffer, and wait for it."""
        if not self._thread.is_alive():
            return
        self.record("stop", reason=reason)
        self._buffer.append(_STOP)
        self._thread.join(timeout)

    def pending(self) -> int:
        """Records buffered, not yet written."""
        return len(self._buffer)

    # -- the writer thread ----------------------------------------------------------

    def _run(self) -> None:
        buffer = self._buffer
        try:
            while True:
                try:
                    rec = buffer.popleft()
                except IndexError:
                    self._flush()
                    time.sleep(_IDLE_WAIT_S)
                    continue
                if rec is _STOP:
                    break
                self._write(rec)
        finally:
            self._flush()
            if self._file is not None:
                self._file.close()
                self._file = None
            self._stopped.set()

    def _write(self, rec: dict[str, Any]) -> None:
        if self._write_failed:
            note = {
                "kind": "journal_dropped",
                "vehicle_id": self.vehicle_id,
                "boot_id": self.boot_id,
                "offset": self._offsets.take(),
                "time_ns": self._clock(),
                "count": self._write_failed,
                "cause": "write failed",
            }
            if not self._append(note):
                self._write_failed += 1
                return
            self._write_failed = 0
        if not self._append(rec):
            self._write_failed += 1

    def _append(self, rec: dict[str, Any]) -> bool:
        previous = self._chain.last
        line = self._chain.line(rec)
        try:
            if self._file is None or self._file_bytes + len(line) > self._segment_bytes:
                self._rotate()
            assert self._file is not None
            self._file.write(line)
        except OSError as e:
            if self._write_failed == 0:
                log.error("journal write failed (%s); dropping records until it works again", e)
            # The record is not in the file: the chain must go on from the last written one.
            self._chain.last = previous
            return False
        self._file_bytes += len(line)
        self.written += 1
        return True

    def _flush(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.flush()

    def _rotate(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._segment += 1
        suffix = ".jsonl.gz" if self._compress else ".jsonl"
        name = f"journal-{self._started_ns:020d}-{self.boot_id}-{self._segment:06d}{suffix}"
        path = self.directory / name
        # Kept open across calls on purpose: closed by _rotate and when the thread ends.
        self._file = gzip.open(path, "ab") if self._compress else path.open("ab")  # noqa: SIM115
        self._file_bytes = 0
        self._retain()

    def _retain(self) -> None:
        files = segment_files(self.directory)
        sizes = {p: p.stat().st_size for p in files}
        total = sum(sizes.values())
        for p in files[:-1]:  # never the one being written
            if total <= self._max_bytes:
                break
            total -= sizes[p]
            p.unlink(missing_ok=True)
            log.info("journal retention removed %s", p.name)
