"""The landing area's storage: a local directory, or any filesystem ``pyarrow.fs``
opens by URI (HDFS among them), written a whole file at a time.

Which file goes where is the landing contract's
(:mod:`vehicle_middleware.contract.journal.landing`); this module only stores and renames the
bytes the collector hands it, so that a file appears whole or not at all
(:meth:`Landing.move`, :meth:`Landing.replace`).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from vehicle_middleware.telemetry_export.errors import CollectError

__all__ = ["Landing"]


class Landing:
    """A landing area: a local directory, or any filesystem ``pyarrow.fs`` opens by URI.

    Writes of whole files only; :meth:`replace` is atomic on a local disk and
    on HDFS a delete then a rename (a crash in between leaves the temporary
    file, which :meth:`read_replaced` reads).
    """

    def __init__(self, target: str) -> None:
        self.target = target
        self._fs: Any = None
        self._root: str
        if "://" not in target:
            self._root = str(Path(target).resolve())
            return
        try:
            from pyarrow import fs as pafs  # type: ignore[import-untyped]
        except ImportError:
            if target.startswith("file://"):
                self._root = target.removeprefix("file://")
                return
            raise CollectError(
                f"landing area {target!r}: a Hadoop-filesystem URI needs pyarrow "
                "(pip install pyarrow; for hdfs:// also a Hadoop client); or give a local path"
            ) from None
        try:
            self._fs, self._root = pafs.FileSystem.from_uri(target)
        except Exception as e:
            raise CollectError(f"landing area {target!r}: {e}") from e

    def _path(self, rel: str) -> str:
        return f"{self._root.rstrip('/')}/{rel}"

    def write(self, rel: str, data: bytes) -> None:
        """Write a whole file (its directory made), durable on a local disk."""
        path = self._path(rel)
        if self._fs is None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            return
        self._fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        with self._fs.open_output_stream(path) as out:
            out.write(data)

    def exists(self, rel: str) -> bool:
        path = self._path(rel)
        if self._fs is None:
            return Path(path).exists()
        from pyarrow import fs as pafs

        info = self._fs.get_file_info(path)
        return bool(info.type != pafs.FileType.NotFound)

    def read(self, rel: str) -> bytes | None:
        path = self._path(rel)
        try:
            if self._fs is None:
                return Path(path).read_bytes()
            with self._fs.open_input_stream(path) as fh:
                return bytes(fh.read())
        except FileNotFoundError:
            return None

    def move(self, src: str, dst: str) -> None:
        """Rename ``src`` to the new name ``dst`` (its directory made)."""
        if self._fs is None:
            Path(self._path(dst)).parent.mkdir(parents=True, exist_ok=True)
            os.rename(self._path(src), self._path(dst))
            return
        self._fs.create_dir(self._path(dst).rsplit("/", 1)[0], recursive=True)
        self._fs.move(self._path(src), self._path(dst))

    def replace(self, rel: str, data: bytes) -> None:
        """Write ``rel`` whole, replacing it: through ``rel + '.tmp'`` and a rename."""
        tmp = rel + ".tmp"
        self.write(tmp, data)
        if self._fs is None:
            os.replace(self._path(tmp), self._path(rel))
            return
        with contextlib.suppress(FileNotFoundError, OSError):
            self._fs.delete_file(self._path(rel))
        self._fs.move(self._path(tmp), self._path(rel))

    def read_replaced(self, rel: str) -> bytes | None:
        """What :meth:`replace` last wrote to ``rel``."""
        data = self.read(rel)
        return data if data is not None else self.read(rel + ".tmp")
