"""Spark benchmark of the telemetry analysis: ``make bench-spark``.

For 1M and 10M synthetic journal records (``vehicle_middleware.telemetry_export synth``), prints
rows/s of ``ingest`` beside its ceiling and floor from the same run: its
first pass without the write (``parse/s``: every line parsed, its hash
checked, its batch expanded, nothing written: no ingest that checks every
record goes faster here) and a bare Spark read of the same journal files and
a count (``text/s``: every line read, none parsed); also the dataset's
records read and written again as ingest writes them (its write alone: with
the parse, the least any ingest of these records costs, printed beside the
10M target; one warm-up, then ``--ingest-repeat`` runs); and of ``analyze``
beside its floor: a Spark scan of the same Parquet dataset reading every
column the analysis uses and aggregating each;
and the same analysis written plainly in pandas (``bench.spark_pandas``: the
same tables, summary and report), the single-machine alternative. Local
mode, ``local[*]`` on this machine. Each of analyze, the scan, pandas and the
text read and the parse run once to warm up (``--warmup``), then ``--repeat`` times
(default 5), and the best time counts (``vs scan``; ``median`` is the ratio
of the median times, for the spread); the warm-up run of analyze is printed
too (``1st/s``: it includes the JIT compilation of Spark's generated code).
Ingest runs ``--ingest-repeat`` times (default 1), the best counts; its two
passes' times are printed as it goes (``staged``: parse, hash, write;
``linked``: the chain's runs; ``committed``).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from vehicle_middleware.telemetry_export.transforms import ANALYSED as USED


def timed(fn, repeat: int = 1, warmup: int = 0):  # type: ignore[no-untyped-def]
    """``fn``'s result, its best time of ``repeat`` runs after ``warmup`` runs
    (the machine is noisy: the least disturbed run is the one that says what
    the code costs), and the time of its first run."""
    out, times = _runs(fn, repeat, warmup)
    return out, min(times[warmup:]), times[0]


def _runs(fn, repeat: int, warmup: int):  # type: ignore[no-untyped-def]
    """``fn``'s result and the times of its ``warmup`` + ``repeat`` runs."""
    times = []
    for _ in range(warmup + repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, times


def scan_floor(spark, dataset: str, repeat: int, warmup: int) -> list[float]:  # type: ignore[no-untyped-def]
    """The times of the floor's ``warmup`` + ``repeat`` runs."""
    from pyspark.sql import functions as F

    # Every column read, and each aggregated: strings counted, the others'
    # maximum. Read as the job reads it: listing the dataset included.
    text = ("kind", "vehicle_id", "boot_id", "app", "key")
    aggs = [F.count(c) if c in text else F.max(c) for c in USED]
    _, times = _runs(
        lambda: spark.read.parquet(f"{dataset}/records").select(*USED).agg(*aggs).collect(),
        repeat,
        warmup,
    )
    return times


def text_floor(spark, fleet: Path, repeat: int, warmup: int) -> list[float]:  # type: ignore[no-untyped-def]
    """The times of a bare read of the journal files ingest reads, and a count."""
    from vehicle_middleware.telemetry_export import extract

    _, times = _runs(lambda: extract.read_lines(spark, [str(fleet)]).count(), repeat, warmup)
    return times


def parse_ceiling(spark, fleet: Path, repeat: int, warmup: int) -> list[float]:  # type: ignore[no-untyped-def]
    """The times of ingest's first pass without its write: every line read,
    parsed (the JVM parse, the fastest this project has: ``from_json`` is
    slower), its hash checked and its batch expanded, into Spark's ``noop``
    sink. No ingest that checks every record can beat it on this machine:
    it is ingest's ceiling (and the write, the links and the commit come on
    top of it)."""
    from vehicle_middleware.telemetry_export import extract, jvm, transforms

    def run() -> None:
        lines = extract.read_lines(spark, [str(fleet)])
        staged = transforms.staged(transforms.parse_lines(lines, fast=jvm.available(spark)))
        staged.write.format("noop").mode("overwrite").save()

    _, times = _runs(run, repeat, warmup)
    return times


def write_floor(spark, dataset: str, out: str, repeat: int, warmup: int) -> list[float]:  # type: ignore[no-untyped-def]
    """The times of ingest's write alone: the dataset's records read and
    written again as ingest writes them (its Parquet settings, partitioned by
    vehicle and date). With :func:`parse_ceiling`, what any ingest of this
    dataset costs at least: it parses every line and writes every row."""
    from vehicle_middleware.telemetry_export.ingest import WRITE_OPTIONS

    def run() -> None:
        records = spark.read.parquet(f"{dataset}/records")
        writer = records.write.mode("overwrite").options(**WRITE_OPTIONS)
        writer.partitionBy("vehicle_id", "date").parquet(out)

    _, times = _runs(run, repeat, warmup)
    shutil.rmtree(out, ignore_errors=True)
    return times


INGEST_TARGET = 500_000
"""Records/s ``ingest`` should reach at 10M records on this machine (the ingest target)."""


def run(n: int, work: Path, spark, repeat: int, warmup: int, ingest_repeat: int) -> None:  # type: ignore[no-untyped-def]
    from vehicle_middleware.telemetry_export import job
    from vehicle_middleware.telemetry_export.synth import write_fleet

    from bench import spark_pandas

    fleet = work / f"fleet-{n}"
    if not fleet.exists():
        # 100 Hz signals (10 ms ticks), as in the figures of BENCHMARKS.md: the
        # README's fleet has 1 Hz ones, whose 1 s drop-rate windows hold one
        # event each and would change what is measured, not the code.
        _, s, _ = timed(
            lambda: write_fleet(
                str(fleet),
                vehicles=max(1, n // 100_000),
                records=min(n, 100_000),
                seed=11,
                tick_ns=10_000_000,
            )
        )
        print(f"  synth {n:,} records: {s:.1f} s (not part of the figures)", flush=True)
    dataset, report = str(work / f"dataset-{n}"), str(work / f"report-{n}")
    pandas_report = str(work / f"report-pandas-{n}")
    counts, t_ingest, _ = timed(lambda: job.ingest(spark, [str(fleet)], dataset), ingest_repeat)
    rows = counts["records"]
    t_text = min(text_floor(spark, fleet, repeat, warmup)[warmup:])
    t_parse = min(parse_ceiling(spark, fleet, repeat, warmup)[warmup:])
    t_write = min(write_floor(spark, dataset, str(work / "rewrite"), ingest_repeat, 1)[1:])
    summary, analyze_times = _runs(
        lambda: job.analyze(spark, dataset, report, default_stale_ns=5 * 10**9), repeat, warmup
    )
    scan_times = scan_floor(spark, dataset, repeat, warmup)
    t_first, analyzed, scanned = analyze_times[0], analyze_times[warmup:], scan_times[warmup:]
    t_analyze, t_scan = min(analyzed), min(scanned)
    pd_summary, t_pandas, _ = timed(
        lambda: spark_pandas.analyze(dataset, pandas_report, window_ns=10**9, stale_ns=5 * 10**9),
        repeat,
        warmup,
    )
    # The same findings, to the last app and key, and tables of the same sizes.
    assert pd_summary == summary, (pd_summary, summary)
    for name in ("seq_gaps", "reconciliation", "stale", "drop_rates", "boots", "boot_integrity"):
        sizes = [spark.read.parquet(f"{out}/{name}").count() for out in (report, pandas_report)]
        assert sizes[0] == sizes[1], (name, sizes)
    print(
        f"{rows:>12,} {rows / t_ingest:>12,.0f} {rows / t_parse:>12,.0f} "
        f"{rows / t_text:>12,.0f} "
        f"{t_ingest / t_text:>9.1f}x {rows / t_analyze:>12,.0f} "
        f"{rows / t_first:>12,.0f} {rows / t_scan:>12,.0f} {rows / t_pandas:>12,.0f} "
        f"{t_analyze / t_scan:>9.1f}x {median(analyzed) / median(scanned):>9.1f}x "
        f"{t_pandas / t_analyze:>9.1f}x",
        flush=True,
    )
    if rows >= 9_000_000:
        met = "met" if rows / t_ingest >= INGEST_TARGET else "NOT met"
        print(
            f"  ingest target {INGEST_TARGET:,} records/s at 10M: {met} "
            f"({rows / t_ingest:,.0f}/s; parsing alone {rows / t_parse:,.0f}/s, writing the "
            f"dataset alone {rows / t_write:,.0f}/s: the two together at best "
            f"{rows / (t_parse + t_write):,.0f}/s)",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--work", default=None, help="where the data goes (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    parser.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="analyze, the scan and pandas run this many times each; the best counts",
    )
    parser.add_argument(
        "--ingest-repeat",
        type=int,
        default=1,
        help="ingest runs this many times; the best counts",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="runs of each before those (not counted: JIT compilation, caches)",
    )
    args = parser.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="vmw-bench-spark-"))
    from vehicle_middleware.telemetry_export.session import build_session

    spark = build_session("local[*]", shuffle_partitions=16, extra={"spark.driver.memory": "6g"})
    spark.sparkContext.setLogLevel("ERROR")
    # The ingest's own line per batch: how long its passes took.
    logging.basicConfig(format="  %(message)s")
    logging.getLogger("vehicle_middleware.telemetry_export.ingest").setLevel(logging.INFO)
    print(
        f"{'records':>12} {'ingest/s':>12} {'parse/s':>12} {'text/s':>12} {'vs text':>10} "
        f"{'analyze/s':>12} {'1st/s':>12} {'scan/s':>12} "
        f"{'pandas/s':>12} "
        f"{'vs scan':>10} {'median':>10} {'pandas/spark':>10}"
    )
    try:
        for n in args.records:
            run(n, work, spark, args.repeat, args.warmup, args.ingest_repeat)
    finally:
        spark.stop()
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
