"""The dataset's layout on any Hadoop filesystem, and how an ingest batch is
committed into it exactly once.

::

    DATASET/records/vehicle_id=V/date=D/<tag>-part-*.parquet   journal records (one row per event)
    DATASET/links/<tag>-part-*.parquet       runs of the hash chain
    (vehicle_middleware.telemetry_export.chain)
    DATASET/collector/<tag>-part-*.parquet   collect_gap / collect_restart records
    DATASET/_bad/<tag>-part-*.parquet        lines ingest could not take, with file and problem
    DATASET/_commits/<tag>.json              a committed batch and its counts
    DATASET/_staging/<tag>/                  a batch being written (never read by analyze)

Every batch of an ingest (the one batch of ``ingest``, or each micro-batch of
``ingest --stream``) has a ``tag`` that is the same when it is run again
(``batch``; ``s<checkpoint hash>-<batch id>``). Its files are written under
``_staging/<tag>/``; then ``_commits/<tag>.moving`` is written, each file is
renamed into its table under a name that starts with the tag, and
``_commits/<tag>.json`` says it is done. Run again (a micro-batch Spark
replays after a crash), a committed batch is skipped, and a batch that was
cut while moving first loses every file named after its tag. Readers list the
tables' directories: they see a batch's files once it is committed (or, for
the moment of the moves, part of it: the next run of the batch finishes it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from pyspark.sql import SparkSession

__all__ = [
    "BAD",
    "COLLECTOR",
    "COMMITS",
    "LINKS",
    "RECORDS",
    "TABLES",
    "Dataset",
]

RECORDS: Final = "records"
LINKS: Final = "links"
COLLECTOR: Final = "collector"
BAD: Final = "_bad"
TABLES: Final = (RECORDS, LINKS, COLLECTOR, BAD)
COMMITS: Final = "_commits"
"""Commit markers: ``DATASET/_commits/<tag>.json``."""
_STAGING: Final = "_staging"
_MOVERS: Final = 8


class Dataset:
    """A dataset directory (local path or Hadoop-filesystem URI), through the
    JVM's Hadoop ``FileSystem`` of ``spark`` (driver side)."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        sc = spark.sparkContext
        jvm = sc._jvm
        assert jvm is not None
        self._jvm = jvm
        self._path = jvm.org.apache.hadoop.fs.Path
        self._fs = self._path(root).getFileSystem(sc._jsc.hadoopConfiguration())
        self.root = root.rstrip("/")

    # -- paths -------------------------------------------------------------------------------

    def table(self, name: str) -> str:
        return f"{self.root}/{name}"

    def staging(self, tag: str, part: str = "") -> str:
        return f"{self.root}/{_STAGING}/{tag}" + (f"/{part}" if part else "")

    # -- filesystem --------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._path(path)))

    def delete(self, path: str) -> None:
        self._fs.delete(self._path(path), True)

    def has_data(self, path: str) -> bool:
        """Whether ``path`` holds a Parquet file with rows (at any depth)."""
        return any(size > 0 for _, size in self._files(path))

    def _files(self, path: str) -> Iterator[tuple[str, int]]:
        """``(path, size)`` of every ``*.parquet`` file under ``path``, at any depth."""
        p = self._path(path)
        if not self._fs.exists(p):
            return
        found = self._fs.listFiles(p, True)
        while found.hasNext():
            status = found.next()
            name = status.getPath().toString()
            if name.endswith(".parquet"):
                yield name, int(status.getLen())

    def _write(self, path: str, text: str) -> None:
        out = self._fs.create(self._path(path), True)
        try:
            out.write(bytearray(text.encode()))
        finally:
            out.close()

    def _read(self, path: str) -> str:
        stream = self._fs.open(self._path(path))
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def escape(self, value: str) -> str:
        """``value`` as Spark writes it in a partition directory's name."""
        utils = self._jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils
        return str(utils.escapePathName(value))

    def move_tree(self, src: str, dst: str) -> None:
        """Move the Parquet files under ``src`` to the same places under ``dst``."""
        self._move_files(src, dst, prefix="")

    def _move_files(self, src: str, dst: str, *, prefix: str) -> None:
        root = self._fs.makeQualified(self._path(src)).toUri().getPath().rstrip("/")
        moves: dict[str, list[tuple[str, str]]] = {}
        for name, _ in self._files(src):
            folder, _, base = self._path(name).toUri().getPath()[len(root) + 1 :].rpartition("/")
            target = dst + (f"/{folder}" if folder else "")
            moves.setdefault(target, []).append((name, f"{target}/{prefix}{base}"))

        def move(target: str) -> None:
            self._fs.mkdirs(self._path(target))
            for name, to in moves[target]:
                if not self._fs.rename(self._path(name), self._path(to)):
                    raise OSError(f"could not move {name} to {to}")

        # A few hundred files a batch at fleet scale: each rename is a round
        # trip to the JVM (and to the filesystem's name node), so several at once.
        with ThreadPoolExecutor(max_workers=_MOVERS) as pool:
            list(pool.map(move, moves))

    # -- the commit protocol -----------------------------------------------------------------

    def clear(self) -> None:
        """Remove every table, commit and staged batch (a batch ``ingest`` replaces
        the dataset)."""
        for name in (*TABLES, COMMITS, _STAGING):
            self.delete(self.table(name))

    def committed(self, tag: str) -> dict[str, Any] | None:
        """The counts of batch ``tag`` if it is committed, else None."""
        path = f"{self.table(COMMITS)}/{tag}.json"
        return json.loads(self._read(path)) if self.exists(path) else None

    def begin(self, tag: str) -> None:
        """Make batch ``tag`` start afresh: no staged files, and none of a cut
        commit of it in the tables."""
        moving = f"{self.table(COMMITS)}/{tag}.moving"
        if self.exists(moving):
            for name in TABLES:
                self._delete_named(self.table(name), f"{tag}-")
            self.delete(moving)
        self.delete(self.staging(tag))

    def _delete_named(self, path: str, prefix: str) -> None:
        for name, _ in list(self._files(path)):
            if name.rsplit("/", 1)[1].startswith(prefix):
                self.delete(name)

    def commit(self, tag: str, moves: dict[str, str], counts: dict[str, Any]) -> None:
        """Move the Parquet files of each staged directory (``moves``: staged
        path -> table name) into its table, keeping the directories below it
        (partitions) and prefixing each name with ``tag``; then mark ``tag``
        committed with ``counts``. Idempotent with :meth:`begin` before it."""
        commits = self.table(COMMITS)
        self._write(f"{commits}/{tag}.moving", "")
        for staged, table in moves.items():
            self._move_files(staged, self.table(table), prefix=f"{tag}-")
        self._write(f"{commits}/{tag}.json", json.dumps(counts, sort_keys=True))
        self.delete(f"{commits}/{tag}.moving")
        self.delete(self.staging(tag))
