"""The ingest jobs: lines (journal directories or a landing area) -> the dataset.

``ingest`` (one batch, the dataset replaced) and ``ingest --stream`` (a
Structured Streaming query over a landing area, each micro-batch appended)
run the same :func:`ingest_batch`, committed exactly once by
:class:`vehicle_middleware.telemetry_export.dataset.Dataset`.

Per batch, two passes over the records, neither of which puts a boot in one
task:

1. The lines are parsed once (explicit schema, ``from_json``), each hash is
   checked in the JVM (``sha2`` over the line's own bytes), batch records are
   expanded, and every row is written where it was read, partitioned by
   table, vehicle and date: no shuffle of the records.
2. The staged records' chain columns (no payload) are read back, shuffled by
   vehicle, boot and chunk of 2^20 offsets, and cut into runs of consecutive
   offsets with every link inside checked
   (:func:`vehicle_middleware.telemetry_export.chain.link_runs`):
   one row per run into ``links``. ``analyze`` links the runs to each other.

Records are deduplicated on (vehicle_id, boot_id, offset, hash) and whether
the hash checks (an edited copy that kept its hash field stays beside the
original, and breaks the chain): copies within
a batch show in the runs (``duplicates``), copies of what an earlier batch
stored show as runs that overlap the stored ones; either way the batch's
staged records of those vehicles are written again without them before the
commit (rare: a file landed twice).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Sequence
from typing import Final

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from vehicle_middleware.contract.journal.records import HASH_FIELDS
from vehicle_middleware.telemetry_export import chain, extract, jvm, transforms
from vehicle_middleware.telemetry_export.dataset import BAD, COLLECTOR, LINKS, RECORDS, Dataset

__all__ = ["BATCH_TAG", "ingest", "ingest_batch", "ingest_stream", "stream_tag"]

log = logging.getLogger(__name__)

_RANDOM: Final = HASH_FIELDS  # random bytes: no dictionary, no statistics
WRITE_OPTIONS: Final = {
    **{f"parquet.enable.dictionary#{c}": "false" for c in (*_RANDOM, "offset", "time_ns")},
    **{f"parquet.column.statistics.enabled#{c}": "false" for c in _RANDOM},
}
"""Parquet settings of the records: no dictionary for columns whose values
(nearly) never repeat, and no min/max of random hashes (computing them is a
large part of the write, and nothing reads them)."""
BATCH_TAG: Final = "batch"
"""The tag of ``ingest``'s one batch."""
_KEY: Final = [*chain.BOOT, "offset", "hash", "hash_ok"]
"""A line's copies: the same record, and the same verdict on its bytes (an
edited copy that kept the hash field is not a copy: both stay, and break the
chain there)."""


def ingest(spark: SparkSession, inputs: Sequence[str], output: str) -> dict[str, int]:
    """Journal directories or landing areas -> a new dataset at ``output``
    (what was there is replaced); returns the counts of :func:`ingest_batch`."""
    ds = Dataset(spark, output)
    ds.clear()
    return ingest_batch(extract.read_lines(spark, inputs), ds, BATCH_TAG)


def stream_tag(spark: SparkSession, checkpoint: str) -> str:
    """The prefix of a streaming query's batch tags: its checkpoint, hashed
    (a query is its checkpoint: restarted from it, its batches keep their ids)."""
    sc = spark.sparkContext
    assert sc._jvm is not None
    path = sc._jvm.org.apache.hadoop.fs.Path(checkpoint)
    qualified = str(path.getFileSystem(sc._jsc.hadoopConfiguration()).makeQualified(path))
    return "s" + hashlib.sha256(qualified.encode()).hexdigest()[:10]


def ingest_stream(
    spark: SparkSession,
    landing: str,
    output: str,
    *,
    checkpoint: str | None = None,
    once: bool = False,
    every_s: float = 10.0,
    max_files_per_trigger: int | None = None,
) -> dict[str, int]:
    """A Structured Streaming query: the files of ``landing``, as they appear,
    into the dataset at ``output`` (appended), exactly once.

    Spark's file source and its ``checkpoint`` (default ``OUTPUT/_checkpoint``)
    give each file to one micro-batch, and replay a micro-batch whose commit
    was not recorded; :func:`ingest_batch` commits each micro-batch once
    (keyed on its id) and drops records the dataset already holds. ``once``:
    process what is there (``availableNow``: in as many micro-batches as
    ``max_files_per_trigger`` makes) and return; else a micro-batch every
    ``every_s`` seconds until interrupted (Ctrl-C, SIGTERM: the running
    micro-batch is cut, and done again at the next start). Returns the counts
    added up over the micro-batches, and ``batches``.
    """
    checkpoint = checkpoint or f"{output.rstrip('/')}/_checkpoint"
    prefix = stream_tag(spark, checkpoint)
    totals: Counter[str] = Counter()

    def each(batch: DataFrame, batch_id: int) -> None:
        counts = ingest_batch(
            batch, Dataset(batch.sparkSession, output), f"{prefix}-{batch_id:08d}"
        )
        totals.update(counts)
        totals["batches"] += 1
        log.info("ingest: micro-batch %d: %s", batch_id, counts)

    lines = extract.stream_lines(spark, landing, max_files_per_trigger=max_files_per_trigger)
    writer = lines.writeStream.foreachBatch(each).option("checkpointLocation", checkpoint)
    writer = (
        writer.trigger(availableNow=True)
        if once
        else writer.trigger(processingTime=f"{every_s} seconds")
    )
    query = writer.start()
    try:
        # In steps, so that a signal reaches Python between them.
        while not query.awaitTermination(1):
            pass
    finally:
        if query.isActive:
            query.stop()
    return {"batches": 0, "records": 0, "bad_lines": 0, "duplicates": 0, **totals}


def ingest_batch(lines: DataFrame, ds: Dataset, tag: str) -> dict[str, int]:
    """Lines (``value``, ``source``) -> the dataset ``ds``, committed once as batch
    ``tag`` (run again, a committed batch does nothing and returns its counts).

    Returns ``records`` (rows added to ``records``: events), ``lines``
    (journal lines among them), ``bad_lines``, ``collector_records`` and
    ``duplicates`` (journal lines left out: the dataset or the batch held
    them already).
    """
    done = ds.committed(tag)
    if done is not None:
        return {k: int(v) for k, v in done.items()}
    spark = lines.sparkSession
    started = time.perf_counter()
    ds.begin(tag)
    rows = ds.staging(tag, "rows")
    staged = transforms.staged(transforms.parse_lines(lines, fast=jvm.available(spark)))
    writer = staged.write.mode("overwrite").options(**WRITE_OPTIONS)
    writer.partitionBy("table", "vehicle_id", "date").parquet(rows)
    # Counted from the files' metadata (an Observation never completes inside
    # a streaming query's foreachBatch).
    n = Counter[str]()
    if ds.has_data(rows):
        n.update(
            {
                r.table: int(r["count"])
                for r in spark.read.parquet(rows).groupBy("table").count().collect()
            }
        )
    counts = {"records": n["records"], "lines": 0, "duplicates": 0}
    staged_at = time.perf_counter()
    moves: dict[str, str] = {}
    if n["records"]:
        staged_records = f"{rows}/table=records"
        lines_in, removed = _link(spark, ds, tag, staged_records)
        counts["lines"] = lines_in - removed[1]
        counts["records"] -= removed[0]
        counts["duplicates"] = removed[1]
        if ds.has_data(staged_records):
            moves[staged_records] = RECORDS
            moves[ds.staging(tag, "links")] = LINKS
    bad: list[DataFrame] = []
    collected = 0
    if n["collector"]:
        notes = transforms.collector_records(spark.read.parquet(f"{rows}/table=collector"))
        good = notes.where(F.col("problem").isNull()).drop("problem", "value")
        good.coalesce(1).write.parquet(ds.staging(tag, "collector"))
        collected = spark.read.parquet(ds.staging(tag, "collector")).count()
        moves[ds.staging(tag, "collector")] = COLLECTOR
        bad.append(notes.where(F.col("problem").isNotNull()).select("source", "value", "problem"))
    if n["bad"]:
        bad.append(transforms.staged_bad_lines(spark.read.parquet(f"{rows}/table=bad")))
    if bad:
        rejected = bad[0]
        for more in bad[1:]:
            rejected = rejected.unionByName(more)
        rejected.coalesce(1).write.parquet(ds.staging(tag, "bad"))
        moves[ds.staging(tag, "bad")] = BAD
    counts |= {"bad_lines": n["bad"] + n["collector"] - collected, "collector_records": collected}
    linked_at = time.perf_counter()
    ds.commit(tag, moves, counts)
    log.info(
        "ingest: batch %s: staged in %.2f s, linked in %.2f s, committed in %.2f s: %s",
        tag,
        staged_at - started,
        linked_at - staged_at,
        time.perf_counter() - linked_at,
        counts,
    )
    return counts


def _link(spark: SparkSession, ds: Dataset, tag: str, staged: str) -> tuple[int, tuple[int, int]]:
    """Cut the staged records into runs (``_staging/<tag>/links``); drop those
    the batch holds twice or the dataset holds already, and cut again. The
    journal lines staged, and the rows and lines dropped."""
    links = ds.staging(tag, "links")
    runs = _runs(spark, staged, links)
    total = runs.agg(
        F.sum("records") + F.sum("duplicates"),
        F.collect_set(F.when(F.col("duplicates") > 0, F.col("vehicle_id"))),
    ).first()
    assert total is not None
    lines_in, vehicles = int(total[0] or 0), set(total[1])
    stored = ds.table(LINKS)
    overlaps = _overlaps(runs, spark.read.parquet(stored)) if ds.has_data(stored) else None
    if overlaps is not None:
        vehicles |= {r.vehicle_id for r in overlaps.select("vehicle_id").distinct().collect()}
    if not vehicles:
        return lines_in, (0, 0)
    log.warning("ingest: batch %s holds records already stored or twice (%s)", tag, vehicles)
    removed = _dedup(spark, ds, tag, staged, sorted(vehicles), overlaps)
    if ds.has_data(staged):
        _runs(spark, staged, links)
    else:  # nothing new in the batch
        ds.delete(links)
    return lines_in, removed


def _runs(spark: SparkSession, staged: str, links: str) -> DataFrame:
    """Write the runs of the staged records to ``links``; read them back (few rows)."""
    records = spark.read.parquet(staged)
    first = F.coalesce(F.col("batch_index"), F.lit(0)) == 0
    runs = chain.link_runs(records.where(first).select(*chain.LINK_COLUMNS))
    # One file, but not one task: the runs are shuffled to it (a coalesce would
    # pull the window into a single task).
    runs.repartition(1).write.mode("overwrite").parquet(links)
    return spark.read.parquet(links)


def _overlaps(runs: DataFrame, stored: DataFrame) -> DataFrame:
    """The ranges of ``runs`` that overlap a stored run of the same boot."""
    s = stored.select(
        F.col("vehicle_id").alias("_v"),
        F.col("boot_id").alias("_b"),
        F.col("first_offset").alias("_lo"),
        F.col("last_offset").alias("_hi"),
    )
    return (
        runs.join(
            s,
            (F.col("vehicle_id") == F.col("_v"))
            & (F.col("boot_id") == F.col("_b"))
            & (F.col("first_offset") <= F.col("_hi"))
            & (F.col("_lo") <= F.col("last_offset")),
        )
        .select(
            *chain.BOOT,
            F.greatest("first_offset", "_lo").alias("lo"),
            F.least("last_offset", "_hi").alias("hi"),
        )
        .distinct()
    )


def _dedup(
    spark: SparkSession,
    ds: Dataset,
    tag: str,
    staged: str,
    vehicles: list[str],
    overlaps: DataFrame | None,
) -> tuple[int, int]:
    """Write the staged records of ``vehicles`` again without copies of a line
    (same vehicle, boot, offset and hash) in the batch or in the dataset's
    ``overlaps``; the rows and lines dropped."""
    mine = spark.read.parquet(staged).where(F.col("vehicle_id").isin(vehicles))
    kept = mine.dropDuplicates([*_KEY, "batch_index"])
    if overlaps is not None:
        stored = (
            spark.read.parquet(ds.table(RECORDS))
            .where(F.col("vehicle_id").isin(vehicles))
            .where(F.coalesce(F.col("batch_index"), F.lit(0)) == 0)
            .join(F.broadcast(overlaps), chain.BOOT)
            .where(F.col("offset").between(F.col("lo"), F.col("hi")))
            .select(*_KEY)
        )
        kept = kept.join(stored, _KEY, "left_anti")
    first = F.coalesce(F.col("batch_index"), F.lit(0)) == 0
    sizes = [F.count(F.lit(1)), F.count(F.when(first, 1))]
    before = mine.agg(*sizes).first()
    again = ds.staging(tag, "dedup")
    kept.write.mode("overwrite").partitionBy("vehicle_id", "date").parquet(again)
    after = spark.read.parquet(again).agg(*sizes).first() if ds.has_data(again) else (0, 0)
    assert before is not None
    assert after is not None
    for v in vehicles:
        ds.delete(f"{staged}/vehicle_id={ds.escape(v)}")
    ds.move_tree(again, staged)
    return int(before[0]) - int(after[0]), int(before[1]) - int(after[1])
