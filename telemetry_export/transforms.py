"""Pure transforms: DataFrame in, DataFrame out, explicit parameters, no I/O.

Every finding is computed per vehicle and boot (a boot is one middleware
process: ``boot_id``), then per app / key / queue where it applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from telemetry_export.schema import HASH_PREFIX_LEN, RECORD, REQUIRED

__all__ = [
    "activity",
    "bad_lines",
    "boot_facts",
    "boot_integrity",
    "boots",
    "drop_rates",
    "drops_over_time",
    "good_records",
    "link_records",
    "parse_lines",
    "seq_gaps",
    "seq_reconciliation",
    "stale_bucket_ns",
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
    "pos",
    "time_ns",
    "link_ok",
    "missing_before",
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
    null. A line that is not JSON, lacks a required field or has an ``offset``
    outside 0 .. 2^32 - 1 keeps ``value`` and ``source`` and says its
    ``problem``. Split them with :func:`good_records` and :func:`bad_lines`.
    """
    parsed = lines.select(F.from_json("value", RECORD).alias("r"), "value", "source")
    present = [F.col(f"r.{c}").isNotNull() for c in REQUIRED]
    all_missing = ~present[0]
    for p in present[1:]:
        all_missing = all_missing & ~p
    complete = present[0]
    for p in present[1:]:
        complete = complete & p
    offset = F.col("r.offset")
    problem = (
        F.when(F.col("r").isNull() | all_missing, F.lit("not a JSON record"))
        .when(~complete, F.lit("missing a required field"))
        .when((offset < 0) | (offset >= OFFSET_MOD), F.lit("offset is not a uint32"))
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


def link_records(records: DataFrame) -> DataFrame:
    """Add where each record sits in its boot's chain (ingest time, one sort per boot).

    * ``pos``: the record's place in its boot, from its wrapping offset. Offsets
      start at a random value and wrap modulo 2^32; ``pos`` is the offset
      relative to the boot's ``start`` record (or, if retention removed it, its
      earliest record), so it orders without a wrap.
    * ``link_ok``: the record's hash checks over its bytes and its ``prev_hash``
      is the previous record's ``hash`` (empty for a boot's first record; a
      boot whose ``start`` is gone cannot check its first link).
    * ``missing_before``: offsets missing between the previous record and this
      one (lost, or dropped by the journal's buffer).

    A boot's records must all be in ``records`` (one ingest), whatever their
    dates: the window is over the boot, not over a file.
    """
    first = records.groupBy(*BOOT).agg(
        F.coalesce(
            F.min(F.when(F.col("kind") == "start", F.col("offset"))),
            F.min_by("offset", "time_ns"),
        ).alias("_first")
    )
    w = Window.partitionBy(*BOOT).orderBy("pos")
    prev_hash, prev_pos = F.lag("hash").over(w), F.lag("pos").over(w)
    broken = ~F.col("hash_ok") | F.when(
        prev_hash.isNull(), (F.col("pos") == 0) & (F.length("prev_hash") != 0)
    ).otherwise(F.col("prev_hash") != prev_hash)
    missing = F.coalesce(F.col("pos") - prev_pos - 1, F.lit(0))
    return (
        records.join(F.broadcast(first), BOOT)
        .withColumn("pos", F.pmod(F.col("offset") - F.col("_first"), F.lit(OFFSET_MOD)))
        .drop("_first")
        .withColumn("link_ok", ~broken)
        .withColumn("missing_before", F.greatest(missing, F.lit(0)))
    )


def stale_bucket_ns(thresholds: Sequence[tuple[str, int]], default_ns: int) -> int:
    """The time bucket :func:`activity` needs for :func:`stale_intervals`: the
    shortest staleness threshold (at least 1 ns)."""
    return max(1, min([default_ns, *(ns for _, ns in thresholds)]))


def _floor_to(time_ns: Column, width_ns: int) -> Column:
    """``time_ns`` rounded down to a multiple of ``width_ns``, in exact integers.

    One remainder for the times a journal has (not before 1970); ``pmod``, two
    remainders, only for a negative one. ``pmod`` for all cost 10% of
    :func:`activity` at 9M records."""
    width = F.lit(width_ns)
    return time_ns - F.when(time_ns >= 0, time_ns % width).otherwise(F.pmod(time_ns, width))


_BLOCK_BITS: Final = 6
_BLOCK: Final = 1 << _BLOCK_BITS
"""Seqs are counted in blocks of 64: one bit per seq of a ``long``."""


def _bit(index: Column) -> Column:
    """A ``long`` with bit ``index`` (0-63) set."""
    return F.call_function("shiftleft", F.lit(1).cast("long"), index.cast("int"))


def _bits_below(index: Column) -> Column:
    """A ``long`` with bits 0 .. ``index`` - 1 set (``index`` 0-63): bit
    operations only, so no overflow."""
    return F.bitwise_not(F.call_function("shiftleft", F.lit(-1).cast("long"), index.cast("int")))


def _highest_bit(bits: Column) -> Column:
    """The index of the highest bit set in a ``long``, or -1 if none."""
    return F.when(bits == 0, F.lit(-1)).otherwise(F.length(F.bin(bits)) - 1)


_SIGN: Final = -(2**63)
_LOW_32: Final = OFFSET_MOD - 1


def _pos_and_offset(pos: Column, offset: Column) -> Column:
    """A record's ``pos`` and ``offset`` (both 0 .. 2^32 - 1) in one ``long`` that
    orders as ``pos`` does, so one ``min`` finds the first record of a boot and
    its offset (cheaper than ``min_by``). The sign bit is flipped so that a
    ``pos`` of 2^31 or more still orders after smaller ones."""
    return F.shiftleft(pos, 32).bitwiseOR(offset).bitwiseXOR(F.lit(_SIGN))


def _offset_of(pos_and_offset: Column) -> Column:
    """The ``offset`` of :func:`_pos_and_offset`."""
    return pos_and_offset.bitwiseXOR(F.lit(_SIGN)).bitwiseAND(F.lit(_LOW_32))


def activity(linked: DataFrame, *, bucket_ns: int, window_ns: int) -> DataFrame:
    """One aggregation of every record (:func:`link_records`' output), no sort:
    the per-boot, staleness and drop-rate findings all read its few rows.

    A row per boot, ``kind`` and, where the kind has them: ``app``, ``key_id``
    and ``queue`` (deliveries and drops), ``key_id`` and ``key`` (writes),
    the ``bucket`` of ``bucket_ns`` (writes and deliveries: see
    :func:`stale_intervals`; it must not exceed the shortest threshold) and the
    drop-rate window ``window_start_ns`` (deliveries and drops), and the
    ``seq_block`` of 64 seqs (deliveries and drops). Each row holds ``n``
    records, ``first_ns`` and ``last_ns``, ``seqs``: which seqs of its block
    it has (a 64-bit set), and for the boot's
    integrity: ``broken`` links, the first broken one (``first_broken``: see
    :func:`_pos_and_offset`), ``missing`` records by offset and the sum of the
    records' ``count`` (what ``journal_dropped`` records ``reported``).
    """
    kind = F.col("kind")
    event = kind.isin(["delivered", *DROP_KINDS])
    broken = ~F.col("link_ok")
    return linked.groupBy(
        *BOOT,
        "kind",
        F.when(event, F.col("app")).alias("app"),
        F.when(event | (kind == "publish"), F.col("key_id")).alias("key_id"),
        F.when(kind == "publish", F.col("key")).alias("key"),
        F.when(event, F.col("queue")).alias("queue"),
        F.when(kind.isin("publish", "delivered"), _floor_to(F.col("time_ns"), bucket_ns)).alias(
            "bucket"
        ),
        F.when(event, _floor_to(F.col("time_ns"), window_ns)).alias("window_start_ns"),
        F.when(event, F.shiftright("seq", _BLOCK_BITS)).alias("seq_block"),
    ).agg(
        F.count(F.lit(1)).alias("n"),
        F.min("time_ns").alias("first_ns"),
        F.max("time_ns").alias("last_ns"),
        F.sum(broken.cast("long")).alias("broken"),
        F.min(F.when(broken, _pos_and_offset(F.col("pos"), F.col("offset")))).alias("first_broken"),
        F.sum("missing_before").alias("missing"),
        # ``kind`` is a key: only journal_dropped's rows are read (boot_facts).
        F.sum("count").alias("reported"),
        F.bit_or(F.when(event, _bit(F.col("seq").bitwiseAND(F.lit(_BLOCK - 1))))).alias("seqs"),
    )


def boot_facts(activity: DataFrame) -> DataFrame:
    """Per boot, from :func:`activity`: what :func:`boot_integrity`,
    :func:`boots` and the summary need.

    ``records``; the hash chain's ``broken_links`` and where the first is
    (``first_broken_offset``); ``missing_records`` by offset and
    ``reported_dropped`` (what ``journal_dropped`` records said); ``first_ns``,
    ``last_ns`` and ``clean_stop``; ``delivered`` and ``dropped`` events.
    """
    kind = F.col("kind")
    return activity.groupBy(*BOOT).agg(
        F.sum("n").alias("records"),
        F.sum("broken").alias("broken_links"),
        _offset_of(F.min("first_broken")).alias("first_broken_offset"),
        F.sum("missing").alias("missing_records"),
        F.coalesce(F.sum(F.when(kind == "journal_dropped", F.col("reported"))), F.lit(0)).alias(
            "reported_dropped"
        ),
        F.min("first_ns").alias("first_ns"),
        F.max("last_ns").alias("last_ns"),
        F.max((kind == "stop").cast("int")).cast("boolean").alias("clean_stop"),
        F.coalesce(F.sum(F.when(kind == "delivered", F.col("n"))), F.lit(0)).alias("delivered"),
        F.coalesce(F.sum(F.when(kind.isin(DROP_KINDS), F.col("n"))), F.lit(0)).alias("dropped"),
    )


def boot_integrity(facts: DataFrame) -> DataFrame:
    """Per boot (from :func:`boot_facts`): ``records``, the hash chain
    (``broken_links``, ``first_broken_offset``: a link holds when the record's
    hash checks over its bytes and its ``prev_hash`` is the previous record's
    ``hash``), ``missing_records`` by offset (lost, or dropped by the journal's
    buffer) and ``reported_dropped`` (what ``journal_dropped`` records said).
    """
    return facts.select(
        *BOOT,
        "records",
        "broken_links",
        "first_broken_offset",
        "missing_records",
        "reported_dropped",
    )


def boots(facts: DataFrame) -> DataFrame:
    """Per vehicle, its boots in time order (from :func:`boot_facts`): a restart
    is every boot after the first.

    ``clean_stop`` is whether the boot ended with a ``stop`` record (else it
    crashed, or its journal is cut).
    """
    w = Window.partitionBy("vehicle_id").orderBy("first_ns")
    return (
        facts.select(*BOOT, "first_ns", "last_ns", "records", "clean_stop")
        .withColumn("boot_number", F.row_number().over(w))
        .withColumn("restart", F.col("boot_number") > 1)
    )


def seq_gaps(activity: DataFrame) -> DataFrame:
    """Jumps in ``seq`` between consecutive deliveries of one (app, key), from
    :func:`activity`'s sets of seqs per block of 64: no delivery is sorted.

    One row per gap: ``from_seq``..``to_seq`` were never delivered (``missing``
    of them); ``queue`` and ``window_start_ns`` are those of the delivery after
    the gap (its drop-rate window: :func:`activity` keeps no finer time).

    A seq ``s`` ends a gap when it was delivered and ``s - 1`` was not (seq 0
    counts as delivered: a key whose first delivery is seq 4 lost 1..3). Per
    block, with ``D`` its delivered set, the ends are ``D & ~(D << 1 | carry)``,
    the carry being whether the block before ended with a delivery. A gap runs
    back to the highest delivered seq below its end: in the block, or the last
    of an earlier block. A seq delivered twice ends a gap once, in its first
    row (by window, then queue).
    """
    keys = [*BOOT, "app", "key_id"]
    block, seqs = F.col("seq_block"), F.col("seqs")
    rows = activity.where(F.col("kind") == "delivered").select(
        *keys, "queue", "window_start_ns", "seq_block", "seqs"
    )
    in_block = Window.partitionBy(*keys, "seq_block").orderBy("window_start_ns", "queue")
    # Seq 0 does not exist, but counts as delivered: block 0 always holds it.
    zero = F.when(block == 0, F.lit(1)).otherwise(F.lit(0)).cast("long")
    rows = rows.select(
        *keys,
        "queue",
        "window_start_ns",
        "seq_block",
        "seqs",
        (
            F.bit_or(seqs)
            .over(in_block.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing))
            .bitwiseOR(zero)
        ).alias("_all"),
        F.coalesce(
            F.bit_or(seqs).over(in_block.rowsBetween(Window.unboundedPreceding, -1)),
            F.lit(0).cast("long"),
        ).alias("_earlier"),
        (block * _BLOCK + _highest_bit(seqs)).alias("_top"),
    )
    before = (
        Window.partitionBy(*keys).orderBy("seq_block").rangeBetween(Window.unboundedPreceding, -1)
    )
    rows = rows.withColumn("_prev_top", F.coalesce(F.max("_top").over(before), F.lit(0)))
    carry = (
        F.when((block == 0) | (F.col("_prev_top") == block * _BLOCK - 1), F.lit(1))
        .otherwise(F.lit(0))
        .cast("long")
    )
    starts_after_gap = F.col("_all").bitwiseAND(
        F.bitwise_not(F.call_function("shiftleft", F.col("_all"), F.lit(1)).bitwiseOR(carry))
    )
    ends = starts_after_gap.bitwiseAND(seqs).bitwiseAND(F.bitwise_not(F.col("_earlier")))
    bit = F.col("_bit")
    below = F.col("_all").bitwiseAND(_bits_below(bit))
    prev_delivered = F.when(below != 0, block * _BLOCK + _highest_bit(below)).otherwise(
        F.col("_prev_top")
    )
    return (
        rows.withColumn("_ends", ends)
        .where(F.col("_ends") != 0)
        .withColumn(
            "_bit",
            F.explode(F.array(*(F.lit(i) for i in range(_BLOCK)))),
        )
        .where(F.call_function("shiftright", F.col("_ends"), bit).bitwiseAND(F.lit(1)) == 1)
        .select(
            *keys,
            "queue",
            (prev_delivered + 1).alias("from_seq"),
            (block * _BLOCK + bit - 1).alias("to_seq"),
            (block * _BLOCK + bit - prev_delivered - 1).alias("missing"),
            "window_start_ns",
        )
    )


def seq_reconciliation(activity: DataFrame) -> DataFrame:
    """Per (boot, app, key), from :func:`activity`'s sets of seqs per block of
    64: missing seqs, those a drop record explains, and the rest.

    Seqs count from 1, so ``missing`` (the sizes of the key's :func:`seq_gaps`
    added up) is the last delivered seq minus the distinct seqs delivered. A
    dropped seq is never delivered, so every drop before the key's last
    delivered seq lies in a gap: ``explained`` counts them (distinct).
    ``unexplained`` > 0 means a gap no ``evicted``/``lost`` record accounts
    for: the journal or the middleware is wrong. ``drops_after_last_delivery``
    are drops after the last delivered event (no gap shows them yet). No seq
    is listed: the sets are counted with bit operations.
    """
    keys = [*BOOT, "app", "key_id"]
    delivered, dropped = F.col("_delivered"), F.col("_dropped")
    is_delivered = F.col("kind") == "delivered"
    blocks = (
        activity.where(F.col("kind").isin(["delivered", *DROP_KINDS]))
        .groupBy(*keys, "seq_block")
        .agg(
            F.coalesce(F.bit_or(F.when(is_delivered, F.col("seqs"))), F.lit(0)).alias("_delivered"),
            F.coalesce(F.bit_or(F.when(~is_delivered, F.col("seqs"))), F.lit(0)).alias("_dropped"),
        )
    )
    top = F.col("seq_block") * _BLOCK + _highest_bit(delivered)
    last = F.max(F.when(delivered != 0, top)).over(Window.partitionBy(*keys))
    # The seqs of this block before the key's last delivered seq, and that seq.
    block, last_block = F.col("seq_block"), F.shiftright("_last", _BLOCK_BITS)
    last_bit = F.col("_last").bitwiseAND(F.lit(_BLOCK - 1))
    before = (
        F.when(block < last_block, F.lit(-1))
        .when(block == last_block, _bits_below(last_bit))
        .otherwise(F.lit(0))
        .cast("long")
    )
    at_last = F.when(block == last_block, _bit(last_bit)).otherwise(F.lit(0)).cast("long")
    seq_0 = F.when(block == 0, _bit(F.lit(0))).otherwise(F.lit(0)).cast("long")
    counted = F.bitwise_not(seq_0)  # seq 0 does not exist
    return (
        blocks.withColumn("_last", last)
        .groupBy(*keys)
        .agg(
            F.max("_last").alias("_last"),
            F.sum(
                F.bit_count(delivered.bitwiseAND(before.bitwiseOR(at_last)).bitwiseAND(counted))
            ).alias("_distinct"),
            F.sum(F.bit_count(dropped.bitwiseAND(before))).alias("explained"),
            F.sum(F.bit_count(dropped.bitwiseAND(F.bitwise_not(before.bitwiseOR(at_last))))).alias(
                "drops_after_last_delivery"
            ),
            F.max((dropped != 0).cast("int")).alias("_drops"),
        )
        .withColumn("missing", F.coalesce(F.col("_last") - F.col("_distinct"), F.lit(0)))
        .where((F.col("missing") > 0) | (F.col("_drops") > 0))
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
    activity: DataFrame, *, thresholds: Sequence[tuple[str, int]], default_ns: int
) -> DataFrame:
    """Intervals between consecutive writes (``publish``) of a key, and between
    consecutive deliveries of a key to an app, longer than the key's threshold.

    Without ordering every event: :func:`activity` cut time into buckets no
    wider than the shortest threshold T (:func:`stale_bucket_ns`) and kept
    each bucket's first and last time. Two events of one bucket are less than
    T apart, so an interval longer than T runs from the last event of a bucket
    to the first of the next non-empty one: only buckets are ordered.
    """
    group = [*BOOT, "key_id", "what", "app"]
    spans = (
        activity.where(F.col("kind").isin("publish", "delivered"))
        .withColumn(
            "what", F.when(F.col("kind") == "publish", F.lit("write")).otherwise("delivery")
        )
        .groupBy(*group, "bucket")
        .agg(
            F.min("first_ns").alias("_first"),
            F.max("last_ns").alias("_last"),
            F.first("key", ignorenulls=True).alias("key"),
        )
    )
    # One window per (boot, key): writes and each app's deliveries in turn,
    # and the key's name (from its writes) for all of them.
    w = Window.partitionBy(*BOOT, "key_id").orderBy("what", "app", "bucket")
    same = (F.lag("what").over(w) == F.col("what")) & F.lag("app").over(w).eqNullSafe(F.col("app"))
    name = F.first("key", ignorenulls=True).over(
        w.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    )
    intervals = spans.select(
        *group,
        name.alias("key"),
        F.when(same, F.lag("_last").over(w)).alias("from_ns"),
        F.col("_first").alias("to_ns"),
    ).withColumn("interval_ns", F.col("to_ns") - F.col("from_ns"))
    limit = threshold_for(F.coalesce(F.col("key"), F.lit("")), thresholds, default_ns)
    return (
        intervals.withColumn("threshold_ns", limit)
        .where(F.col("interval_ns") > F.col("threshold_ns"))
        .select(
            *BOOT,
            "what",
            "app",
            "key",
            "key_id",
            "from_ns",
            "to_ns",
            "interval_ns",
            "threshold_ns",
        )
    )


def drop_rates(activity: DataFrame) -> DataFrame:
    """Per (vehicle, boot, app, queue, time window of :func:`activity`):
    deliveries, drops and the drop rate. An app's queues are those of one
    middleware process: a restart starts new ones."""
    return (
        activity.where(F.col("kind").isin(["delivered", *DROP_KINDS]))
        .groupBy(*BOOT, "app", "queue", "window_start_ns")
        .agg(
            F.sum("n").alias("events"),
            F.sum(F.when(F.col("kind") != "delivered", F.col("n")).otherwise(0)).alias("dropped"),
        )
        .withColumn("drop_rate", F.col("dropped") / F.col("events"))
    )


def drops_over_time(drop_rates: DataFrame) -> DataFrame:
    """The fleet's drops over time (from :func:`drop_rates`): per app, queue
    and time window, the events and drops of every vehicle added up."""
    return drop_rates.groupBy("app", "queue", "window_start_ns").agg(
        F.sum("events").alias("events"), F.sum("dropped").alias("dropped")
    )
