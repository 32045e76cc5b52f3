"""What the journal keeps beside its segments so that no loss goes unreported.

A full disk must not hide what it cost. Two small files help:

- :class:`Reserve`: ``.journal-reserve``, a few KiB written at start and
  removed at stop only if writes have been failing, to free the room for the
  last ``journal_dropped`` count and the ``stop`` record.
- :class:`LossMarker`: ``.journal-state``, a fixed-size file allocated at
  start and then overwritten in place (no new blocks, so it works on a full
  disk). The writer keeps in it what has not reached the segments yet: write
  failures no record reports, and records accepted but not yet written. If
  the process dies (kill -9, power), the next boot reads it and reports those
  records in its own journal (a ``journal_dropped`` with ``lost_boot_id``).
  It also holds the last record written (offset and hash) and whether that
  was the ``stop``: where the boot ended, which the next boot's ``start``
  names and ``journal verify`` checks (:mod:`boot_chain`).

Both names start with a dot, so segment globs and Hadoop readers skip them.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

from vehicle_middleware.contract.journal.chain import OFFSET_MOD
from vehicle_middleware.contract.journal.segments import last_offset, segment_boot, segment_files

__all__ = ["LOCK_NAME", "MARKER_NAME", "RESERVE_NAME", "LossMarker", "MarkerState", "Reserve"]

LOCK_NAME: Final = ".journal-lock"
"""Held (flock) by the process writing the directory; holds its pid."""
RESERVE_NAME: Final = ".journal-reserve"
MARKER_NAME: Final = ".journal-state"
_MARKER_BYTES: Final = 1024


class Reserve:
    """A ballast file whose removal frees room for the last records."""

    def __init__(self, directory: Path, size: int = 64 * 1024) -> None:
        self.path = directory / RESERVE_NAME
        self._size = size

    def make(self) -> bool:
        """Create the reserve (if missing). False if the disk has no room for it."""
        try:
            if self.path.exists() and self.path.stat().st_size >= self._size:
                return True
            with self.path.open("wb") as fh:
                fh.write(b"\0" * self._size)
                fh.flush()
                os.fsync(fh.fileno())
            return True
        except OSError:
            with contextlib.suppress(OSError):
                self.path.unlink()
            return False

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()


@dataclass(frozen=True, slots=True)
class MarkerState:
    """What one boot had not written when it last updated the marker."""

    boot_id: str
    next_offset: int
    """The offset the writer would give its next record."""
    pending: int
    """Records accepted but not yet given an offset (buffered, or dropped by a full buffer)."""
    unreported: int
    """Records that failed to reach disk and that no written record reports yet."""
    stopped: bool
    """The boot wrote its ``stop`` record: nothing for the next boot to report."""
    last_offset: int | None = None
    """The offset of the last record it wrote to disk (None: none yet)."""
    last_hash: str = ""
    """That record's hash: the next boot's ``start`` names it, and ``journal verify``
    holds the segments to it (a removed tail shows)."""
    ended: bool = False
    """The process stopped cleanly, whether or not its ``stop`` record reached disk (a
    full disk): what it had not written failed to reach disk, it did not crash."""
    chained: bool = False
    """``last_offset`` and ``last_hash`` are known (a marker of a writer that keeps
    them): None then means the boot wrote no record."""

    def unwritten(self, directory: Path) -> int:
        """Records this boot had taken but not written, by this state and the last
        segment it left in ``directory`` (for a boot that ended without ``stop``)."""
        files = [p for p in segment_files(directory) if segment_boot(p) == self.boot_id]
        last = last_offset(files)
        if last is None:
            return self.unreported + self.pending
        expected_last = (self.next_offset - 1 + self.pending) % OFFSET_MOD
        tail = (expected_last - last) % OFFSET_MOD
        return tail if tail < OFFSET_MOD // 2 else 0


class LossMarker:
    """The preallocated ``.journal-state`` file, rewritten in place."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / MARKER_NAME
        self._fd: int | None = None

    def read(self) -> MarkerState | None:
        """The state a previous boot left, or None (no file, or unreadable)."""
        try:
            raw = self.path.read_bytes().rstrip(b"\0 \n")
            data = json.loads(raw)
            return MarkerState(
                boot_id=str(data["boot_id"]),
                next_offset=int(data["next_offset"]),
                pending=int(data["pending"]),
                unreported=int(data["unreported"]),
                stopped=bool(data["stopped"]),
                last_offset=None if data.get("last_offset") is None else int(data["last_offset"]),
                last_hash=str(data.get("last_hash", "")),
                ended=bool(data.get("ended", False)),
                chained="last_offset" in data,
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def open(self) -> bool:
        """Allocate the file at its full size. False if that is impossible (a full disk)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return False
        try:
            if os.fstat(fd).st_size < _MARKER_BYTES:
                os.pwrite(fd, b" " * _MARKER_BYTES, 0)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def write(self, state: MarkerState) -> bool:
        """Overwrite the marker in place. False if it could not be written."""
        if self._fd is None:
            return False
        fields = asdict(state)
        del fields["chained"]  # what reading it back tells
        body = json.dumps(fields, separators=(",", ":")).encode()
        try:
            os.pwrite(self._fd, body.ljust(_MARKER_BYTES), 0)
        except OSError:
            return False
        return True

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
