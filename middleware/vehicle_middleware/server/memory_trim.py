"""Memory a surge of calls used goes back to the system when the surge ends.

After a flood of apps (streams admitted by the event budget, then all closed)
the middleware's RSS stays near its peak, though what Python still holds is
small (the rate limits' buckets, themselves bounded). The rest is the C
allocator's high-water mark: glibc keeps freed memory for reuse (a second flood
does not grow it), and ``malloc_trim`` hands much of it back. What remains is
gRPC's and the interpreter's own pools.

So a flood can pin at most what the limits admit at once (streams: ``max_apps``
and the event budget; requests: the rate limits) while it lasts, and
:class:`MemoryTrim` returns the allocator's share when the number of calls in
progress falls from a peak: the trim runs in a worker thread, off the event loop.
On a C library without ``malloc_trim`` (musl, macOS) it does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable

__all__ = ["MemoryTrim", "malloc_trim"]

log = logging.getLogger(__name__)


def malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


class MemoryTrim:
    """Trims the allocator once the calls in progress fall to a quarter of a peak
    that was at least ``surge`` calls above it (a flood ended, not a steady load)."""

    def __init__(self, trim: Callable[[], object] | None, surge: int = 128) -> None:
        self._trim = trim
        self._surge = surge
        self._peak = 0
        self.running: asyncio.Future[object] | None = None
        """The trim in progress or last run (a test awaits it)."""
        self.trims = 0
        """Trims started (for tests and stats)."""

    def calls(self, count: int) -> None:
        """Told the number of calls in progress each time it changes."""
        if count > self._peak:
            self._peak = count
            return
        if self._peak - count < self._surge or count > self._peak // 4:
            return
        self._peak = count
        if self._trim is None or (self.running is not None and not self.running.done()):
            return
        self.trims += 1
        self.running = asyncio.get_running_loop().run_in_executor(None, self._trim)
