"""Each transform on a small inline DataFrame with an explicit schema."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from middleware.journal.chain import Chain, OffsetCounter
from telemetry_export import transforms
from telemetry_export.schema import RECORD

BOOT = {"vehicle_id": "car-1", "boot_id": "b1"}


def lines(spark: SparkSession, records: list[dict[str, object]], *, start: int = 2**32 - 2):
    """Journal lines made by the middleware's own chain code."""
    chain, offsets = Chain(), OffsetCounter(start)
    out = []
    for i, r in enumerate(records):
        rec = {**BOOT, "offset": offsets.take(), "time_ns": 1_000 + i, **r}
        out.append((chain.line(rec).decode().rstrip("\n"), "seg-1"))
    return spark.createDataFrame(out, "value string, source string")


def test_parse_lines_checks_each_hash_and_sets_bad_lines_aside(spark: SparkSession) -> None:
    df = lines(spark, [{"kind": "start"}, {"kind": "stop", "reason": "x"}])
    good_line, stop_line = [r.value for r in df.collect()]
    tampered = stop_line.replace('"reason":"x"', '"reason":"y"')
    df2 = spark.createDataFrame(
        [(good_line, "s"), (tampered, "s"), ("{not json", "s"), ('{"kind":"x"}', "s")],
        "value string, source string",
    )
    parsed = transforms.parse_lines(df2)
    good, bad = transforms.good_records(parsed), transforms.bad_lines(parsed)
    assert [(r.kind, r.hash_ok) for r in good.orderBy("offset").collect()] == [
        ("start", True),
        ("stop", False),
    ]
    assert sorted(r.problem for r in bad.collect()) == [
        "missing a required field",
        "not a JSON record",
    ]


def records(spark: SparkSession, rows: list[dict[str, object]]):
    full = []
    for i, r in enumerate(rows):
        base = {f.name: None for f in RECORD.fields}
        base.update({**BOOT, "time_ns": 1_000 + i, "prev_hash": "", "hash": f"h{i}"})
        base.update(r)
        full.append(base)
    return spark.createDataFrame(full, RECORD)


def test_order_in_boot_survives_the_offset_wrap(spark: SparkSession) -> None:
    df = records(
        spark,
        [
            {"kind": "start", "offset": 2**32 - 2},
            {"kind": "publish", "offset": 2**32 - 1},
            {"kind": "publish", "offset": 0},
            {"kind": "publish", "offset": 3},  # 1 and 2 are missing
        ],
    )
    ordered = transforms.order_in_boot(df.withColumn("hash_ok", F.lit(True)))
    assert [r.pos for r in ordered.orderBy("pos").collect()] == [0, 1, 2, 5]
    gaps = transforms.boot_integrity(ordered).select(
        *transforms.BOOT, "missing_records", "reported_dropped"
    )
    assertDataFrameEqual(
        gaps,
        spark.createDataFrame(
            [("car-1", "b1", 2, 0)],
            "vehicle_id string, boot_id string, missing_records long, reported_dropped long",
        ),
    )


def test_seq_gaps_are_reconciled_with_drop_records(spark: SparkSession) -> None:
    d = {"kind": "delivered", "app": "slow", "key_id": 7, "queue": 0}
    df = records(
        spark,
        [
            {**d, "seq": 1, "offset": 1},
            {"kind": "evicted", "app": "slow", "key_id": 7, "queue": 0, "seq": 2, "offset": 2},
            {**d, "seq": 4, "offset": 3},  # 2 explained, 3 not
            {"kind": "lost", "app": "slow", "key_id": 7, "queue": 0, "seq": 5, "offset": 4},
        ],
    )
    gaps = transforms.seq_gaps(df)
    assert [(g.from_seq, g.to_seq, g.missing) for g in gaps.collect()] == [(2, 3, 2)]
    rec = transforms.seq_reconciliation(df, gaps).collect()
    assert [(r.missing, r.explained, r.unexplained, r.drops_after_last_delivery) for r in rec] == [
        (2, 1, 1, 1)
    ]


def test_stale_intervals_use_the_longest_matching_prefix(spark: SparkSession) -> None:
    p = {"kind": "publish", "key_id": 1, "offset": 0}
    df = records(
        spark,
        [
            {**p, "key": "Vehicle.Cabin.Temp", "time_ns": 0},
            {**p, "key": "Vehicle.Cabin.Temp", "time_ns": 3_000},  # 3 us > 2 us: stale
            {**p, "key": "Vehicle.Cabin.Temp", "time_ns": 4_000},
        ],
    )
    stale = transforms.stale_intervals(
        df, thresholds=[("Vehicle", 10_000), ("Vehicle.Cabin", 2_000)], default_ns=1
    )
    assert [(s.from_ns, s.to_ns, s.threshold_ns) for s in stale.collect()] == [(0, 3_000, 2_000)]


def test_chain_breaks_find_the_first_bad_link(spark: SparkSession) -> None:
    raw = records(
        spark,
        [
            {"kind": "start", "offset": 10, "hash": "a", "prev_hash": ""},
            {"kind": "publish", "offset": 11, "hash": "b", "prev_hash": "a"},
            {"kind": "publish", "offset": 12, "hash": "c", "prev_hash": "X"},  # link broken
            {"kind": "publish", "offset": 13, "hash": "d", "prev_hash": "c"},  # bytes edited
        ],
    )
    df = raw.withColumn("hash_ok", F.col("offset") != 13)
    breaks = transforms.boot_integrity(transforms.order_in_boot(df)).collect()
    assert [(b.records, b.broken_links, b.first_broken_offset) for b in breaks] == [(4, 2, 12)]


def test_drop_rates_per_app_queue_and_window(spark: SparkSession) -> None:
    base = {"app": "slow", "queue": 1, "offset": 0}
    df = records(
        spark,
        [
            {**base, "kind": "delivered", "time_ns": 10},
            {**base, "kind": "evicted", "time_ns": 20},
            {**base, "kind": "delivered", "time_ns": 110},
        ],
    )
    rates = transforms.drop_rates(df, window_ns=100).orderBy("window_start_ns").collect()
    assert [(r.window_start_ns, r.events, r.dropped, r.drop_rate) for r in rates] == [
        (0, 2, 1, 0.5),
        (100, 1, 0, 0.0),
    ]
