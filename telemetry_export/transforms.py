"""Pure transforms: DataFrame in, DataFrame out, explicit parameters, no I/O.

Every finding is computed per vehicle and boot (a boot is one middleware
process: ``boot_id``), then per app / key / queue where it applies.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from telemetry_export.schema import HASH_PREFIX_LEN, RECORD, REQUIRED

__all__ = [
    "bad_lines",
    "boot_integrity",
    "boots",
    "drop_rates",
    "good_records",
    "order_in_boot",
    "parse_lines",
    "seq_gaps",
    "seq_reconciliation",
    "stale_intervals",
    "threshold_for",
]

OFFSET_MOD = 2**32
BOOT = ["vehicle_id", "boot_id"]
ANALYSED = [
    "vehicle_id",
    "boot_id",
    "kind",
    "offset",
    "time_ns",
    "hash",
    "prev_hash",
    "hash_ok",
    "app",
    "key",
    "key_id",
    "queue",
    "seq",
    "count",
]
"""The columns the analysis reads; the rest stay in the dataset for people."""
DROP_KINDS = ["evicted", "lost"]


def parse_lines(lines: DataFrame) -> DataFrame:
    """Journal lines (``value``, ``source``) -> one row per line, parsed once.

    A good line becomes its record's columns with ``hash_ok`` (its hash checks
    over its own bytes) and ``date`` (UTC, from ``time_ns``); ``problem`` is
    null. A line that is not JSON, or lacks a required field, keeps ``value``
    and ``source`` and says its ``problem``. Split them with
    :func:`good_records` and :func:`bad_lines`.
    """
    parsed = lines.select(F.from_json("value", RECORD).alias("r"), "value", "source")
    present = [F.col(f"r.{c}").isNotNull() for c in REQUIRED]
    all_missing = ~present[0]
    for p in present[1:]:
        all_missing = all_missing & ~p
    complete = present[0]
    for p in present[1:]:
        complete = complete & p
    problem = F.when(F.col("r").isNull() | all_missing, F.lit("not a JSON record")).when(
        ~complete, F.lit("missing a required field")
    )
    body = F.concat(F.lit("{"), F.expr(f"substring(value, {HASH_PREFIX_LEN + 1}, 2147483647)"))
    # Hashes are kept as 32 bytes, not 64 hex characters: they dominate the
    # row size otherwise, and do not compress.
    fields = [c for c in RECORD.fieldNames() if c not in ("hash", "prev_hash")]
    return parsed.select(
        *(F.col(f"r.{c}").alias(c) for c in fields),
        F.unhex("r.hash").alias("hash"),
        F.unhex("r.prev_hash").alias("prev_hash"),
        (F.sha2(body, 256) == F.col("r.hash")).alias("hash_ok"),
        F.to_date(F.timestamp_micros(F.floor(F.col("r.time_ns") / 1000))).alias("date"),
        problem.alias("problem"),
        "value",
        "source",
    )


def good_records(parsed: DataFrame) -> DataFrame:
    """The records of :func:`parse_lines`' output, without the line itself."""
    return parsed.where(F.col("problem").isNull()).drop("problem", "value", "source")


def bad_lines(parsed: DataFrame) -> DataFrame:
    """The lines :func:`parse_lines` could not take, with where they came from and why."""
    return parsed.where(F.col("problem").isNotNull()).select("source", "value", "problem")


def order_in_boot(records: DataFrame) -> DataFrame:
    """Add ``pos``: the record's place in its boot, from its wrapping offset.

    Offsets start at a random value and wrap modulo 2^32; ``pos`` is the offset
    relative to the boot's ``start`` record (or, if retention removed it, its
    earliest record), so it orders without a wrap.
    """
    records = records.select(*ANALYSED)
    first = records.groupBy(*BOOT).agg(
        F.coalesce(
            F.min(F.when(F.col("kind") == "start", F.col("offset"))),
            F.min_by("offset", "time_ns"),
        ).alias("_first")
    )
    return (
        records.join(F.broadcast(first), BOOT)
        .withColumn("pos", F.pmod(F.col("offset") - F.col("_first"), F.lit(OFFSET_MOD)))
        .drop("_first")
    )


def boot_integrity(ordered: DataFrame) -> DataFrame:
    """Per boot, in one pass over the records in offset order:

    * ``records``, and the hash chain: ``broken_links`` and where the first
      is (``first_broken_offset``). A link holds when the record's hash checks
      over its bytes and its ``prev_hash`` is the previous record's ``hash``
      (empty for a boot's first record).
    * ``missing_records``: records missing by offset (lost, or dropped by the
      journal's buffer), and ``reported_dropped``: what ``journal_dropped``
      records said.
    """
    w = Window.partitionBy(*BOOT).orderBy("pos")
    prev = F.lag("hash").over(w)
    gap = F.lead("pos").over(w) - F.col("pos") - 1
    linked = ordered.select(
        *BOOT,
        "pos",
        "offset",
        "kind",
        "count",
        (
            ~F.col("hash_ok")
            | F.when(prev.isNull(), (F.col("pos") == 0) & (F.length("prev_hash") != 0)).otherwise(
                F.col("prev_hash") != prev
            )
        ).alias("broken"),
        F.when(gap > 0, gap).otherwise(0).alias("gap"),
    )
    return linked.groupBy(*BOOT).agg(
        F.count(F.lit(1)).alias("records"),
        F.sum(F.col("broken").cast("long")).alias("broken_links"),
        F.min_by("offset", F.when(F.col("broken"), F.col("pos"))).alias("first_broken_offset"),
        F.sum("gap").alias("missing_records"),
        F.sum(F.when(F.col("kind") == "journal_dropped", F.col("count")).otherwise(0)).alias(
            "reported_dropped"
        ),
    )


def boots(records: DataFrame) -> DataFrame:
    """Per vehicle, its boots in time order: a restart is every boot after the first.

    ``clean_stop`` is whether the boot ended with a ``stop`` record (else it
    crashed, or its journal is cut).
    """
    per_boot = records.groupBy(*BOOT).agg(
        F.min("time_ns").alias("first_ns"),
        F.max("time_ns").alias("last_ns"),
        F.count(F.lit(1)).alias("records"),
        F.max((F.col("kind") == "stop").cast("int")).cast("boolean").alias("clean_stop"),
    )
    w = Window.partitionBy("vehicle_id").orderBy("first_ns")
    return per_boot.withColumn("boot_number", F.row_number().over(w)).withColumn(
        "restart", F.col("boot_number") > 1
    )


def seq_gaps(records: DataFrame) -> DataFrame:
    """Jumps in ``seq`` between consecutive deliveries of one (app, key).

    One row per gap: ``from_seq``..``to_seq`` were never delivered.
    """
    delivered = records.where(F.col("kind") == "delivered").select(
        *BOOT, "app", "key_id", "queue", "seq", "time_ns"
    )
    w = Window.partitionBy(*BOOT, "app", "key_id").orderBy("seq")
    prev = F.lag("seq").over(w)
    return (
        delivered.withColumn("_prev", F.coalesce(prev, F.lit(0)))
        .where(F.col("seq") > F.col("_prev") + 1)
        .select(
            *BOOT,
            "app",
            "key_id",
            "queue",
            (F.col("_prev") + 1).alias("from_seq"),
            (F.col("seq") - 1).alias("to_seq"),
            (F.col("seq") - F.col("_prev") - 1).alias("missing"),
            "time_ns",
        )
    )


def seq_reconciliation(records: DataFrame, gaps: DataFrame) -> DataFrame:
    """Per (boot, app, key): missing seqs, those a drop record explains, and the rest.

    A dropped seq is never delivered, so every drop before the key's last
    delivered seq lies in a gap: ``explained`` counts them (distinct), with two
    aggregations instead of listing every missing seq. ``unexplained`` > 0
    means a gap no ``evicted``/``lost`` record accounts for: the journal or the
    middleware is wrong. ``drops_after_last_delivery`` are drops after the last
    delivered event (no gap shows them yet).
    """
    keys = [*BOOT, "app", "key_id"]
    last = (
        records.where(F.col("kind") == "delivered")
        .groupBy(*keys)
        .agg(F.max("seq").alias("last_delivered"))
    )
    drops = (
        records.where(F.col("kind").isin(DROP_KINDS))
        .groupBy(*keys, "seq")
        .agg(F.lit(1).alias("_one"))
        .join(last, keys, "left")
        .groupBy(*keys)
        .agg(
            F.sum((F.col("seq") < F.col("last_delivered")).cast("long")).alias("explained"),
            F.sum(
                (F.col("last_delivered").isNull() | (F.col("seq") > F.col("last_delivered"))).cast(
                    "long"
                )
            ).alias("drops_after_last_delivery"),
        )
    )
    missing = gaps.groupBy(*keys).agg(F.sum("missing").alias("missing"))
    return (
        missing.join(drops, keys, "full")
        .fillna(0, ["missing", "explained", "drops_after_last_delivery"])
        .withColumn("unexplained", F.col("missing") - F.col("explained"))
        .select(*keys, "missing", "explained", "drops_after_last_delivery", "unexplained")
    )


def threshold_for(key: Column, thresholds: Sequence[tuple[str, int]], default_ns: int) -> Column:
    """The staleness threshold of a key: the longest matching prefix's, else the default."""
    expr = F.lit(default_ns)
    for prefix, ns in sorted(thresholds, key=lambda t: len(t[0])):  # longest wins: applied last
        expr = F.when(key.startswith(prefix), F.lit(ns)).otherwise(expr)
    return expr


def stale_intervals(
    records: DataFrame, *, thresholds: Sequence[tuple[str, int]], default_ns: int
) -> DataFrame:
    """Intervals between consecutive writes (``publish``) of a key, and between
    consecutive deliveries of a key to an app, longer than the key's threshold.
    """
    names = (
        records.where(F.col("kind") == "publish")
        .groupBy(*BOOT, "key_id")
        .agg(F.first("key").alias("key"))
    )
    events = records.where(F.col("kind").isin("publish", "delivered")).select(
        *BOOT,
        F.when(F.col("kind") == "publish", F.lit("write")).otherwise("delivery").alias("what"),
        F.when(F.col("kind") == "delivered", F.col("app")).alias("app"),
        "key_id",
        "time_ns",
    )
    w = Window.partitionBy(*BOOT, "what", "app", "key_id").orderBy("time_ns")
    intervals = events.withColumn("interval_ns", F.col("time_ns") - F.lag("time_ns").over(w))
    # Names joined after the shortest threshold has filtered nearly everything out.
    shortest = min([default_ns, *(ns for _, ns in thresholds)])
    limit = threshold_for(F.coalesce(F.col("key"), F.lit("")), thresholds, default_ns)
    return (
        intervals.where(F.col("interval_ns") > shortest)
        .join(names, [*BOOT, "key_id"], "left")
        .withColumn("threshold_ns", limit)
        .where(F.col("interval_ns") > F.col("threshold_ns"))
        .select(
            *BOOT,
            "what",
            "app",
            "key",
            "key_id",
            (F.col("time_ns") - F.col("interval_ns")).alias("from_ns"),
            F.col("time_ns").alias("to_ns"),
            "interval_ns",
            "threshold_ns",
        )
    )


def drop_rates(records: DataFrame, *, window_ns: int) -> DataFrame:
    """Per (vehicle, app, queue, time window): deliveries, drops and the drop rate."""
    events = records.where(F.col("kind").isin(["delivered", *DROP_KINDS])).select(
        "vehicle_id",
        "app",
        "queue",
        (F.floor(F.col("time_ns") / window_ns) * window_ns).alias("window_start_ns"),
        (F.col("kind") != "delivered").cast("long").alias("dropped"),
    )
    return (
        events.groupBy("vehicle_id", "app", "queue", "window_start_ns")
        .agg(F.count(F.lit(1)).alias("events"), F.sum("dropped").alias("dropped"))
        .withColumn("drop_rate", F.col("dropped") / F.col("events"))
    )
