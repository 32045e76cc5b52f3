"""Spark benchmark of the telemetry analysis: ``make bench-spark``.

For 1M and 10M synthetic journal records (``telemetry_export synth``), prints
rows/s of ``ingest`` and ``analyze`` beside, from the same run, the floor: a
Spark scan of the same Parquet dataset reading every column the analysis uses
and aggregating each; and the same analysis written plainly in pandas, the
single-machine alternative. Local mode, ``local[*]`` on this machine. Each
of analyze, the scan and pandas runs ``--repeat`` times (default 2) and the
best time counts, the same for all three; ingest runs once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from telemetry_export.transforms import ANALYSED as USED


def timed(fn, repeat: int = 1):  # type: ignore[no-untyped-def]
    """``fn``'s result and its best time of ``repeat`` runs (the machine is noisy:
    the least disturbed run is the one that says what the code costs)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def scan_floor(spark, dataset: str, repeat: int) -> float:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    # Every column read, and each aggregated: strings counted, the others'
    # maximum. Read as the job reads it: listing the dataset included.
    text = ("kind", "vehicle_id", "boot_id", "app", "key")
    aggs = [F.count(c) if c in text else F.max(c) for c in USED]
    _, seconds = timed(
        lambda: spark.read.parquet(f"{dataset}/records").select(*USED).agg(*aggs).collect(),
        repeat,
    )
    return seconds


def pandas_analysis(dataset: str, window_ns: int, stale_ns: int) -> dict[str, int]:
    """The same findings, written plainly in pandas over the same columns.

    Like the Spark job, it reads what ``ingest`` stored: each record's place in
    its boot (``pos``), whether its chain link holds (``link_ok``) and the
    offsets missing before it.
    """
    import numpy as np
    import pandas as pd

    df = pd.read_parquet(f"{dataset}/records", columns=USED)
    boot = ["vehicle_id", "boot_id"]
    per_boot = df.groupby(boot, observed=True).agg(
        first_ns=("time_ns", "min"), broken=("link_ok", lambda ok: int((~ok).sum()))
    )
    restarts = int((per_boot.groupby("vehicle_id", observed=True)["first_ns"].rank() > 1).sum())
    missing_records = int(df["missing_before"].sum())
    d = df[df.kind == "delivered"].sort_values([*boot, "app", "key_id", "seq"])
    d_prev = d.groupby([*boot, "app", "key_id"], observed=True)["seq"].shift().fillna(0)
    jumps = d[d["seq"] > d_prev + 1].assign(from_seq=d_prev + 1)
    seqs = (
        np.concatenate([np.arange(a, b) for a, b in zip(jumps.from_seq, jumps.seq, strict=True)])
        if len(jumps)
        else np.array([])
    )
    sizes = (jumps.seq - jumps.from_seq).astype(int)
    missing = pd.DataFrame(
        {
            "vehicle_id": np.repeat(jumps.vehicle_id.values, sizes),
            "boot_id": np.repeat(jumps.boot_id.values, sizes),
            "app": np.repeat(jumps.app.values, sizes),
            "key_id": np.repeat(jumps.key_id.values, sizes),
            "seq": seqs,
        }
    )
    drops = df[df.kind.isin(["evicted", "lost"])][[*boot, "app", "key_id", "seq"]]
    explained = missing.merge(drops.drop_duplicates(), on=[*boot, "app", "key_id", "seq"])
    stale = 0
    for kinds, group in (
        (["publish"], [*boot, "key_id"]),
        (["delivered"], [*boot, "app", "key_id"]),
    ):
        events = df[df.kind.isin(kinds)].sort_values([*group, "time_ns"])
        stale += int((events.groupby(group, observed=True)["time_ns"].diff() > stale_ns).sum())
    ev = df[df.kind.isin(["delivered", "evicted", "lost"])]
    rates = ev.groupby(
        ["vehicle_id", "app", "queue", ev.time_ns // window_ns], observed=True
    ).size()
    return {
        "boots": len(per_boot),
        "restarts": restarts,
        "broken_chains": int((per_boot["broken"] > 0).sum()),
        "missing_journal_records": missing_records,
        "seq_gaps": len(jumps),
        "missing_seqs": len(missing),
        "unexplained_seqs": len(missing) - len(explained),
        "stale_intervals": stale,
        "rate_windows": len(rates),
    }


def run(n: int, work: Path, spark, repeat: int) -> None:  # type: ignore[no-untyped-def]
    from telemetry_export import job
    from telemetry_export.synth import write_fleet

    fleet = work / f"fleet-{n}"
    if not fleet.exists():
        _, s = timed(
            lambda: write_fleet(
                str(fleet), vehicles=max(1, n // 100_000), records=min(n, 100_000), seed=11
            )
        )
        print(f"  synth {n:,} records: {s:.1f} s (not part of the figures)", flush=True)
    dataset, report = str(work / f"dataset-{n}"), str(work / f"report-{n}")
    counts, t_ingest = timed(lambda: job.ingest(spark, [str(fleet)], dataset))
    rows = counts["records"]
    summary, t_analyze = timed(
        lambda: job.analyze(spark, dataset, report, default_stale_ns=5 * 10**9), repeat
    )
    t_scan = scan_floor(spark, dataset, repeat)
    pd_out, t_pandas = timed(lambda: pandas_analysis(dataset, 10**9, 5 * 10**9), repeat)
    rate_windows = spark.read.parquet(f"{report}/drop_rates").count()
    same = {k: v for k, v in pd_out.items() if k != "rate_windows"}
    assert same == {k: summary[k] for k in same}, (pd_out, summary)
    assert pd_out["rate_windows"] == rate_windows, (pd_out, rate_windows)
    print(
        f"{rows:>12,} {rows / t_ingest:>12,.0f} {rows / t_analyze:>12,.0f} "
        f"{rows / t_scan:>12,.0f} {rows / t_pandas:>12,.0f} "
        f"{t_analyze / t_scan:>9.1f}x {t_pandas / t_analyze:>9.1f}x",
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
        default=2,
        help="analyze, the scan and pandas run this many times each; the best counts",
    )
    args = parser.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="vmw-bench-spark-"))
    from telemetry_export.session import build_session

    spark = build_session("local[*]", shuffle_partitions=16, extra={"spark.driver.memory": "6g"})
    spark.sparkContext.setLogLevel("ERROR")
    print(
        f"{'records':>12} {'ingest/s':>12} {'analyze/s':>12} {'scan/s':>12} {'pandas/s':>12} "
        f"{'vs scan':>10} {'pandas/spark':>10}"
    )
    try:
        for n in args.records:
            run(n, work, spark, args.repeat)
    finally:
        spark.stop()
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
