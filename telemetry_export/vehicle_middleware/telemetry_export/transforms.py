"""Pure transforms: DataFrame in, DataFrame out, explicit parameters, no I/O.

Every finding is computed per vehicle and boot (a boot is one middleware
process: ``boot_id``), then per app / key / queue where it applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from vehicle_middleware.contract.journal.chain import OFFSET_MOD
from vehicle_middleware.contract.journal.records import BATCH_FIELDS, Kind
from vehicle_middleware.telemetry_export import jvm
from vehicle_middleware.telemetry_export.chain import BOOT, offset_of
from vehicle_middleware.telemetry_export.schema import (
    COLLECTOR,
    COLLECTOR_KINDS,
    COLLECTOR_REQUIRED,
    HASH_FIELDS,
    HASH_PREFIX_LEN,
    RECORD,
    REQUIRED,
)

__all__ = [
    "ANALYSED",
    "BOOT",
    "DROP_KINDS",
    "OPTIONAL",
    "TABLES",
    "activity",
    "bad_lines",
    "boot_facts",
    "boot_integrity",
    "boots",
    "collector_records",
    "drop_rates",
    "drops_over_time",
    "expand_batches",
    "failure_intervals",
    "filtered_writes",
    "good_records",
    "key_names",
    "parse_lines",
    "seq_floors",
    "seq_gaps",
    "seq_reconciliation",
    "staged",
    "stale_bucket_ns",
    "stale_intervals",
    "threshold_for",
    "trims",
    "with_key_names",
]

OPTIONAL = (
    "trimmed_boot_id",
    "files",
    "bytes",
    "kept_offset",
    "kept_prev_hash",
    "lost_boot_id",
    "batch_index",
    "failure",
    "writes",
)
"""Columns of :data:`ANALYSED` a dataset ingested before they existed lacks:
read as nulls (no trimmed chains, every loss the writer's own)."""
ANALYSED = [
    "vehicle_id",
    "boot_id",
    "kind",
    "offset",
    "time_ns",
    "app",
    "key",
    "key_id",
    "queue",
    "seq",
    "count",
    *OPTIONAL,
]
"""The columns the analysis reads of the records; the rest stay in the dataset
for people. (The chain is read from the ``links`` table:
:mod:`vehicle_middleware.telemetry_export.chain`.)"""
DROP_KINDS: Final = [Kind.EVICTED.value, Kind.LOST.value]
"""The drop records the analysis counts as drops (not ``discarded``)."""
TABLES: Final = ("records", "collector", "bad")
"""Where :func:`parse_lines` sends each line (its ``table``)."""
_ASIDE: Final = "_aside"


def _all(columns: list[Column]) -> Column:
    out = columns[0]
    for c in columns[1:]:
        out = out & c
    return out


def parse_lines(lines: DataFrame, *, fast: bool = False) -> DataFrame:
    """Lines (``value``, ``source``) -> one row per line, parsed once, with the
    ``table`` it belongs to (:data:`TABLES`).

    ``records``: a journal record: its columns (hashes as 32 bytes) with
    ``hash_ok`` (its hash checks over its own bytes) and ``date`` (UTC, from
    ``time_ns``). ``collector``: a ``collect_gap`` or ``collect_restart``
    record (read by :func:`collector_records`). ``bad``: a line that is not
    JSON, lacks a required field or has an ``offset`` outside 0 .. 2^32 - 1;
    ``problem`` says which. ``value`` and ``source`` stay on every row.

    ``fast``: read the lines the middleware writes with the registered
    :data:`vehicle_middleware.telemetry_export.jvm.FUNCTION` (the same result, faster), and the
    others with ``from_json``.
    """
    body = F.concat(F.lit("{"), F.expr(f"substring(value, {HASH_PREFIX_LEN + 1}, 2147483647)"))
    checked = F.sha2(body, 256) == F.col("r.hash")
    record = F.from_json("value", RECORD)
    if fast:
        line = F.col("value").cast("binary")
        # The fast path's struct, else from_json's (the same for the lines it reads).
        record = F.coalesce(F.call_function(jvm.FUNCTION, line, F.lit(jvm.SPEC)), record)
        checked = F.call_function(jvm.HASH_CHECKS, line, F.col("r.hash"), F.lit(jvm.PREFIX))
    parsed = lines.select(record.alias("r"), "value", "source")
    parsed = parsed.select(
        *(F.col(f"r.{c}").alias(c) for c in RECORD.fieldNames()),
        checked.alias("_hash_ok"),
        F.col("r").isNull().alias("_none"),
        "value",
        "source",
    )
    present = [F.col(c).isNotNull() for c in REQUIRED]
    offset, kind = F.col("offset"), F.col("kind")
    problem = (
        F.when(F.col("_none") | ~_any(present), F.lit("not a JSON record"))
        .when(kind.isin(*COLLECTOR_KINDS), F.lit(None).cast("string"))
        .when(~_all(present), F.lit("missing a required field"))
        .when((offset < 0) | (offset >= OFFSET_MOD), F.lit("offset is not a uint32"))
    )
    # Hashes are kept as 32 bytes, not 64 hex characters: they dominate the
    # row size otherwise, and do not compress.
    fields = [c for c in RECORD.fieldNames() if c not in HASH_FIELDS]
    return parsed.select(
        *fields,
        *(F.unhex(c).alias(c) for c in HASH_FIELDS),
        F.col("_hash_ok").alias("hash_ok"),
        F.to_date(F.timestamp_micros(F.floor(F.col("time_ns") / 1000))).alias("date"),
        problem.alias("problem"),
        F.when(problem.isNotNull(), F.lit("bad"))
        .when(kind.isin(*COLLECTOR_KINDS), F.lit("collector"))
        .otherwise(F.lit("records"))
        .alias("table"),
        "value",
        "source",
    )


def _any(columns: list[Column]) -> Column:
    out = columns[0]
    for c in columns[1:]:
        out = out | c
    return out


def staged(parsed: DataFrame) -> DataFrame:
    """:func:`parse_lines`' rows as ingest stages them, in one write: the
    journal records expanded (:func:`expand_batches`) with their columns; the
    other tables' rows keep only their line and its file (``_aside``, null on
    records), read again by :func:`collector_records` and :func:`bad_lines`
    (a few rows). Partition by ``table``, ``vehicle_id`` and ``date``."""
    record = F.col("table") == "records"
    aside = F.when(~record, F.struct(F.col("value").alias("value"), "source"))
    return expand_batches(parsed.withColumn(_ASIDE, aside).drop("problem", "value", "source"))


def good_records(parsed: DataFrame) -> DataFrame:
    """The journal records of :func:`parse_lines`' output, without the line itself."""
    return parsed.where(F.col("table") == "records").drop("problem", "table", "value", "source")


def bad_lines(parsed: DataFrame) -> DataFrame:
    """The lines :func:`parse_lines` could not take, with where they came from and why."""
    return parsed.where(F.col("problem").isNotNull()).select("source", "value", "problem")


def _unstaged(staged_rows: DataFrame) -> DataFrame:
    """The lines :func:`staged` set aside, as :func:`parse_lines` takes them."""
    return staged_rows.select(F.col(f"{_ASIDE}.value").alias("value"), f"{_ASIDE}.source")


def staged_bad_lines(staged_rows: DataFrame) -> DataFrame:
    """:func:`bad_lines` of the rows :func:`staged` put in table ``bad``."""
    return bad_lines(parse_lines(_unstaged(staged_rows)))


def collector_records(staged_rows: DataFrame) -> DataFrame:
    """The collector's records among the rows :func:`staged` put in table
    ``collector`` (:data:`COLLECTOR` columns and ``source``), and the lines
    among them that lack a field their kind needs (``problem``, as
    :func:`bad_lines`), told apart by ``problem`` being null."""
    lines = _unstaged(staged_rows)
    parsed = lines.select(F.from_json("value", COLLECTOR).alias("c"), "value", "source")
    kind = F.col("c.kind")
    complete = F.lit(False)
    for k, required in COLLECTOR_REQUIRED.items():
        complete = complete | (kind == k) & _all([F.col(f"c.{c}").isNotNull() for c in required])
    return parsed.select(
        "c.*",
        "source",
        "value",
        F.when(~complete, F.lit("missing a required field")).alias("problem"),
    )


BATCH_ARRAYS: Final = sorted({a for _, arrays in BATCH_FIELDS.values() for a in arrays})
"""The array columns of batch records: dropped once :func:`expand_batches` has
read them, but for :data:`KEPT_ARRAYS`."""
KEPT_ARRAYS: Final = ("key_ids", "keys")
"""Batch arrays that other kinds carry too (``provider_gone``, ``provider_back``):
kept as columns, null on a batch's events (each holds its entry as a scalar)."""


def expand_batches(records: DataFrame) -> DataFrame:
    """Records with each batch record (``publish_batch``, ``delivered_batch``)
    replaced by one row per event, in the per-event kind's shape (``publish``,
    ``delivered``), so every finding reads journals of both formats alike.

    ``batch_index`` is the event's place in its batch (null for other
    records): the line's other columns (offset, hashes) are on every event,
    and the line is its event 0. A batch with no entries stays one row of its
    own kind. The batches' array columns are dropped, but those other kinds
    carry too (:data:`KEPT_ARRAYS`). A narrow transformation.
    """
    kind = F.col("kind")
    # Scalar column -> the array that holds it in a batch record.
    arrays = {s: a for _, fields in BATCH_FIELDS.values() for a, s in fields.items()}
    # Entry i: the i-th element of each array (null where an array is shorter
    # or absent), for i below the length of key_ids. arrays_zip, not a
    # transform: a lambda would take the whole operator out of generated code,
    # for every record.
    types = {f.name: f.dataType for f in records.schema.fields}
    zipped = F.arrays_zip(
        *(
            F.coalesce(F.col(a), F.array().cast(types[a])).alias(a)
            for a in sorted(set(arrays.values()))
        )
    )
    batch = kind.isin(list(BATCH_FIELDS)) & (F.size("key_ids") > 0)
    rows = records.select("*", F.posexplode_outer(F.when(batch, zipped)).alias("_i", "_e")).where(
        F.col("_i").isNull() | (F.col("_i") < F.size("key_ids"))
    )
    event = F.col("_i").isNotNull()
    event_kind = F.lit(None).cast("string")
    for batch_kind, (per_event, _) in BATCH_FIELDS.items():
        event_kind = F.when(kind == batch_kind, F.lit(per_event)).otherwise(event_kind)
    return rows.withColumns(
        {
            **{s: F.when(event, F.col("_e")[a]).otherwise(F.col(s)) for s, a in arrays.items()},
            **{a: F.when(~event, F.col(a)) for a in KEPT_ARRAYS},
            "kind": F.when(event, event_kind).otherwise(kind),
            "batch_index": F.col("_i"),
        }
    ).drop("_i", "_e", *(a for a in BATCH_ARRAYS if a not in KEPT_ARRAYS))


def stale_bucket_ns(thresholds: Sequence[tuple[str, int]], default_ns: int) -> int:
    """The time bucket :func:`activity` needs for :func:`stale_intervals`: the
    shortest staleness threshold (at least 1 ns)."""
    return max(1, min([default_ns, *(ns for _, ns in thresholds)]))


def _floor_to(time_ns: Column, width_ns: int) -> Column:
    """``time_ns`` rounded down to a multiple of ``width_ns``, in exact integers.

    One remainder for the times a journal has (not before 1970); ``pmod``, two
    remainders, only for a negative one: this runs for every record
    :func:`activity` reads."""
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


def activity(records: DataFrame, *, bucket_ns: int, window_ns: int) -> DataFrame:
    """One aggregation of every record (as ingest stores them), no sort: the
    per-boot, staleness and drop-rate findings all read its few rows.

    A row per boot, ``kind`` and, where the kind has them: ``app``, ``key_id``
    and ``queue`` (deliveries and drops), ``key_id`` and ``key`` (writes),
    the ``bucket`` of ``bucket_ns`` (writes and deliveries: see
    :func:`stale_intervals`; it must not exceed the shortest threshold) and the
    drop-rate window ``window_start_ns`` (deliveries and drops), and the
    ``seq_block`` of 64 seqs (deliveries and drops). Each row holds ``n``
    records, ``writes`` (deliveries and drops: the writes their events stood
    for, ``writes``, 1 where absent; a filtered subscription's event may
    stand for more), ``lines`` (journal lines: a batch record's events count once),
    ``first_ns`` and ``last_ns``, ``seqs``: which seqs of its block it has (a
    64-bit set), the sum of the records' ``count`` (what ``journal_dropped``
    records ``reported``) and, for ``journal_trimmed`` and
    ``journal_dropped`` records, the boot they are about (``about_boot``:
    ``trimmed_boot_id``, ``lost_boot_id``), the ``files`` and ``bytes``
    retention removed and where the trimmed chain starts (``kept_offset``,
    ``kept_prev_hash``: :func:`trims`). Key names (``key``) come with the kinds that carry
    them: writes, drops and ``key_added``. (The hash chain is not here:
    :func:`vehicle_middleware.telemetry_export.chain.chain_facts` reads the ``links`` table.)
    """
    kind = F.col("kind")
    event = kind.isin([Kind.DELIVERED, *DROP_KINDS])
    drop = kind.isin(DROP_KINDS)
    # Records not expanded (expand_batches) are one line each.
    batch_index = F.col("batch_index") if "batch_index" in records.columns else F.lit(None)
    stood_for = F.col("writes") if "writes" in records.columns else F.lit(None)
    return records.groupBy(
        *BOOT,
        "kind",
        F.when(event, F.col("app")).alias("app"),
        F.when(event | (kind == Kind.PUBLISH) | (kind == Kind.KEY_ADDED), F.col("key_id")).alias(
            "key_id"
        ),
        # Key names where records carry them (deliveries do not): a key_id
        # names one key in a boot, so this adds no rows.
        F.when((kind == Kind.PUBLISH) | drop | (kind == Kind.KEY_ADDED), F.col("key")).alias("key"),
        F.when(event, F.col("queue")).alias("queue"),
        F.when(
            kind.isin(Kind.PUBLISH, Kind.DELIVERED), _floor_to(F.col("time_ns"), bucket_ns)
        ).alias("bucket"),
        F.when(event, _floor_to(F.col("time_ns"), window_ns)).alias("window_start_ns"),
        F.when(event, F.shiftright("seq", _BLOCK_BITS)).alias("seq_block"),
        # The boot a journal_trimmed or journal_dropped record is about, when
        # not its writer's.
        F.when(kind == Kind.JOURNAL_TRIMMED, F.col("trimmed_boot_id"))
        .when(kind == Kind.JOURNAL_DROPPED, F.col("lost_boot_id"))
        .alias("about_boot"),
        # Where a trimmed boot's chain now starts (journal_trimmed only: few rows).
        F.when(kind == Kind.JOURNAL_TRIMMED, F.col("kept_offset")).alias("kept_offset"),
        F.when(kind == Kind.JOURNAL_TRIMMED, F.col("kept_prev_hash")).alias("kept_prev_hash"),
    ).agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.when(event, F.coalesce(stood_for, F.lit(1)))).alias("writes"),
        # Journal lines: a batch record's events count once (expand_batches).
        F.sum(F.when(F.coalesce(batch_index, F.lit(0)) == 0, 1).otherwise(0)).alias("lines"),
        F.min("time_ns").alias("first_ns"),
        F.max("time_ns").alias("last_ns"),
        # ``kind`` is a key: only journal_dropped's rows are read (boot_facts).
        F.sum("count").alias("reported"),
        F.bit_or(F.when(event, _bit(F.col("seq").bitwiseAND(F.lit(_BLOCK - 1))))).alias("seqs"),
        # journal_trimmed's (``kind`` is a key: only its rows are read).
        F.sum("files").alias("files"),
        F.sum("bytes").alias("bytes"),
    )


def trims(activity: DataFrame) -> DataFrame:
    """The ``journal_trimmed`` records of :func:`activity` that say where a
    trimmed boot's chain starts, as :func:`vehicle_middleware.telemetry_export.chain.chain_facts`
    takes them (``boot_id``: the trimmed boot)."""
    return activity.where(
        (F.col("kind") == Kind.JOURNAL_TRIMMED) & F.col("kept_offset").isNotNull()
    ).select("vehicle_id", F.col("about_boot").alias("boot_id"), "kept_offset", "kept_prev_hash")


def boot_facts(activity: DataFrame, chain: DataFrame, not_collected: DataFrame) -> DataFrame:
    """Per boot, from :func:`activity`, the boot's chain
    (:func:`vehicle_middleware.telemetry_export.chain.chain_facts`) and what the collector did
    not collect of it (``not_collected``: ``vehicle_id``, ``boot_id``,
    ``collect_gaps`` and ``not_collected``, offsets, from its distinct
    ``collect_gap`` records): what :func:`boot_integrity`, :func:`boots` and
    the summary need.

    ``records``; the hash chain: ``chain`` (``intact``; ``trimmed``: retention
    removed its start and a ``journal_trimmed`` record says so; ``not
    collected``: every link holds but some could not be checked, the
    collector lost records between them (or before the first);
    ``start missing``: records are gone before its first record on disk and no
    record says why; ``broken``: a link in the middle does not hold),
    ``broken_links`` and where the first is (``first_broken_offset``);
    ``trimmed_files`` and ``trimmed_bytes`` (what ``journal_trimmed`` records
    of any boot of the vehicle say retention removed of this boot);
    ``missing_records`` by offset (not those a collector gap holds),
    ``reported_dropped`` (what ``journal_dropped`` records said about this
    boot: its own without ``lost_boot_id``, and any boot's naming it) and
    ``unreported_lost`` (the offsets missing that no record reports);
    ``collect_gaps`` and ``not_collected``; ``first_ns``, ``last_ns`` and
    ``clean_stop``; ``delivered`` and ``dropped`` events.

    A boot that only trim, drop or collector records name (none of its
    records on disk) has a row with ``records`` 0 and no times.
    """
    kind = F.col("kind")
    own = (
        activity.groupBy(*BOOT)
        .agg(
            F.sum("lines").alias("records"),
            F.min("first_ns").alias("first_ns"),
            F.max("last_ns").alias("last_ns"),
            F.max((kind == Kind.STOP).cast("int")).cast("boolean").alias("clean_stop"),
            F.coalesce(F.sum(F.when(kind == Kind.DELIVERED, F.col("n"))), F.lit(0)).alias(
                "delivered"
            ),
            F.coalesce(F.sum(F.when(kind.isin(DROP_KINDS), F.col("n"))), F.lit(0)).alias("dropped"),
        )
        .join(chain, BOOT, "left")
    )
    # What journal_dropped and journal_trimmed records say, by the boot they
    # are about (a few rows per boot).
    about = F.when(kind == Kind.JOURNAL_TRIMMED, F.col("about_boot")).otherwise(
        F.coalesce(F.col("about_boot"), F.col("boot_id"))
    )
    said = (
        activity.where(kind.isin(Kind.JOURNAL_DROPPED, Kind.JOURNAL_TRIMMED))
        .groupBy("vehicle_id", about.alias("boot_id"))
        .agg(
            F.sum(F.when(kind == Kind.JOURNAL_DROPPED, F.col("reported"))).alias(
                "reported_dropped"
            ),
            F.sum(F.when(kind == Kind.JOURNAL_TRIMMED, F.col("files"))).alias("trimmed_files"),
            F.sum(F.when(kind == Kind.JOURNAL_TRIMMED, F.col("bytes"))).alias("trimmed_bytes"),
        )
        .where(F.col("boot_id").isNotNull())
    )
    first_broken = F.col("first_broken")
    first_pos = F.shiftright(first_broken.bitwiseXOR(F.lit(-(2**63))), 32)
    zero = F.lit(0).cast("long")
    return (
        own.join(said, BOOT, "full")
        .join(not_collected, BOOT, "full")
        .select(
            *BOOT,
            F.coalesce("records", zero).alias("records"),
            F.when(first_broken.isNotNull() & (first_pos != 0), F.lit("broken"))
            .when(
                first_broken.isNotNull() & (F.col("chain_start") == "missing"),
                F.lit("start missing"),
            )
            .when(first_broken.isNotNull(), F.lit("broken"))
            .when(F.col("chain_start") == "trimmed", F.lit("trimmed"))
            .when(F.col("records").isNull() & F.col("collect_gaps").isNull(), F.lit("trimmed"))
            .when(
                (F.col("unchecked_links") > 0) | F.col("records").isNull(), F.lit("not collected")
            )
            .otherwise(F.lit("intact"))
            .alias("chain"),
            F.coalesce("broken_links", zero).alias("broken_links"),
            offset_of(first_broken).alias("first_broken_offset"),
            F.coalesce("trimmed_files", zero).alias("trimmed_files"),
            F.coalesce("trimmed_bytes", zero).alias("trimmed_bytes"),
            F.coalesce("missing_records", zero).alias("missing_records"),
            F.coalesce("reported_dropped", zero).alias("reported_dropped"),
            F.greatest(
                F.coalesce("missing_records", zero) - F.coalesce("reported_dropped", zero), zero
            ).alias("unreported_lost"),
            F.coalesce("collect_gaps", zero).alias("collect_gaps"),
            F.coalesce("not_collected", zero).alias("not_collected"),
            "first_ns",
            "last_ns",
            "clean_stop",
            F.coalesce("delivered", zero).alias("delivered"),
            F.coalesce("dropped", zero).alias("dropped"),
        )
    )


INTEGRITY = [
    "records",
    "chain",
    "broken_links",
    "first_broken_offset",
    "trimmed_files",
    "trimmed_bytes",
    "missing_records",
    "reported_dropped",
    "unreported_lost",
    "collect_gaps",
    "not_collected",
]
"""The columns of :func:`boot_integrity`, after the boot."""


def boot_integrity(facts: DataFrame) -> DataFrame:
    """Per boot (from :func:`boot_facts`): ``records``, the hash chain
    (``chain``, ``broken_links``, ``first_broken_offset``: a link holds when
    the record's hash checks over its bytes and its ``prev_hash`` is the
    previous record's ``hash``), what retention removed (``trimmed_files``,
    ``trimmed_bytes``), ``missing_records`` by offset (lost, or dropped by the
    journal's buffer), ``reported_dropped`` (what ``journal_dropped`` records
    said) and ``unreported_lost`` (missing, and reported by no record);
    ``collect_gaps`` and ``not_collected``: the collector's gaps in the boot
    and the offsets they hold (never collected: not the journal's loss).
    """
    return facts.select(*BOOT, *INTEGRITY)


def boots(facts: DataFrame) -> DataFrame:
    """Per vehicle, its boots in time order (from :func:`boot_facts`): a restart
    is every boot after the first.

    ``clean_stop`` is whether the boot ended with a ``stop`` record (else it
    was killed or crashed, its journal is cut, or it is still running);
    ``after_clean_stop``, for a restart, whether the boot before it stopped
    cleanly. A boot with no record on disk (retention removed them all) is
    the vehicle's earliest.
    """
    w = Window.partitionBy("vehicle_id").orderBy(F.asc_nulls_first("first_ns"), "boot_id")
    return (
        facts.select(*BOOT, "first_ns", "last_ns", "records", "clean_stop")
        .withColumn("boot_number", F.row_number().over(w))
        .withColumn("restart", F.col("boot_number") > 1)
        .withColumn("after_clean_stop", F.lag("clean_stop").over(w))
    )


def key_names(activity: DataFrame) -> DataFrame:
    """Per boot and ``key_id``, the key's name (from :func:`activity`'s rows
    of the kinds that carry it): for tables whose records only have ids."""
    return (
        activity.where(F.col("key").isNotNull() & F.col("key_id").isNotNull())
        .groupBy(*BOOT, "key_id")
        .agg(F.min("key").alias("key"))
    )


def with_key_names(df: DataFrame, names: DataFrame) -> DataFrame:
    """``df`` (with ``key_id``) with the ``key`` of :func:`key_names` beside
    ``key_id`` (null where no record named it)."""
    cols = [c for c in df.columns if c != "key"]
    at = cols.index("key_id")
    out = df.drop("key").join(F.broadcast(names), [*BOOT, "key_id"], "left")
    return out.select(*cols[:at], "key", *cols[at:])


def seq_floors(activity: DataFrame, facts: DataFrame) -> DataFrame:
    """Per (boot, app, key) of a boot whose oldest records retention removed
    (``chain`` ``trimmed`` in :func:`boot_facts`): the seq below which the
    records that explained an event may have been removed, as ``floor``. Seqs
    below it are not missing. Few rows (trimmed boots only).

    Within a key, deliveries are recorded in seq order, and so are drops; but
    a delivery is recorded when its batch has been written, so it can come
    after the drops of later seqs. The floor is therefore the higher of the
    lowest delivered and the lowest dropped seq on disk: below the first
    drop on disk, earlier drops may have gone with the trimmed segments.
    """
    trimmed = facts.where(F.col("chain") == "trimmed").select(*BOOT)
    # The lowest seq of a block: its trailing zero bits (a string, but on the
    # rows of trimmed boots only; ``seqs & -seqs`` overflows at bit 63).
    bits = F.bin("seqs")
    lowest = (
        F.col("seq_block") * _BLOCK + F.length(bits) - F.length(F.regexp_replace(bits, "0+$", ""))
    )
    delivered = F.col("kind") == Kind.DELIVERED
    return (
        activity.where(F.col("kind").isin([Kind.DELIVERED, *DROP_KINDS]))
        .join(F.broadcast(trimmed), BOOT)
        .groupBy(*BOOT, "app", "key_id")
        .agg(
            F.greatest(F.min(F.when(delivered, lowest)), F.min(F.when(~delivered, lowest))).alias(
                "floor"
            )
        )
    )


def _above_floors(gaps: DataFrame, floors: DataFrame | None) -> DataFrame:
    """:func:`seq_gaps`' rows without the seqs below a trimmed boot's
    :func:`seq_floors` (a gap from before the trim starts at the floor, or goes)."""
    if floors is None:
        return gaps
    cols = gaps.columns
    start = F.greatest(F.col("from_seq"), F.coalesce(F.col("floor"), F.lit(0)))
    return (
        gaps.join(F.broadcast(floors), [*BOOT, "app", "key_id"], "left")
        .withColumn("from_seq", start)
        .withColumn("missing", F.col("to_seq") - F.col("from_seq") + 1)
        .where(F.col("missing") > 0)
        .select(*cols)
    )


def seq_gaps(activity: DataFrame, floors: DataFrame | None = None) -> DataFrame:
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
    row (by window, then queue). In a boot whose oldest records retention
    removed, no gap reaches below the key's ``floors`` (:func:`seq_floors`).
    """
    keys = [*BOOT, "app", "key_id"]
    block, seqs = F.col("seq_block"), F.col("seqs")
    rows = activity.where(F.col("kind") == Kind.DELIVERED).select(
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
    gaps = (
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
    return _above_floors(gaps, floors)


def seq_reconciliation(activity: DataFrame, floors: DataFrame | None = None) -> DataFrame:
    """Per (boot, app, key), from :func:`activity`'s sets of seqs per block of
    64: missing seqs, those a drop record explains, and the rest.

    Seqs count from 1, so ``missing`` (the sizes of the key's :func:`seq_gaps`
    added up) is the last delivered seq minus the distinct seqs delivered. A
    dropped seq is never delivered, so every drop before the key's last
    delivered seq lies in a gap: ``explained`` counts them (distinct).
    ``unexplained`` > 0 means a gap no ``evicted``/``lost`` record accounts
    for: the journal or the middleware is wrong. ``drops_after_last_delivery``
    are drops after the last delivered event (no gap shows them yet). No seq
    is listed: the sets are counted with bit operations. In a boot whose
    oldest records retention removed, the seqs below the key's ``floors``
    (:func:`seq_floors`) are not missing.
    """
    keys = [*BOOT, "app", "key_id"]
    delivered, dropped = F.col("_delivered"), F.col("_dropped")
    is_delivered = F.col("kind") == Kind.DELIVERED
    blocks = (
        activity.where(F.col("kind").isin([Kind.DELIVERED, *DROP_KINDS]))
        .groupBy(*keys, "seq_block")
        .agg(
            F.coalesce(F.bit_or(F.when(is_delivered, F.col("seqs"))), F.lit(0)).alias("_delivered"),
            F.coalesce(F.bit_or(F.when(~is_delivered, F.col("seqs"))), F.lit(0)).alias("_dropped"),
        )
    )
    # In a boot trimmed by retention, only seqs from the key's floor on count.
    if floors is not None:
        blocks = blocks.join(F.broadcast(floors), keys, "left")
    floor = F.coalesce(F.col("floor"), F.lit(1)) if floors is not None else F.lit(1)
    floor_block = F.shiftright(floor, _BLOCK_BITS)
    from_floor = (
        F.when(F.col("seq_block") > floor_block, F.lit(-1))
        .when(
            F.col("seq_block") == floor_block,
            F.bitwise_not(_bits_below(floor.bitwiseAND(F.lit(_BLOCK - 1)))),
        )
        .otherwise(F.lit(0))
        .cast("long")
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
    exists = F.bitwise_not(seq_0).bitwiseAND(F.col("_from_floor"))  # no seq 0, none below
    counted = (
        blocks.withColumn("_last", last)
        .withColumn("_from_floor", from_floor)
        .withColumn("_floor", floor)
        .groupBy(*keys)
        .agg(
            F.max("_last").alias("_last"),
            F.max("_floor").alias("_floor"),
            F.sum(
                F.bit_count(delivered.bitwiseAND(before.bitwiseOR(at_last)).bitwiseAND(exists))
            ).alias("_distinct"),
            F.sum(F.bit_count(dropped.bitwiseAND(before).bitwiseAND(exists))).alias("explained"),
            F.sum(
                F.bit_count(
                    dropped.bitwiseAND(F.bitwise_not(before.bitwiseOR(at_last))).bitwiseAND(exists)
                )
            ).alias("drops_after_last_delivery"),
            F.max((dropped != 0).cast("int")).alias("_drops"),
        )
        # Seqs floor.._last that were not delivered.
        .withColumn(
            "missing",
            F.greatest(
                F.coalesce(F.col("_last") - F.col("_floor") + 1 - F.col("_distinct"), F.lit(0)),
                F.lit(0),
            ),
        )
    )
    return (
        counted.where((F.col("missing") > 0) | (F.col("_drops") > 0))
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
        activity.where(F.col("kind").isin(Kind.PUBLISH, Kind.DELIVERED))
        .withColumn(
            "what", F.when(F.col("kind") == Kind.PUBLISH, F.lit("write")).otherwise("delivery")
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


def failure_intervals(records: DataFrame) -> DataFrame:
    """Per vehicle, boot and key: the intervals its provider said it failed.

    A write of a failure (a ``publish`` with a ``failure`` code) starts an
    interval, unless the key's write before it failed with the same code; the
    next write of a value or of another code ends it (``to_ns``); none after
    it in the boot's journal leaves it open (``to_ns`` and ``duration_ns``
    null). Times are the records'. Staleness is another finding
    (:func:`stale_intervals`): a key whose provider keeps saying it failed is
    written, not quiet.

    Only keys that failed are ordered, from their first failure on: a window
    per boot and key over those writes (few, in a fleet of working sensors).
    """
    key = [*BOOT, "key_id"]
    # A write's place in its batch (records not expanded: one write each).
    batch_index = F.col("batch_index") if "batch_index" in records.columns else F.lit(None)
    writes = records.where(F.col("kind") == Kind.PUBLISH).select(
        *key,
        "key",
        "time_ns",
        "offset",
        F.coalesce(batch_index, F.lit(0)).alias("_index"),
        F.coalesce(F.col("failure"), F.lit("")).alias("_state"),
    )
    since = (
        writes.where(F.col("_state") != "")
        .groupBy(*key)
        .agg(F.min("time_ns").alias("_since"), F.first("key", ignorenulls=True).alias("_key"))
    )
    order = Window.partitionBy(*key).orderBy("time_ns", "offset", "_index")
    starts = (
        writes.drop("key")
        .join(F.broadcast(since), key)
        .where(F.col("time_ns") >= F.col("_since"))
        .withColumn("_before", F.lag("_state").over(order))
        .where(F.col("_before").isNull() | (F.col("_before") != F.col("_state")))
        .withColumn("to_ns", F.lead("time_ns").over(order))
    )
    return starts.where(F.col("_state") != "").select(
        *BOOT,
        F.col("_key").alias("key"),
        "key_id",
        F.col("_state").alias("code"),
        F.col("time_ns").alias("from_ns"),
        "to_ns",
        (F.col("to_ns") - F.col("time_ns")).alias("duration_ns"),
    )


def filtered_writes(activity: DataFrame) -> DataFrame:
    """Per vehicle, boot, app and key whose events stood for more writes than
    one (a filtered subscription's): events ``delivered`` and the writes they
    stood for (``delivered_writes``), events ``dropped`` (evicted, lost) and
    theirs (``dropped_writes``), and the writes the filter held back:
    ``filtered`` = writes - events, over both.

    A filter's held-back writes never had a seq, so they leave no gap:
    :func:`seq_reconciliation` explains gaps by the drops alone. From
    :func:`activity`'s ``writes``; keys without a filter have no row.
    """
    delivered = F.col("kind") == Kind.DELIVERED
    return (
        activity.where(F.col("kind").isin([Kind.DELIVERED, *DROP_KINDS]))
        .groupBy(*BOOT, "app", "key_id")
        .agg(
            F.coalesce(F.sum(F.when(delivered, F.col("n"))), F.lit(0)).alias("delivered"),
            F.coalesce(F.sum(F.when(delivered, F.col("writes"))), F.lit(0)).alias(
                "delivered_writes"
            ),
            F.coalesce(F.sum(F.when(~delivered, F.col("n"))), F.lit(0)).alias("dropped"),
            F.coalesce(F.sum(F.when(~delivered, F.col("writes"))), F.lit(0)).alias(
                "dropped_writes"
            ),
        )
        .withColumn(
            "filtered",
            F.col("delivered_writes")
            - F.col("delivered")
            + F.col("dropped_writes")
            - F.col("dropped"),
        )
        .where(F.col("filtered") > 0)
    )


def drop_rates(activity: DataFrame) -> DataFrame:
    """Per (vehicle, boot, app, queue, time window of :func:`activity`):
    deliveries, drops and the drop rate. An app's queues are those of one
    middleware process: a restart starts new ones."""
    return (
        activity.where(F.col("kind").isin([Kind.DELIVERED, *DROP_KINDS]))
        .groupBy(*BOOT, "app", "queue", "window_start_ns")
        .agg(
            F.sum("n").alias("events"),
            F.sum(F.when(F.col("kind") != Kind.DELIVERED, F.col("n")).otherwise(0)).alias(
                "dropped"
            ),
        )
        .withColumn("drop_rate", F.col("dropped") / F.col("events"))
    )


def drops_over_time(drop_rates: DataFrame) -> DataFrame:
    """The fleet's drops over time (from :func:`drop_rates`): per app, queue
    and time window, the events and drops of every vehicle added up."""
    return drop_rates.groupBy("app", "queue", "window_start_ns").agg(
        F.sum("events").alias("events"), F.sum("dropped").alias("dropped")
    )
