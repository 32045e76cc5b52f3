"""The journal directory's lock: one live middleware writes a directory.

Two middlewares writing one directory would report each other's live boot as
crashed and remove each other's segments. The writer takes an exclusive
``flock`` on ``.journal-lock`` (:data:`~vehicle_middleware.server.journal.reserve.LOCK_NAME`)
before it starts and writes its pid there, so that a second process is
refused with the holder named. The kernel drops the lock when the process
ends, however it ends: no stale lock outlives a crash.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from vehicle_middleware.server.journal.reserve import LOCK_NAME

__all__ = ["DirectoryLock", "JournalInUseError"]


class JournalInUseError(RuntimeError):
    """Another live process writes the journal directory."""


class DirectoryLock:
    """The lock on one journal directory, held by this process or not."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd: int | None = None

    def acquire(self) -> None:
        """Create the directory and take it for this process (idempotent).

        Raises:
            JournalInUseError: another live process holds the directory.
        """
        if self._fd is not None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise JournalInUseError(
                f"journal directory {self.directory} is in use by another middleware "
                f"(pid {holder}): give each middleware its own --journal-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Give the directory up (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)  # releases the lock
            self._fd = None
