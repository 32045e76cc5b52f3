"""The hash chain, checked in two steps that never put a whole boot in one task.

The chain (``vehicle_middleware.contract.journal.chain``): each record's ``prev_hash`` is the
``hash`` of the record written before it in its boot (empty for the boot's
first), its ``hash`` is SHA-256 over its own bytes (``hash_ok``, checked by
:func:`vehicle_middleware.telemetry_export.transforms.parse_lines`). A record's predecessor is the
previous record present in offset order (wrapping offsets, ordered from the
boot's first record): across a gap in the offsets (records the journal lost),
``prev_hash`` is still the hash of the last record written.

1. :func:`link_runs`, at ingest, per batch: the records are cut into *runs* of
   consecutive offsets within aligned chunks of ``2^CHUNK_BITS`` offsets
   (``offset >> CHUNK_BITS``: the wrap at 2^32 is a chunk edge, so offsets
   order without a wrap inside a chunk). A window over (vehicle, boot, chunk)
   ordered by offset checks every link inside a run: there the predecessor is
   the record one offset before, in the same run, in this batch. A boot of
   10M records is ten chunks, spread over the tasks. One row per run (the
   dataset's ``links`` table) keeps what the next step needs: its first
   record (offset, ``prev_hash``, ``hash_ok``), its last (offset, ``hash``),
   the broken links inside it, and where the boot starts.
2. :func:`chain_facts`, at analysis, over every run of the dataset (a few per
   chunk, per gap and per ingest batch: small): per boot, the runs in
   position order, each run's first link against the run before it (however
   the records were split between files, landing batches or micro-batches),
   the boot's first record against retention's ``journal_trimmed`` records
   (read from the records by the analysis' aggregation) and the collector's
   ``collect_gap`` records, and the offsets missing between runs.

The result is exactly that of one ordered pass over each boot's records
(``link_ok = hash_ok and prev_hash == previous record's hash``, the hashes
compared by 128-bit digests: see :func:`link_runs`), with identical records
counted once. Two different records at one offset (an
edited copy landed beside the original) both stay and break the chain there.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from vehicle_middleware.contract.journal.chain import OFFSET_MOD

__all__ = [
    "BOOT",
    "CHAIN",
    "CHUNK_BITS",
    "LINK_COLUMNS",
    "chain_facts",
    "link_runs",
    "offset_of",
    "pos_and_offset",
]

BOOT: Final = ["vehicle_id", "boot_id"]
CHUNK_BITS: Final = 20
"""Runs never cross a multiple of 2^20 offsets: at most 1M records sorted per window partition."""
LINK_COLUMNS: Final = [
    "vehicle_id",
    "boot_id",
    "kind",
    "offset",
    "time_ns",
    "hash",
    "prev_hash",
    "hash_ok",
]
"""What :func:`link_runs` reads of each journal line."""
_CARRIED: Final = ("offset", "_h1", "_h2", "_p1", "_p2", "_chain_start", "hash_ok", "_start")
"""The per-line columns :func:`link_runs` carries through its window steps."""
CHAIN: Final = [
    "broken_links",
    "first_broken",
    "chain_start",
    "missing_records",
    "unchecked_links",
    "first_offset",
]
"""The columns of :func:`chain_facts`, after the boot."""

_SIGN: Final = -(2**63)
_LOW_32: Final = OFFSET_MOD - 1


def pos_and_offset(pos: Column, offset: Column) -> Column:
    """A record's ``pos`` and ``offset`` (both 0 .. 2^32 - 1) in one ``long`` that
    orders as ``pos`` does, so one ``min`` finds the first of several records
    of a boot and its offset. The sign bit is flipped so that a ``pos`` of
    2^31 or more still orders after smaller ones."""
    return F.shiftleft(pos, 32).bitwiseOR(offset).bitwiseXOR(F.lit(_SIGN))


def offset_of(pos_and_offset: Column) -> Column:
    """The ``offset`` of :func:`pos_and_offset`."""
    return pos_and_offset.bitwiseXOR(F.lit(_SIGN)).bitwiseAND(F.lit(_LOW_32))


def _digest(column: str, prefix: str) -> list[Column]:
    """A 32-byte hash as two 64-bit hashes of it with different seeds
    (``prefix1``, ``prefix2``): equal for equal hashes; for two different
    ones, equal by chance once in 2^128."""
    return [F.xxhash64(F.lit(i), column).alias(f"{prefix}{i}") for i in (1, 2)]


def link_runs(lines: DataFrame) -> DataFrame:
    """Journal lines (:data:`LINK_COLUMNS`, one row per line: the first event of
    a batch record) -> one row per run of consecutive offsets.

    A run lies within one aligned chunk of ``2^CHUNK_BITS`` offsets of one
    boot. Copies of a line (same offset and hash, and the same ``hash_ok``: a
    file landed twice) count once: ``duplicates`` says how many were left
    out. Columns: ``vehicle_id``, ``boot_id``; ``first_offset`` ..
    ``last_offset`` (no wrap; ``records`` is their distance + 1); the first
    record's ``prev_hash`` (``first_prev1``, ``first_prev2``: see below),
    whether it is empty (``first_starts_chain``) and ``first_hash_ok`` (its
    link is :func:`chain_facts`' to judge); the last record's hash
    (``last1``, ``last2``);
    ``broken``: links inside the run that do not hold (the record's hash fails
    or its ``prev_hash`` is not the hash of the record one offset before) and
    the first of them, ``first_broken_offset``; ``start_offset`` (the run's
    ``start`` record, if any); ``first_time_ns``/``first_time_offset``: the
    run's earliest record by (``time_ns``, offset) if it holds one of its
    chunk's earliest (null otherwise).

    Hashes are compared as 128-bit digests of them (two 64-bit ``xxhash64``
    of the 32 bytes, with different seeds): equal for equal hashes; two
    different hashes pass for equal once in 2^128, and a record edited to
    pass needs as many SHA-256 trials. (``hash_ok`` is checked on all 256
    bits; the records keep their whole hashes.)

    Cost: one shuffle of these columns by (vehicle, boot, chunk) and one
    window over each chunk in offset order, which keeps only the rows where
    something happens (a run's ends, a broken link, a copy, a start, the
    chunk's earliest time: a few per run) for the aggregation.
    """
    # The hashes travel and compare as 128-bit digests (two 64-bit hashes of
    # each, with different seeds): half the bytes, and no byte array copied
    # per comparison.
    chunked = lines.select(
        *BOOT,
        F.shiftright("offset", CHUNK_BITS).alias("_chunk"),
        "offset",
        *_digest("hash", "_h"),
        *_digest("prev_hash", "_p"),
        (F.length("prev_hash") == 0).alias("_chain_start"),
        "hash_ok",
        (F.col("kind") == "start").alias("_start"),
        "time_ns",
    )
    w = Window.partitionBy(*BOOT, "_chunk").orderBy("offset", "_h1", "_h2", "hash_ok")
    whole = w.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    # One window operator: the rows before and after, the rank (copies share
    # theirs) and the chunk's earliest time.
    framed = chunked.select(
        *BOOT,
        "_chunk",
        *_CARRIED,
        F.lag("offset").over(w).alias("_lag_offset"),
        F.lag("_h1").over(w).alias("_lag_h1"),
        F.lag("_h2").over(w).alias("_lag_h2"),
        F.lag("hash_ok").over(w).alias("_lag_ok"),
        F.lead("offset").over(w).alias("_lead_offset"),
        F.dense_rank().over(w).alias("_rank"),
        "time_ns",
        F.min("time_ns").over(whole).alias("_min_time"),
    )
    offset, lag_offset, lead_offset = F.col("offset"), F.col("_lag_offset"), F.col("_lead_offset")
    same_hash = (F.col("_lag_h1") == F.col("_h1")) & (F.col("_lag_h2") == F.col("_h2"))
    dup = F.coalesce(
        (lag_offset == offset) & same_hash & (F.col("_lag_ok") == F.col("hash_ok")), F.lit(False)
    )
    head = ~dup & (lag_offset.isNull() | (offset != lag_offset + 1))
    tail = lead_offset.isNull() | (lead_offset != offset + 1)
    linked = (F.col("_p1") == F.col("_lag_h1")) & (F.col("_p2") == F.col("_lag_h2"))
    inner_broken = ~head & ~dup & (~F.col("hash_ok") | ~linked)
    # Consecutive offsets keep offset - rank: a run (a copy has its line's rank).
    # Two different records at one offset (both stay) start a run each; should
    # that make two runs share a number, the run has two heads and counts as
    # broken (the chain is broken there anyway).
    marked = framed.select(
        *BOOT,
        "_chunk",
        (offset - F.col("_rank")).alias("_run"),
        *_CARRIED,
        "time_ns",
        (F.col("time_ns") == F.col("_min_time")).alias("_earliest"),
        head.alias("_head"),
        tail.alias("_tail"),
        dup.alias("_dup"),
        inner_broken.alias("_broken"),
    )
    kept = marked.where(
        F.col("_head")
        | F.col("_tail")
        | F.col("_dup")
        | F.col("_broken")
        | F.col("_start")
        | F.col("_earliest")
    )
    return (
        kept.groupBy(*BOOT, "_chunk", "_run")
        .agg(
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
            F.count(F.when(F.col("_dup"), 1)).alias("duplicates"),
            *(
                F.min_by(c, F.when(F.col("_head"), offset)).alias(name)
                for c, name in [
                    ("_p1", "first_prev1"),
                    ("_p2", "first_prev2"),
                    ("_chain_start", "first_starts_chain"),
                    ("hash_ok", "first_hash_ok"),
                ]
            ),
            F.max_by("_h1", F.when(F.col("_tail"), offset)).alias("last1"),
            F.max_by("_h2", F.when(F.col("_tail"), offset)).alias("last2"),
            (
                F.count(F.when(F.col("_broken"), 1))
                + F.greatest(F.count(F.when(F.col("_head"), 1)) - 1, F.lit(0))
            ).alias("broken"),
            F.min(F.when(F.col("_broken"), offset)).alias("first_broken_offset"),
            F.min(F.when(F.col("_start"), offset)).alias("start_offset"),
            F.min(F.when(F.col("_earliest"), F.struct("time_ns", "offset"))).alias("_first_time"),
        )
        .select(
            *BOOT,
            "first_offset",
            "last_offset",
            (F.col("last_offset") - F.col("first_offset") + 1).alias("records"),
            "duplicates",
            "first_prev1",
            "first_prev2",
            "first_starts_chain",
            "first_hash_ok",
            "last1",
            "last2",
            "broken",
            "first_broken_offset",
            "start_offset",
            F.col("_first_time.time_ns").alias("first_time_ns"),
            F.col("_first_time.offset").alias("first_time_offset"),
        )
    )


def _first_offset() -> Column:
    """Per boot (over a window of its runs), the offset its positions count
    from: its ``start`` record's, else (retention or the collector lost it)
    its earliest record's by (``time_ns``, offset)."""
    boot = Window.partitionBy(*BOOT)
    return F.coalesce(
        F.min("start_offset").over(boot),
        F.min_by(
            "first_time_offset",
            # Null (skipped) for a run that holds none of its chunk's earliest.
            F.when(
                F.col("first_time_ns").isNotNull(),
                F.struct("first_time_ns", "first_time_offset"),
            ),
        ).over(boot),
    )


def _in_range(offset: Column, start: Column, end: Column) -> Column:
    """Whether ``offset`` is in the wrapping range ``start`` .. ``end`` (inclusive)."""
    mod = F.lit(OFFSET_MOD)
    return F.pmod(offset - start, mod) <= F.pmod(end - start, mod)


def chain_facts(runs: DataFrame, trims: DataFrame, gaps: DataFrame | None = None) -> DataFrame:
    """Per boot, its chain from every run of :func:`link_runs` (any number of
    ingest batches) and the collector's gaps.

    ``trims``: ``vehicle_id`` (the writer's), ``boot_id`` (the trimmed boot),
    ``kept_offset`` and ``kept_prev_hash`` of the ``journal_trimmed`` records.
    ``gaps``: ``vehicle_id``, ``boot_id``, ``from_offset``, ``to_offset`` of
    ``collect_gap`` records (offsets written but not collected; distinct).

    Each run's first record is linked to the last record of the run before it
    in position order (``pos``: the offset's distance from the boot's first:
    its ``start`` record's, else its earliest record's by time). That link
    holds if its hash checks and its ``prev_hash`` is that record's hash;
    when a collector gap lies between the two, it cannot be checked
    (``unchecked_links``) and is not broken. The boot's first record has an
    empty ``prev_hash`` (the chain's start), or its start is gone
    (``chain_start``): ``trimmed`` when a ``journal_trimmed`` record of the
    vehicle names that boot, that offset and that ``prev_hash``; ``not
    collected`` when a collector gap holds the offset before it; else
    ``missing`` (and that link is broken).

    Columns: ``broken_links``; ``first_broken`` (the first broken record by
    position, as :func:`pos_and_offset`); ``chain_start``;
    ``missing_records``: offsets between records that are not there and no
    collector gap holds (lost by the journal); ``unchecked_links``;
    ``first_offset``. Small inputs (runs, trims and gaps are few): one sort of
    the runs by boot and position, two broadcast joins, one aggregation.
    """
    mod = F.lit(OFFSET_MOD)
    placed = runs.withColumn("_first", _first_offset()).select(
        *BOOT,
        "_first",
        "first_offset",
        "first_prev1",
        "first_prev2",
        "first_starts_chain",
        "first_hash_ok",
        "last1",
        "last2",
        "broken",
        "first_broken_offset",
        F.pmod(F.col("first_offset") - F.col("_first"), mod).alias("_pos"),
        F.pmod(F.col("last_offset") - F.col("_first"), mod).alias("_last_pos"),
    )
    w = Window.partitionBy(*BOOT).orderBy("_pos", "_last_pos", "last1", "last2")
    heads = placed.select(
        "*",
        F.lag("last1").over(w).alias("_prev1"),
        F.lag("last2").over(w).alias("_prev2"),
        F.lag("_last_pos").over(w).alias("_prev_pos"),
    )
    # A trim record accepts the prev_hash at the trimmed boot's first offset.
    accepts = trims.select(
        F.col("vehicle_id").alias("_tv"),
        F.col("boot_id").alias("_tb"),
        F.col("kept_offset").alias("_to"),
        *_digest("kept_prev_hash", "_th"),
        F.lit(True).alias("_accepted"),
    ).distinct()
    heads = heads.join(
        F.broadcast(accepts),
        (F.col("vehicle_id") == F.col("_tv"))
        & (F.col("boot_id") == F.col("_tb"))
        & (F.col("_first") == F.col("_to"))
        & (F.col("first_prev1") == F.col("_th1"))
        & (F.col("first_prev2") == F.col("_th2")),
        "left",
    )
    heads = _with_gap_cover(heads, gaps)
    covered, gap_before = F.col("_covered"), F.col("_gap_before")
    has_prev = F.col("_prev_pos").isNotNull()
    late_start = ~has_prev & (F.col("_pos") == 0) & ~F.col("first_starts_chain")
    accepted = F.coalesce(F.col("_accepted"), F.lit(False))
    linked = (F.col("first_prev1") == F.col("_prev1")) & (F.col("first_prev2") == F.col("_prev2"))
    head_broken = ~F.col("first_hash_ok") | F.when(has_prev, ~linked & (covered == 0)).otherwise(
        late_start & ~accepted & ~gap_before
    )
    start = F.when(
        late_start,
        F.when(accepted, F.lit("trimmed"))
        .when(gap_before, F.lit("not collected"))
        .otherwise(F.lit("missing")),
    )
    between = F.col("_pos") - F.col("_prev_pos") - 1
    missing = F.when(has_prev, F.greatest(between - covered, F.lit(0))).otherwise(0)
    inner_pos = F.pmod(F.col("first_broken_offset") - F.col("_first"), mod)
    unchecked = has_prev & (covered > 0) | late_start & gap_before
    return heads.groupBy(*BOOT).agg(
        (F.sum("broken") + F.count(F.when(head_broken, 1))).alias("broken_links"),
        F.least(
            F.min(F.when(head_broken, pos_and_offset(F.col("_pos"), F.col("first_offset")))),
            F.min(pos_and_offset(inner_pos, F.col("first_broken_offset"))),
        ).alias("first_broken"),
        F.max(start).alias("chain_start"),
        F.sum(missing).cast("long").alias("missing_records"),
        F.count(F.when(unchecked, 1)).alias("unchecked_links"),
        F.first("_first").alias("first_offset"),
    )


def _with_gap_cover(heads: DataFrame, gaps: DataFrame | None) -> DataFrame:
    """``heads`` with ``_covered``: the offsets between the run before and this
    one that a collector gap holds, and ``_gap_before``: whether a gap holds
    the offset just before this run's first record. (A boot's gaps are few:
    an array, joined by boot.)"""
    if gaps is None:
        return heads.withColumns({"_covered": F.lit(0).cast("long"), "_gap_before": F.lit(False)})
    per_boot = gaps.groupBy(F.col("vehicle_id").alias("_gv"), F.col("boot_id").alias("_gb")).agg(
        F.collect_list(F.struct("from_offset", "to_offset")).alias("_gaps")
    )
    joined = heads.join(
        F.broadcast(per_boot),
        (F.col("vehicle_id") == F.col("_gv")) & (F.col("boot_id") == F.col("_gb")),
        "left",
    )
    mod = F.lit(OFFSET_MOD)
    first, lo, hi = F.col("_first"), F.col("_prev_pos") + 1, F.col("_pos") - 1

    def overlap(acc: Column, g: Column) -> Column:
        # The gap in positions: from its first offset's, as long as it is.
        g_from = F.pmod(g["from_offset"] - first, mod)
        g_to = g_from + F.pmod(g["to_offset"] - g["from_offset"], mod)
        return acc + F.greatest(F.least(g_to, hi) - F.greatest(g_from, lo) + 1, F.lit(0))

    def before(g: Column) -> Column:
        at = F.pmod(F.col("first_offset") - 1, mod)
        return _in_range(at, g["from_offset"], g["to_offset"])

    return joined.withColumns(
        {
            "_covered": F.coalesce(
                F.aggregate(F.col("_gaps"), F.lit(0).cast("long"), overlap), F.lit(0)
            ),
            "_gap_before": F.coalesce(F.exists(F.col("_gaps"), before), F.lit(False)),
        }
    ).drop("_gv", "_gb", "_gaps")
