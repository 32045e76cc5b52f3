"""The journal directory's lock: one live middleware writes a directory.

Two middlewares writing one directory would report each other's live boot as
crashed and remove each other's segments. The writer takes an exclusive
``flock`` on ``.journal-lock`` (:data:`~vehicle_middleware.server.journal.reserve.LOCK_NAME`)
before it starts and writes its pid there, so that a second process is
refused with the holder named. The kernel drops the lock when the process
ends, however it ends: no stale lock outlives a crash.

A lock is held on a file, not a path: a directory removed while the
middleware runs (``rm -rf``) takes the lock's file with it, and a second
middleware would find the path free. So the writer asks :meth:`DirectoryLock.lost`
(one ``stat`` and one ``fstat``) a few times a second and before opening
each segment: the path's lock file must still be the one it holds. When it
is not, the writer takes the path again with :meth:`DirectoryLock.retake`
(a fresh directory and lock, or :class:`JournalInUseError` when another
middleware holds it already: then it writes nothing more there).
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

    def lost(self) -> str:
        """Why this process no longer holds the directory: its lock file was removed
        (with the directory) or is another file now; "" while it holds it (or holds
        nothing). Cheap: one ``stat`` and one ``fstat``."""
        if self._fd is None:
            return ""
        path = self.directory / LOCK_NAME
        try:
            on_path = os.stat(path)
        except FileNotFoundError:
            return f"the journal directory {self.directory} (or its {LOCK_NAME}) was removed"
        except OSError:
            return ""  # cannot tell (e.g. a transient I/O error): the writes will say
        held = os.fstat(self._fd)
        if (on_path.st_dev, on_path.st_ino) != (held.st_dev, held.st_ino):
            return (
                f"the journal directory {self.directory} was removed and made again "
                f"(its {LOCK_NAME} is another file)"
            )
        return ""

    def retake(self) -> None:
        """Take the directory again after :meth:`lost`: create it and lock its new lock
        file; the old lock (on a removed file) goes only once the new one is held.

        Raises:
            JournalInUseError: another live process holds the directory now.
            OSError: the directory cannot be created.
        """
        old, self._fd = self._fd, None
        try:
            self.acquire()
        except BaseException:
            self._fd = old
            raise
        if old is not None:
            os.close(old)
