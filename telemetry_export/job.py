"""The jobs: wiring session, extract, transforms and load. No logic of its own."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from telemetry_export import extract, load, transforms

__all__ = ["analyze", "ingest"]


def ingest(spark: SparkSession, inputs: Sequence[str], output: str) -> dict[str, int]:
    """Journal segments -> Parquet dataset partitioned by vehicle and date.

    Bad lines go to ``OUTPUT/_bad`` (JSON lines with source and problem);
    returns the counts.
    """
    good, bad = transforms.parse_lines(extract.read_lines(spark, inputs))
    good = good.cache()
    load.write_table(good, f"{output}/records", partition_by=["vehicle_id", "date"])
    bad.write.mode("overwrite").json(f"{output}/_bad")
    counts = {"records": good.count(), "bad_lines": _bad_lines(spark, output).count()}
    good.unpersist()
    return counts


_BAD_SCHEMA = "source string, value string, problem string"


def _bad_lines(spark: SparkSession, dataset: str) -> DataFrame:
    return spark.read.schema(_BAD_SCHEMA).json(f"{dataset}/_bad")


def analyze(
    spark: SparkSession,
    dataset: str,
    output: str,
    *,
    thresholds: Sequence[tuple[str, int]] = (),
    default_stale_ns: int = 5_000_000_000,
    window_ns: int = 1_000_000_000,
) -> dict[str, Any]:
    """The findings of a dataset written by ``ingest``; returns the summary."""
    records = extract.read_dataset(spark, f"{dataset}/records").cache()
    ordered = transforms.order_in_boot(records)
    tables: dict[str, DataFrame] = {
        "chain": transforms.chain_breaks(ordered),
        "journal_gaps": transforms.journal_gaps(ordered),
        "boots": transforms.boots(records),
    }
    gaps = transforms.seq_gaps(records).cache()
    tables["seq_gaps"] = gaps
    tables["reconciliation"] = transforms.seq_reconciliation(records, gaps)
    tables["stale"] = transforms.stale_intervals(
        records, thresholds=thresholds, default_ns=default_stale_ns
    )
    tables["drop_rates"] = transforms.drop_rates(records, window_ns=window_ns)
    for name, df in tables.items():
        load.write_table(df, f"{output}/{name}")
    written = {name: spark.read.parquet(f"{output}/{name}") for name in tables}

    kinds = {
        r["kind"]: r["n"] for r in records.groupBy("kind").agg(F.count("*").alias("n")).collect()
    }
    boots = written["boots"]
    totals = (
        written["reconciliation"]
        .agg(
            F.coalesce(F.sum("missing"), F.lit(0)).alias("missing"),
            F.coalesce(F.sum("unexplained"), F.lit(0)).alias("unexplained"),
        )
        .first()
    )
    jg = (
        written["journal_gaps"]
        .agg(
            F.coalesce(F.sum("missing_records"), F.lit(0)).alias("m"),
            F.coalesce(F.sum("reported_dropped"), F.lit(0)).alias("r"),
        )
        .first()
    )
    assert totals is not None
    assert jg is not None
    summary: dict[str, Any] = {
        "records": int(records.count()),
        "bad_lines": int(_bad_lines(spark, dataset).count()),
        "vehicles": int(records.select("vehicle_id").distinct().count()),
        "boots": int(boots.count()),
        "restarts": int(boots.where("restart").count()),
        "delivered": int(kinds.get("delivered", 0)),
        "dropped": int(kinds.get("evicted", 0) + kinds.get("lost", 0)),
        "seq_gaps": int(written["seq_gaps"].count()),
        "missing_seqs": int(totals["missing"]),
        "unexplained_seqs": int(totals["unexplained"]),
        "stale_intervals": int(written["stale"].count()),
        "broken_chains": int(written["chain"].where("broken_links > 0").count()),
        "missing_journal_records": int(jg["m"]),
        "reported_journal_drops": int(jg["r"]),
    }
    if "://" not in output or output.startswith("file://"):
        local = Path(output.removeprefix("file://"))
        rows = {
            "drop_rates": [r.asDict() for r in written["drop_rates"].limit(5000).collect()],
            "stale": [r.asDict() for r in written["stale"].limit(5000).collect()],
            "chain": [r.asDict() for r in written["chain"].collect()],
        }
        load.write_report(local, summary, rows)
    gaps.unpersist()
    records.unpersist()
    return summary
