"""The analysis job: wiring session, extract, transforms, load and the report.
(The ingest jobs are :mod:`vehicle_middleware.telemetry_export.ingest`'s, re-exported here.)"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, Final

from pyspark.sql import Column, DataFrame, Observation, Row, SparkSession
from pyspark.sql import functions as F
from vehicle_middleware.contract.journal.landing import CollectorKind
from vehicle_middleware.contract.journal.records import Kind, Level
from vehicle_middleware.telemetry_export import chain, extract, load, plots, report, transforms
from vehicle_middleware.telemetry_export.dataset import BAD, COLLECTOR, LINKS, RECORDS, Dataset
from vehicle_middleware.telemetry_export.ingest import ingest, ingest_stream
from vehicle_middleware.telemetry_export.schema import COLLECTOR as COLLECTOR_SCHEMA

__all__ = [
    "REPORT_ROWS",
    "STALE_KEYS_SHOWN",
    "analyze",
    "apps_summary",
    "failure_rows",
    "failures_summary",
    "ingest",
    "ingest_stream",
    "not_collected_rows",
    "queue_lengths",
    "stale_keys",
    "vehicle_apps",
    "with_filters",
]


STALE_KEYS_SHOWN = 100


def _per_queue(active: DataFrame) -> list[Row]:
    """Per vehicle, app and queue: events delivered, and dropped by cause:
    ``evicted`` (a newer event of the same key replaced it in the full queue)
    and ``lost`` (it met a full queue holding no event of its key), from
    :func:`transforms.activity`'s rows."""
    kind = F.col("kind")

    def events(k: Kind) -> Column:
        return F.coalesce(F.sum(F.when(kind == k, F.col("n"))), F.lit(0))

    return (
        active.where(kind.isin([Kind.DELIVERED, *transforms.DROP_KINDS]))
        .groupBy("vehicle_id", "app", "queue")
        .agg(
            events(Kind.DELIVERED).alias("delivered"),
            events(Kind.EVICTED).alias("evicted"),
            events(Kind.LOST).alias("lost"),
        )
        .withColumn("dropped", F.col("evicted") + F.col("lost"))
        .collect()
    )


def _reading(active: DataFrame) -> list[Row]:
    """Per vehicle and app, how fast it read: the ``batches`` delivered to it
    (journal lines of its deliveries: a batch record is one) between its first
    and last delivery (``first_ns``, ``last_ns``)."""
    return (
        active.where(F.col("kind") == Kind.DELIVERED)
        .groupBy("vehicle_id", "app")
        .agg(
            F.sum("lines").alias("batches"),
            F.min("first_ns").alias("first_ns"),
            F.max("last_ns").alias("last_ns"),
        )
        .collect()
    )


def _stream_queues(spark: SparkSession, ds: Dataset) -> list[Row]:
    """Each app's event streams as their ``connect`` records say: ``vehicle_id``,
    ``app``, ``time_ns`` and ``details`` (JSON, with the effective ``queues``
    as ``[queue, min_length, max_length]``); none in a dataset without them."""
    records = spark.read.parquet(ds.table(RECORDS))
    if not {"details", "stream"} <= set(records.columns):
        return []
    return (
        records.where((F.col("kind") == Kind.CONNECT) & (F.col("stream") == "events"))
        .select("vehicle_id", "app", "time_ns", "details")
        .collect()
    )


def queue_lengths(streams: Iterable[Any]) -> dict[str, dict[str, list[int]]]:
    """Per app, the lengths its queues had (``{"0": [min, max], ...}``, in
    events), from :func:`_stream_queues`' rows: its latest stream's, over
    every vehicle. An app whose streams say nothing is not in it."""
    latest: dict[str, tuple[int, dict[str, list[int]]]] = {}
    for r in streams:
        try:
            queues = json.loads(r["details"] or "{}").get("queues") or []
            lengths = {str(int(q)): [int(lo), int(hi)] for q, lo, hi in queues}
        except (ValueError, TypeError, AttributeError):
            continue  # not a connect record this version writes: nothing said
        at = int(r["time_ns"] or 0)
        if lengths and (r["app"] not in latest or at >= latest[r["app"]][0]):
            latest[r["app"]] = (at, lengths)
    return {app: lengths for app, (_, lengths) in sorted(latest.items())}


_GAP_TOTALS = ("missing", "explained", "unexplained", "drops_after_last_delivery")


def _gaps_per_app(reconciliation: DataFrame) -> list[Row]:
    """Per vehicle and app: its seqs missing, explained or not, and dropped
    after its last delivery."""
    return (
        reconciliation.groupBy("vehicle_id", "app")
        .agg(*(F.sum(c).alias(c) for c in _GAP_TOTALS))
        .collect()
    )


def _gaps_per_key(reconciliation: DataFrame) -> list[Row]:
    """Per app and key (by name), over the fleet: the seq totals and the
    vehicles they were seen on."""
    return (
        reconciliation.groupBy("app", "key")
        .agg(
            *(F.sum(c).alias(c) for c in _GAP_TOTALS),
            F.count_distinct("vehicle_id").alias("vehicles"),
        )
        .collect()
    )


def _stale_per_key(stale: DataFrame) -> list[Row]:
    """Per key, what went quiet (writes, or deliveries to an app) and its
    threshold: intervals, vehicles and the longest interval."""
    return (
        stale.groupBy("key", "what", "app", "threshold_ns")
        .agg(
            F.count(F.lit(1)).alias("intervals"),
            F.count_distinct("vehicle_id").alias("vehicles"),
            F.max("interval_ns").alias("longest_ns"),
        )
        .collect()
    )


def _filtered_per_app_key(filtered: DataFrame) -> list[Row]:
    """Per app and key (by name), over the fleet: events delivered and dropped,
    the writes they stood for, and the writes filters held back."""
    return (
        filtered.groupBy("app", "key")
        .agg(
            *(
                F.sum(c).alias(c)
                for c in ("delivered", "delivered_writes", "dropped", "dropped_writes", "filtered")
            ),
            F.count_distinct("vehicle_id").alias("vehicles"),
        )
        .collect()
    )


def _filters(spark: SparkSession, ds: Dataset) -> list[Row]:
    """Per app and key, the filters its subscriptions had (``register`` records'
    ``filter``, as JSON text); none for a dataset ingested before records had it."""
    records = spark.read.parquet(ds.table(RECORDS))
    if "filter" not in records.columns:
        return []
    return (
        records.where((F.col("kind") == Kind.REGISTER) & F.col("filter").isNotNull())
        .groupBy("app", "key")
        .agg(F.sort_array(F.collect_set("filter")).alias("filters"))
        .collect()
    )


def with_filters(filtered_keys: Iterable[Any], filters: Iterable[Any]) -> list[dict[str, Any]]:
    """The rows of :func:`_filtered_per_app_key` as dicts, each with the ``filters``
    its app's subscriptions to its key had (from :func:`_filters`' rows)."""
    by_key = {(f["app"], f["key"]): list(f["filters"]) for f in filters}
    return [{**r.asDict(), "filters": by_key.get((r["app"], r["key"]), [])} for r in filtered_keys]


def failure_rows(failures: DataFrame, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` failure intervals, by vehicle, key and start, for the report."""
    ordered = failures.orderBy("vehicle_id", "key", "from_ns", "boot_id")
    return [r.asDict() for r in ordered.limit(limit).collect()]


def failures_summary(rows: Iterable[Any]) -> dict[str, Any]:
    """``summary.json``'s failure figures from per-code counts (``code``,
    ``intervals``, ``open``): the intervals, those still open, and both by code."""
    by_code: dict[str, int] = {}
    still_open = 0
    for r in rows:
        by_code[str(r["code"])] = by_code.get(str(r["code"]), 0) + int(r["intervals"])
        still_open += int(r["open"])
    return {
        "failure_intervals": sum(by_code.values()),
        "open_failure_intervals": still_open,
        "failure_intervals_per_code": dict(sorted(by_code.items())),
    }


def _failure_codes(failures: DataFrame) -> list[Row]:
    return (
        failures.groupBy("code")
        .agg(
            F.count(F.lit(1)).alias("intervals"),
            F.count(F.when(F.col("to_ns").isNull(), 1)).alias("open"),
        )
        .collect()
    )


def apps_summary(
    queues: Iterable[Any],
    gaps: Iterable[Any],
    reading: Iterable[Any] = (),
    lengths: dict[str, dict[str, list[int]]] | None = None,
) -> dict[str, dict[str, Any]]:
    """``summary.json``'s ``apps``: deliveries, drops by cause and queue, seq
    gaps, and beside the drops what explains them: the app's queue lengths
    and how fast it read.

    ``queues`` has, per vehicle (or not), app and queue, ``app``, ``queue``,
    ``delivered``, ``evicted``, ``lost`` and ``dropped`` (their sum); ``gaps``,
    per vehicle (or not) and app, ``app`` and the sums of the reconciliation's
    ``missing``, ``explained``, ``unexplained`` and
    ``drops_after_last_delivery``; ``reading``, per vehicle and app, ``app``,
    ``batches``, ``first_ns`` and ``last_ns`` of its deliveries (rows or dicts:
    each field read as ``row[name]``); ``lengths``, :func:`queue_lengths`. All
    are added up over the vehicles; ``reading_s`` is the sum of each vehicle's
    span of deliveries.
    """
    apps: dict[str, dict[str, Any]] = {}

    def app(name: str) -> dict[str, Any]:
        return apps.setdefault(
            name,
            {
                "delivered": 0,
                "dropped": 0,
                "evicted": 0,
                "lost": 0,
                "dropped_per_queue": {},
                "evicted_per_queue": {},
                "lost_per_queue": {},
            },
        )

    for r in queues:
        a = app(r["app"])
        a["delivered"] += int(r["delivered"])
        for cause in ("dropped", "evicted", "lost"):
            a[cause] += int(r[cause])
            q = a[f"{cause}_per_queue"]
            q[str(r["queue"])] = q.get(str(r["queue"]), 0) + int(r[cause])
    spans: dict[str, list[int]] = {}
    for r in reading:
        s = spans.setdefault(r["app"], [0, 0])
        s[0] += int(r["batches"] or 0)
        if r["first_ns"] is not None and r["last_ns"] is not None:
            s[1] += int(r["last_ns"]) - int(r["first_ns"])
    for name, (batches, span_ns) in spans.items():
        a = app(name)
        a["batches_read"] = batches
        a["reading_s"] = round(span_ns / 1e9, 3)
        a["batches_read_per_s"] = round(batches / (span_ns / 1e9), 3) if span_ns > 0 else None
    for name, queue_events in (lengths or {}).items():
        if name in apps:
            apps[name]["queue_min_max_events"] = queue_events
    names = {
        "missing": "missing_seqs",
        "explained": "explained_seqs",
        "unexplained": "unexplained_seqs",
        "drops_after_last_delivery": "drops_after_last_delivery",
    }
    for r in gaps:
        a = app(r["app"])
        for c, name in names.items():
            a[name] = a.get(name, 0) + int(r[c])
    return apps


def vehicle_apps(
    queues: Iterable[Any], gaps: Iterable[Any], reading: Iterable[Any] = ()
) -> list[dict[str, Any]]:
    """The report's rows per vehicle and app: ``delivered``, ``dropped``,
    ``evicted``, ``lost``, the seq totals, and the ``batches`` read in
    ``reading_ns`` (inputs as :func:`apps_summary`'s, per vehicle), by vehicle
    and app."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}

    def row(r: Any) -> dict[str, Any]:
        return rows.setdefault(
            (r["vehicle_id"], r["app"]),
            {
                "vehicle_id": r["vehicle_id"],
                "app": r["app"],
                "delivered": 0,
                "dropped": 0,
                "evicted": 0,
                "lost": 0,
                "batches": 0,
                "reading_ns": 0,
                **dict.fromkeys(_GAP_TOTALS, 0),
            },
        )

    for r in queues:
        a = row(r)
        for c in ("delivered", "dropped", "evicted", "lost"):
            a[c] += int(r[c])
    for r in reading:
        a = row(r)
        a["batches"] = int(r["batches"] or 0)
        if r["first_ns"] is not None and r["last_ns"] is not None:
            a["reading_ns"] = int(r["last_ns"]) - int(r["first_ns"])
    for r in gaps:
        a = row(r)
        for c in _GAP_TOTALS:
            a[c] += int(r[c])
    return [rows[k] for k in sorted(rows)]


def stale_keys(per_key: Iterable[Any]) -> dict[str, int]:
    """``summary.json``'s ``stale_keys_longest_ns`` from :func:`_stale_per_key`'s rows:
    the keys whose writes stopped for longer than their threshold, with the
    longest interval (ns), longest first (at most 100). Gaps in deliveries to
    an app are in the ``stale`` table, not here: they are the app's, not the
    signal's."""
    longest: dict[str, int] = {}
    for r in per_key:
        if r["what"] == "write":
            key = r["key"] or "?"
            longest[key] = max(longest.get(key, 0), int(r["longest_ns"]))
    ordered = sorted(longest.items(), key=lambda kv: (-kv[1], kv[0]))
    return dict(ordered[:STALE_KEYS_SHOWN])


def _bad_lines(spark: SparkSession, ds: Dataset) -> int:
    """The bad lines ``ingest`` set aside (none: no data file, nothing read)."""
    if not ds.has_data(ds.table(BAD)):
        return 0
    return spark.read.parquet(ds.table(BAD)).count()


def _collector(spark: SparkSession, ds: Dataset) -> DataFrame:
    """The collector's records, each once (a landing file ingested twice, or
    written twice by a collector retrying, adds nothing); none without any."""
    if not ds.has_data(ds.table(COLLECTOR)):
        return spark.createDataFrame([], COLLECTOR_SCHEMA)
    # A gap by its offsets, a restart by its boots (not by when or by whom).
    same = ["kind", "vehicle_id", "boot_id", "from_offset", "to_offset"]
    return (
        spark.read.parquet(ds.table(COLLECTOR))
        .select(*COLLECTOR_SCHEMA.fieldNames())
        .dropDuplicates([*same, "old_boot_id", "new_boot_id"])
    )


def not_collected_rows(notes: Iterable[Any]) -> list[dict[str, Any]]:
    """The report's "Not collected" rows from the collector's records (rows or
    dicts): per vehicle and boot, its gaps (``gaps``, ``records`` not
    collected, ``reasons``) and the restarts the collector followed into it
    (``restarted_from``), by vehicle, then time."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}

    def row(vehicle: str, boot: str, time_ns: int) -> dict[str, Any]:
        r = rows.setdefault(
            (vehicle, boot),
            {
                "vehicle_id": vehicle,
                "boot_id": boot,
                "gaps": 0,
                "records": 0,
                "reasons": [],
                "restarted_from": [],
                "first_ns": time_ns,
            },
        )
        r["first_ns"] = min(r["first_ns"], time_ns)
        return r

    for n in notes:
        if n["kind"] == CollectorKind.GAP:
            r = row(n["vehicle_id"], n["boot_id"], n["time_ns"] or 0)
            r["gaps"] += 1
            r["records"] += int(n["count"])
            if n["reason"] and n["reason"] not in r["reasons"]:
                r["reasons"].append(n["reason"])
        elif n["kind"] == CollectorKind.RESTART:
            r = row(n["vehicle_id"], n["new_boot_id"], n["time_ns"] or 0)
            r["restarted_from"].append(n["old_boot_id"])
    return sorted(rows.values(), key=lambda r: (r["vehicle_id"], r["first_ns"], r["boot_id"]))


def _concurrently(tasks: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run independent Spark actions at once, from one thread each; their results.

    Each action on a small table costs mostly planning, code generation and
    scheduling on the driver; run together, one's overhead overlaps another's
    tasks (the scheduler is FIFO: a big action still gets the cores first).
    """
    with ThreadPoolExecutor(max_workers=len(tasks)) as pool:
        futures = {name: pool.submit(fn) for name, fn in tasks.items()}
        return {name: f.result() for name, f in futures.items()}


_NEEDS_FULL: Final = (
    "delivered",
    "seq_gaps",
    "missing_seqs",
    "unexplained_seqs",
    "stale_intervals",
    "failure_intervals",
    "open_failure_intervals",
    "failure_intervals_per_code",
    "filtered_writes",
)
"""What only a journal at level ``full`` records (deliveries, writes): unknown below it."""
_NEEDS_FULL_PER_APP: Final = (
    "missing_seqs",
    "explained_seqs",
    "unexplained_seqs",
    "drops_after_last_delivery",
)


def _levels(spark: SparkSession, ds: Dataset) -> set[str]:
    """The journal levels the dataset's boots ran at (their ``start`` records)."""
    records = spark.read.parquet(ds.table(RECORDS))
    if "level" not in records.columns:
        return set()
    rows = records.where(F.col("kind") == Kind.START).select("level").distinct().collect()
    return {str(r["level"]) for r in rows if r["level"]}


def analyze(
    spark: SparkSession,
    dataset: str,
    output: str,
    *,
    thresholds: Sequence[tuple[str, int]] = (),
    default_stale_ns: int = 5_000_000_000,
    window_ns: int = 1_000_000_000,
) -> dict[str, Any]:
    """The findings of a dataset written by ``ingest``; returns the summary.

    Raises:
        ValueError: the dataset has records but no ``links`` (written by an
            older ``ingest``, which kept the chain on each record).
    """
    ds = Dataset(spark, dataset)
    if not ds.has_data(ds.table(LINKS)):
        raise ValueError(
            f"{dataset} has no {LINKS} table: write it again with this version's ingest"
        )
    records = extract.read_dataset(
        spark, ds.table(RECORDS), transforms.ANALYSED, optional=transforms.OPTIONAL
    )
    # One pass over the records: the aggregation every finding reads (small,
    # kept in memory), laid out by boot so that no finding needs a further
    # shuffle: each groups or orders within a boot.
    bucket_ns = transforms.stale_bucket_ns(thresholds, default_stale_ns)
    active = (
        transforms.activity(records, bucket_ns=bucket_ns, window_ns=window_ns)
        .repartition(spark.sparkContext.defaultParallelism, *transforms.BOOT)
        .cache()
    )
    # The collector's records (a few) and the chain, from the runs ingest cut
    # (a few per boot and batch).
    notes = _collector(spark, ds).coalesce(1).cache()
    gaps = notes.where(F.col("kind") == CollectorKind.GAP)
    chained = chain.chain_facts(
        spark.read.parquet(ds.table(LINKS)),
        transforms.trims(active),
        gaps.select(*transforms.BOOT, "from_offset", "to_offset"),
    )
    not_collected = gaps.groupBy(*transforms.BOOT).agg(
        F.count(F.lit(1)).alias("collect_gaps"), F.sum("count").alias("not_collected")
    )
    # One row per boot: one partition (its consumers then run one task each).
    facts = transforms.boot_facts(active, chained, not_collected).coalesce(1).cache()
    # One row per boot and key: joined to the tables that have only key ids.
    names = transforms.key_names(active).coalesce(1).cache()
    # Where each key's seqs start in a boot whose oldest records retention
    # removed (few rows: those boots only).
    floors = transforms.seq_floors(active, facts).coalesce(1).cache()
    kept: list[DataFrame] = [facts, names, floors, active, notes]
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            # The pass runs while this thread plans the findings, which takes the
            # driver a while: neither waits for the other.
            materialized = pool.submit(active.count)
            seq_gaps = transforms.with_key_names(transforms.seq_gaps(active, floors), names)
            integrity = transforms.boot_integrity(facts)
            # The fleet's totals, summed over the boots while they are written.
            # Vehicles: each is counted by its first boot (an observation cannot
            # count distinct values).
            fleet, vehicles = Observation("fleet"), Observation("vehicles")
            boots = transforms.boots(facts.observe(fleet, *_fleet_totals())).observe(
                vehicles, F.count(F.when(F.col("boot_number") == 1, 1)).alias("vehicles")
            )
            # Kept: the summary and the report read them again.
            reconciliation = transforms.with_key_names(
                transforms.seq_reconciliation(active, floors), names
            ).cache()
            stale = transforms.stale_intervals(
                active, thresholds=thresholds, default_ns=default_stale_ns
            ).cache()
            drop_rates = transforms.drop_rates(active).cache()
            # The provider's word (failures) beside the middleware's (staleness);
            # filters' held-back writes beside the drops.
            failures = transforms.failure_intervals(records).cache()
            filtered = transforms.with_key_names(transforms.filtered_writes(active), names).cache()
            kept += [reconciliation, stale, drop_rates, failures, filtered]
            materialized.result()
        local = "://" not in output or output.startswith("file://")

        def write(name: str, df: DataFrame) -> int:
            """Write ``df``; its rows, counted while writing (no second job)."""
            seen = Observation(name)
            load.write_table(df.observe(seen, F.count(F.lit(1)).alias("rows")), f"{output}/{name}")
            return int(seen.get["rows"])

        report_dir = Path(output.removeprefix("file://"))

        def plot(
            draw: Callable[[list[dict[str, Any]], Path], str | None], df: DataFrame
        ) -> str | None:
            """``draw`` the first rows of ``df`` into the report (one task reads
            partitions in turn until it has them: one job)."""
            return draw(_rows(df.coalesce(1).limit(REPORT_ROWS)), report_dir) if local else None

        def plot_drops() -> str | None:
            """The fleet's drops per app and queue, its earliest windows."""
            over_time = transforms.drops_over_time(drop_rates)
            rows = over_time.orderBy("window_start_ns").limit(REPORT_ROWS)
            return plots.plot_drops(_rows(rows), report_dir, window_ns=window_ns) if local else None

        def boot_rows() -> list[dict[str, Any]]:
            """Every boot with its facts, for the report (none: not local)."""
            if not local:
                return []
            order = transforms.boots(facts).select(
                *transforms.BOOT, "boot_number", "after_clean_stop"
            )
            return _rows(facts.join(order, transforms.BOOT).limit(REPORT_ROWS))

        # Every table, and what the summary and the report read from it, at once
        # (a kept table is computed once, by whichever query gets there first).
        # The longest first: the pool starts them in this order.
        found = _concurrently(
            {
                "seq_gaps": partial(write, "seq_gaps", seq_gaps),
                "reconciliation": partial(write, "reconciliation", reconciliation),
                "gaps": partial(_gaps_per_app, reconciliation),
                "gap_keys": partial(_gaps_per_key, reconciliation),
                "stale": partial(write, "stale", stale),
                "stale_keys": partial(_stale_per_key, stale),
                "stale_png": partial(plot, plots.plot_staleness, stale),
                "failures": partial(write, "failures", failures),
                "failure_codes": partial(_failure_codes, failures),
                "failure_rows": partial(failure_rows, failures, REPORT_ROWS),
                "filtered": partial(write, "filtered", filtered),
                "filtered_keys": partial(_filtered_per_app_key, filtered),
                "filters": partial(_filters, spark, ds),
                "drop_rates": partial(write, "drop_rates", drop_rates),
                "drops_png": plot_drops,
                "boot_integrity": partial(write, "boot_integrity", integrity),
                "boots": partial(write, "boots", boots),
                "boot_rows": boot_rows,
                "queues": partial(_per_queue, active),
                "reading": partial(_reading, active),
                "streams": partial(_stream_queues, spark, ds),
                "bad_lines": partial(_bad_lines, spark, ds),
                "notes": partial(_rows, notes),
            }
        )
        per_boot = {**fleet.get, **vehicles.get}
        levels = _levels(spark, ds)
        apps = apps_summary(
            found["queues"], found["gaps"], found["reading"], queue_lengths(found["streams"])
        )
        for r in found["filtered_keys"]:
            a = apps.get(r["app"])
            if a is not None:
                a["filtered_writes"] = a.get("filtered_writes", 0) + int(r["filtered"])
        missing = sum(a.get("missing_seqs", 0) for a in apps.values())
        summary: dict[str, Any] = {
            "records": int(per_boot["records"]),
            "bad_lines": int(found["bad_lines"]),
            "vehicles": int(per_boot["vehicles"]),
            "boots": int(per_boot["boots"]),
            # Every boot of a vehicle after its first is a restart.
            "restarts": int(per_boot["boots"] - per_boot["vehicles"]),
            "unclean_stops": int(per_boot["unclean"]),
            "delivered": int(per_boot["delivered"]),
            "dropped": int(per_boot["dropped"]),
            # The drops by cause (per app and queue; the journal's record kinds).
            "evicted": sum(a["evicted"] for a in apps.values()),
            "lost": sum(a["lost"] for a in apps.values()),
            "seq_gaps": found["seq_gaps"],
            "missing_seqs": missing,
            "unexplained_seqs": sum(a.get("unexplained_seqs", 0) for a in apps.values()),
            "stale_intervals": found["stale"],
            **failures_summary(found["failure_codes"]),
            "filtered_writes": sum(int(r["filtered"]) for r in found["filtered_keys"]),
            "broken_chains": int(per_boot["broken"]),
            "trimmed_boots": int(per_boot["trimmed"]),
            "missing_journal_records": int(per_boot["missing_records"]),
            "reported_journal_drops": int(per_boot["reported_dropped"]),
            "unreported_journal_losses": int(per_boot["unreported_lost"]),
            "collect_gaps": int(per_boot["collect_gaps"]),
            "not_collected_records": int(per_boot["not_collected"]),
            "collector_restarts": sum(
                1 for n in found["notes"] if n["kind"] == CollectorKind.RESTART
            ),
            "apps": apps,
            "stale_keys_longest_ns": stale_keys(found["stale_keys"]),
            "journal_levels": sorted(levels),
            # A dataset whose boots say no level (older journals) is taken as before.
            "deliveries_recorded": not levels or Level.FULL.name.lower() in levels,
        }
        if not summary["deliveries_recorded"]:
            # No boot recorded its deliveries (or its writes): figures that count them
            # would read 0 and a drop rate of 100 %. Unknown, not zero.
            for name in _NEEDS_FULL:
                summary[name] = None
            for a in apps.values():
                for name in ("delivered", *_NEEDS_FULL_PER_APP):
                    a[name] = None
                for name in ("batches_read", "reading_s", "batches_read_per_s", "filtered_writes"):
                    if name in a:
                        a[name] = None
        if local:
            report.write_report(
                report_dir,
                summary,
                report.ReportTables(
                    boots=found["boot_rows"],
                    vehicle_apps=vehicle_apps(found["queues"], found["gaps"], found["reading"]),
                    queue_lengths=queue_lengths(found["streams"]),
                    gap_keys=[r.asDict() for r in found["gap_keys"]],
                    stale_keys=[r.asDict() for r in found["stale_keys"]],
                    failures=found["failure_rows"],
                    filtered_keys=with_filters(found["filtered_keys"], found["filters"]),
                    not_collected=not_collected_rows(found["notes"]),
                ),
                report.Settings(
                    thresholds=tuple(thresholds),
                    default_stale_ns=default_stale_ns,
                    window_ns=window_ns,
                ),
                drops_png=found["drops_png"],
                stale_png=found["stale_png"],
            )
        return summary
    finally:
        for df in kept:
            df.unpersist()


def _fleet_totals() -> list[Column]:
    """The fleet's totals over :func:`transforms.boot_facts` (observed while
    the boots are written: no job of their own)."""
    return [
        F.count(F.lit(1)).alias("boots"),
        *(
            F.coalesce(F.sum(c), F.lit(0)).alias(c)
            for c in (
                "records",
                "delivered",
                "dropped",
                "missing_records",
                "reported_dropped",
                "unreported_lost",
                "collect_gaps",
                "not_collected",
            )
        ),
        F.count(F.when(F.col("broken_links") > 0, 1)).alias("broken"),
        F.count(F.when(F.col("chain") == "trimmed", 1)).alias("trimmed"),
        F.count(F.when(~F.col("clean_stop"), 1)).alias("unclean"),
    ]


REPORT_ROWS = 5000
"""The rows of each table the human report plots and lists, at most."""


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict() for r in df.collect()]
