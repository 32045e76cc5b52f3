"""The segment being written, and its rotation to the next.

A boot writes numbered segment files (names:
:func:`vehicle_middleware.contract.journal.segments.segment_name`)
of about ``segment_bytes`` each. The writer thread appends one batch at a time
(one ``write`` per batch, the file unbuffered, so the result says exactly what
reached the file); when a batch would take the segment past its size the
writer rotates: closes it and opens the next, and retention
(:mod:`vehicle_middleware.server.journal.retention`) runs after each rotation.

A segment that cannot be opened (a full disk, a removed directory) is
retried, under the same number, at the next record; the failure is logged
once per episode. A batch that reaches the file only in part is cut back to
its last whole line (:meth:`SegmentFile.keep`), so the segment always ends on
a whole record.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vehicle_middleware.contract.journal.segments import segment_name

__all__ = ["SegmentFile", "open_unbuffered"]

log = logging.getLogger(__name__)


def open_unbuffered(path: Path) -> Any:
    """Open a segment for appending, unbuffered: one write per batch, whose result says
    exactly what reached the file."""
    return path.open("ab", buffering=0)


class SegmentFile:
    """The open segment of one boot: its file, its size, and the room left in it.

    ``opener`` opens a segment for appending (default :func:`open_unbuffered`);
    tests pass one that fails like a full disk.
    """

    def __init__(
        self,
        directory: Path,
        *,
        started_ns: int,
        boot_id: str,
        segment_bytes: int,
        compress: bool,
        opener: Callable[[Path], Any] | None = None,
    ) -> None:
        self.directory = directory
        self._started_ns = started_ns
        self._boot_id = boot_id
        self._segment_bytes = segment_bytes
        self._compress = compress
        self._opener = opener or open_unbuffered
        self.file: Any = None  # an unbuffered binary file
        self.size = 0
        """Bytes in the open segment."""
        self.room = 0
        """Bytes a batch may reach before the writer rotates: what the open segment has
        left of ``segment_bytes``; 0 while none is open (the next record opens one)."""
        self._number = 0
        self._open_failed = False

    def rotate(self) -> bool:
        """Close the open segment (if any) and open the next. False if it cannot be
        opened (logged once until one opens): no segment is open then."""
        if self.file is not None:
            with contextlib.suppress(OSError):
                self.file.close()
            self.file = None
            self.room = 0
        if not self._open_failed:
            self._number += 1
        path = self.directory / segment_name(
            self._started_ns, self._boot_id, self._number, compress=self._compress
        )
        try:
            self.file = self._opener(path)
        except OSError as e:
            if not self._open_failed:
                log.error("journal cannot open %s: %s", path.name, e)
            self._open_failed = True
            return False
        self._open_failed = False
        self.size = self.file.seek(0, os.SEEK_END)
        self.room = self._segment_bytes - self.size
        return True

    def append(self, payload: bytes) -> tuple[int, OSError | None]:
        """Write ``payload`` to the open segment; bytes written, and the error that
        stopped it. Follow with :meth:`keep`."""
        if self.file is None:
            return 0, OSError("no segment file is open")
        done = 0
        view = memoryview(payload)
        try:
            while done < len(payload):
                n = self.file.write(view[done:])
                if not n:
                    raise OSError("short write")
                done += n
        except OSError as e:
            return done, e
        return done, None

    def keep(self, written: int, appended: int) -> None:
        """Of the ``appended`` bytes of the last :meth:`append`, the first ``written``
        stay: the rest (a torn line, or a gzip member cut anywhere) is cut off, so the
        segment ends on a whole record."""
        if written < appended and self.file is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self.file.fileno(), self.size + written)
        self.size += written
        if self.file is not None:
            self.room = self._segment_bytes - self.size

    def close(self) -> None:
        """Close the open segment (at stop)."""
        if self.file is not None:
            with contextlib.suppress(OSError):
                self.file.close()
            self.file = None
            self.room = 0
