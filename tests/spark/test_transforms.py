"""Each transform on a small inline DataFrame with an explicit schema."""

from __future__ import annotations

import itertools
import json
import random
import shutil

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual
from vehicle_middleware.contract.journal.chain import Chain, OffsetCounter
from vehicle_middleware.telemetry_export import chain, jvm, transforms
from vehicle_middleware.telemetry_export.schema import RECORD

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
        [
            (good_line, "s"),
            (tampered, "s"),
            ("{not json", "s"),
            ('{"kind":"x"}', "s"),
            (good_line.replace('"offset":', '"offset":4294967296,"x":'), "s"),
            (good_line.replace('"offset":', '"offset":-1,"x":'), "s"),
        ],
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
        "offset is not a uint32",
        "offset is not a uint32",
    ]


def records(spark: SparkSession, rows: list[dict[str, object]]):
    full = []
    for i, r in enumerate(rows):
        base = {f.name: None for f in RECORD.fields}
        base.update({**BOOT, "time_ns": 1_000 + i, "prev_hash": "", "hash": f"h{i}"})
        base.update(r)
        full.append(base)
    return spark.createDataFrame(full, RECORD)


def linked(spark: SparkSession, rows: list[dict[str, object]]):
    """Records as ingest stores them (the chain is apart, in the runs: see :func:`chain_of`)."""
    return records(spark, rows)


TRIMS = "vehicle_id string, boot_id string, kept_offset long, kept_prev_hash string"


def chain_of(spark: SparkSession, df) -> list:
    """Per boot, the chain of ``df``'s records (with ``hash_ok``) as one ingest
    batch cuts it into runs and the analysis links them, and its first broken
    offset."""
    runs = chain.link_runs(df.select(*chain.LINK_COLUMNS))
    facts = chain.chain_facts(runs, spark.createDataFrame([], TRIMS))
    return facts.withColumn("first_broken_offset", chain.offset_of(F.col("first_broken"))).collect()


def activity(df, *, bucket_ns: int = 1, window_ns: int = 1_000_000_000):
    return transforms.activity(df, bucket_ns=bucket_ns, window_ns=window_ns)


def test_a_boot_is_ordered_across_the_offset_wrap(spark: SparkSession) -> None:
    df = records(
        spark,
        [
            {"kind": "start", "offset": 2**32 - 2, "hash": "a", "prev_hash": ""},
            {"kind": "publish", "offset": 2**32 - 1, "hash": "b", "prev_hash": "a"},
            {"kind": "publish", "offset": 0, "hash": "c", "prev_hash": "b"},
            {"kind": "publish", "offset": 3, "hash": "d", "prev_hash": "c"},  # 1, 2 lost
        ],
    )
    [boot] = chain_of(spark, df.withColumn("hash_ok", F.lit(True)))
    assert (boot.first_offset, boot.missing_records, boot.broken_links) == (2**32 - 2, 2, 0)


def test_seq_gaps_are_reconciled_with_drop_records(spark: SparkSession) -> None:
    d = {"kind": "delivered", "app": "slow", "key_id": 7, "queue": 0}
    df = linked(
        spark,
        [
            {**d, "seq": 1, "offset": 1},
            {"kind": "evicted", "app": "slow", "key_id": 7, "queue": 0, "seq": 2, "offset": 2},
            {**d, "seq": 4, "offset": 3},  # 2 explained, 3 not
            {"kind": "lost", "app": "slow", "key_id": 7, "queue": 0, "seq": 5, "offset": 4},
        ],
    )
    gaps = transforms.seq_gaps(activity(df))
    assert [(g.from_seq, g.to_seq, g.missing) for g in gaps.collect()] == [(2, 3, 2)]
    rec = transforms.seq_reconciliation(activity(df)).collect()
    assert [(r.missing, r.explained, r.unexplained, r.drops_after_last_delivery) for r in rec] == [
        (2, 1, 1, 1)
    ]


def test_reconciliation_counts_what_listing_every_seq_would(spark: SparkSession) -> None:
    """Seqs across several blocks of 64, repeated deliveries and drops, drops
    after the last delivery and keys with drops only, against plain Python."""
    rng = random.Random(7)
    rows: list[dict[str, object]] = []
    expect = {}
    for key_id in range(1, 5):
        top = rng.randrange(1, 300)
        delivered = sorted({s for s in range(1, top + 1) if rng.random() < 0.6} | {top})
        if key_id == 4:
            delivered = []  # drops only
        dropped = [s for s in range(1, top + 40) if s not in delivered and rng.random() < 0.5]
        base = {"app": "a", "key_id": key_id, "queue": 0}
        for s in delivered + delivered[:5]:  # a few delivered twice
            rows.append({**base, "kind": "delivered", "seq": s})
        for s in dropped + dropped[:5]:  # a few dropped twice
            rows.append({**base, "kind": rng.choice(["evicted", "lost"]), "seq": s})
        last = max(delivered, default=None)
        missing = 0 if last is None else last - len(delivered)
        explained = sum(1 for s in dropped if last is not None and s < last)
        after = sum(1 for s in dropped if last is None or s > last)
        expect[key_id] = (missing, explained, after, missing - explained)
    rng.shuffle(rows)
    df = linked(spark, [{**r, "offset": i} for i, r in enumerate(rows)])
    got = {
        r.key_id: (r.missing, r.explained, r.drops_after_last_delivery, r.unexplained)
        for r in transforms.seq_reconciliation(activity(df)).collect()
    }
    assert got == expect
    gaps = transforms.seq_gaps(activity(df)).groupBy("key_id").agg(F.sum("missing").alias("m"))
    assert {r.key_id: r.m for r in gaps.collect()} == {k: m for k, (m, *_) in expect.items() if m}


def plain_gaps(delivered: list[int]) -> list[tuple[int, int]]:
    """Each gap between consecutive distinct delivered seqs (seq 0 counts as delivered)."""
    seqs = [0, *sorted(set(delivered))]
    return [(a + 1, b - 1) for a, b in itertools.pairwise(seqs) if b > a + 1]


def test_seq_gaps_are_those_between_consecutive_deliveries(spark: SparkSession) -> None:
    """Gaps at block edges (63/64, 127/128), across whole empty blocks, before the
    first delivery, repeated deliveries, and random sets against sorting the seqs;
    each gap carries the queue and window of the delivery after it."""
    rng = random.Random(11)
    cases = {
        1: [1, 63, 64, 128, 200],
        2: [64, 65, 127, 129],
        3: [2, 3, 4],
        4: [1, 2, 3],
        5: sorted({s for s in range(1, 400) if rng.random() < 0.5}),
        6: sorted({s for s in range(1, 700) if rng.random() < 0.05}),
    }
    rows: list[dict[str, object]] = []
    when: dict[tuple[int, int], int] = {}
    for key_id, seqs in cases.items():
        for s in seqs + seqs[::7]:  # every 7th seq delivered again, later
            window = len(rows) // 10  # ten deliveries per window
            when.setdefault((key_id, s), window)
            rows.append(
                {
                    "kind": "delivered",
                    "app": "a",
                    "key_id": key_id,
                    "queue": key_id % 3,
                    "seq": s,
                    "time_ns": window * 100,
                }
            )
    rng.shuffle(rows)
    df = linked(spark, [{**r, "offset": i} for i, r in enumerate(rows)])
    got = sorted(
        (g.key_id, g.from_seq, g.to_seq, g.missing, g.queue, g.window_start_ns)
        for g in transforms.seq_gaps(activity(df, window_ns=100)).collect()
    )
    expect = sorted(
        (k, a, b, b - a + 1, k % 3, when[(k, b + 1)] * 100)
        for k, seqs in cases.items()
        for a, b in plain_gaps(seqs)
    )
    assert expect
    assert got == expect


def test_failure_intervals_and_filtered_writes_stay_apart_from_drops(spark: SparkSession) -> None:
    """A key's failures as intervals (a code kept is one interval; another code
    or a value ends it; the last one open), and a filtered subscription's writes
    held back: counted beside the drops, leaving no seq gap."""
    p = {"kind": "publish", "key": "Vehicle.Speed", "key_id": 1}
    d = {"kind": "delivered", "app": "dash", "key_id": 1, "queue": 0}
    df = linked(
        spark,
        [
            {**p, "time_ns": 10, "offset": 1},
            {**p, "time_ns": 20, "offset": 2, "failure": "sensor_fault"},
            {**p, "time_ns": 30, "offset": 3, "failure": "sensor_fault"},  # the same interval
            {**p, "time_ns": 40, "offset": 4, "failure": "overload"},  # another code: another
            {**p, "time_ns": 50, "offset": 5},  # a value ends it
            {**p, "time_ns": 60, "offset": 6, "failure": "not_available"},
            {"kind": "publish", "key": "Vehicle.Other", "key_id": 2, "time_ns": 60, "offset": 6},
            {**d, "seq": 1, "offset": 7, "writes": 3},  # stood for 3 writes: 2 filtered
            {**d, "seq": 2, "offset": 8},
            {"kind": "evicted", "app": "dash", "key_id": 1, "queue": 0, "seq": 3, "offset": 9},
            {**d, "seq": 4, "offset": 10, "writes": 2},
            {**d, "app": "plain", "seq": 1, "offset": 11},
        ],
    )
    failures = transforms.failure_intervals(df).orderBy("from_ns")
    assert [(f.key, f.code, f.from_ns, f.to_ns, f.duration_ns) for f in failures.collect()] == [
        ("Vehicle.Speed", "sensor_fault", 20, 40, 20),
        ("Vehicle.Speed", "overload", 40, 50, 10),
        ("Vehicle.Speed", "not_available", 60, None, None),  # open
    ]
    filtered = transforms.filtered_writes(activity(df)).collect()
    assert [
        (r.app, r.delivered, r.delivered_writes, r.dropped, r.dropped_writes, r.filtered)
        for r in filtered
    ] == [("dash", 3, 6, 1, 1, 3)]
    [rec] = transforms.seq_reconciliation(activity(df)).collect()
    assert (rec.missing, rec.explained, rec.unexplained) == (1, 1, 0)  # the drop, no more


def test_stale_intervals_use_the_longest_matching_prefix(spark: SparkSession) -> None:
    p = {"kind": "publish", "key_id": 1, "offset": 0}
    df = linked(
        spark,
        [
            {**p, "key": "Vehicle.Cabin.Temp", "time_ns": 0},
            {**p, "key": "Vehicle.Cabin.Temp", "time_ns": 3_000},  # 3 us > 2 us: stale
            {**p, "key": "Vehicle.Cabin.Temp", "time_ns": 4_000},
        ],
    )
    thresholds = [("Vehicle", 10_000), ("Vehicle.Cabin", 2_000)]
    bucket = transforms.stale_bucket_ns(thresholds, 1)
    stale = transforms.stale_intervals(
        activity(df, bucket_ns=bucket), thresholds=thresholds, default_ns=1
    )
    assert [(s.from_ns, s.to_ns, s.threshold_ns) for s in stale.collect()] == [(0, 3_000, 2_000)]


def test_stale_intervals_are_those_of_consecutive_events(spark: SparkSession) -> None:
    """Writes and deliveries at random times, against sorting each key's events."""
    rng = random.Random(3)
    thresholds, default = [("K.b", 50)], 35
    names = {1: "K.a", 2: "K.b"}
    rows: list[dict[str, object]] = []
    for key_id, name in names.items():
        for _ in range(60):
            rows.append({"kind": "publish", "key": name, "key_id": key_id})
        for app in ("x", "y"):
            for _ in range(40):
                rows.append({"kind": "delivered", "app": app, "key_id": key_id, "seq": 1})
    for i, r in enumerate(rows):
        r.update(time_ns=rng.randrange(0, 2_000), offset=i)
    expect = set()
    for key_id, name in names.items():
        limit = 50 if name.startswith("K.b") else default
        for what, app in (("write", None), ("delivery", "x"), ("delivery", "y")):
            kind = "publish" if what == "write" else "delivered"
            times = sorted(
                r["time_ns"]
                for r in rows
                if r["key_id"] == key_id and r["kind"] == kind and r.get("app") == app
            )
            for a, b in itertools.pairwise(times):
                if b - a > limit:
                    expect.add((what, app, name, key_id, a, b, limit))
    bucket = transforms.stale_bucket_ns(thresholds, default)
    stale = transforms.stale_intervals(
        activity(linked(spark, rows), bucket_ns=bucket), thresholds=thresholds, default_ns=default
    )
    got = {
        (s.what, s.app, s.key, s.key_id, s.from_ns, s.to_ns, s.threshold_ns)
        for s in stale.collect()
    }
    assert expect
    assert got == expect


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
    breaks = chain_of(spark, raw.withColumn("hash_ok", F.col("offset") != 13))
    assert [(b.broken_links, b.first_broken_offset) for b in breaks] == [(2, 12)]


def test_the_first_broken_link_is_first_by_position_past_2_to_the_31(
    spark: SparkSession,
) -> None:
    # Positions 0, 95 and 2,999,999,995: the first broken link is at offset
    # 100, though the other one's position does not fit a signed 32-bit int.
    raw = records(
        spark,
        [
            {"kind": "start", "offset": 5, "hash": "a", "prev_hash": ""},
            {"kind": "publish", "offset": 3_000_000_000, "hash": "c", "prev_hash": "b"},
            {"kind": "publish", "offset": 100, "hash": "b", "prev_hash": "a"},
        ],
    )
    breaks = chain_of(spark, raw.withColumn("hash_ok", F.col("offset") == 5))
    assert [(b.broken_links, b.first_broken_offset) for b in breaks] == [(2, 100)]


def test_drop_rates_per_app_queue_and_window(spark: SparkSession) -> None:
    base = {"app": "slow", "queue": 1, "offset": 0}
    df = linked(
        spark,
        [
            {**base, "kind": "delivered", "time_ns": 10},
            {**base, "kind": "evicted", "time_ns": 20},
            {**base, "kind": "delivered", "time_ns": 110},
        ],
    )
    rates = transforms.drop_rates(activity(df, window_ns=100)).orderBy("window_start_ns").collect()
    assert [(r.window_start_ns, r.events, r.dropped, r.drop_rate) for r in rates] == [
        (0, 2, 1, 0.5),
        (100, 1, 0, 0.0),
    ]


def test_drops_over_time_add_up_every_vehicle_per_app_queue_and_window(
    spark: SparkSession,
) -> None:
    rates = spark.createDataFrame(
        [
            ("car-1", "slow", 1, 0, 4, 1, 0.25),
            ("car-2", "slow", 1, 0, 6, 3, 0.5),
            ("car-2", "slow", 2, 0, 2, 0, 0.0),
            ("car-1", "slow", 1, 100, 1, 1, 1.0),
            ("car-1", "nav", 1, 0, 5, 0, 0.0),
        ],
        "vehicle_id string, app string, queue int, window_start_ns long, events long,"
        " dropped long, drop_rate double",
    )
    expected = spark.createDataFrame(
        [("slow", 1, 0, 10, 4), ("slow", 2, 0, 2, 0), ("slow", 1, 100, 1, 1), ("nav", 1, 0, 5, 0)],
        "app string, queue int, window_start_ns long, events long, dropped long",
    )
    assertDataFrameEqual(transforms.drops_over_time(rates), expected)


def test_time_windows_round_down_before_and_after_the_epoch(spark: SparkSession) -> None:
    base = {"app": "slow", "queue": 1, "offset": 0, "kind": "delivered"}
    df = linked(spark, [{**base, "time_ns": t} for t in (-101, -100, -1, 0, 99, 100)])
    rates = transforms.drop_rates(activity(df, window_ns=100)).orderBy("window_start_ns").collect()
    windows = [(r.window_start_ns, r.events) for r in rates]
    assert windows == [(-200, 1), (-100, 2), (0, 2), (100, 1)]


def test_the_jvm_parse_reads_every_line_as_from_json_does(spark: SparkSession) -> None:
    """Lines the middleware writes (each kind, batch records, escapes) and lines it
    does not (whitespace, non-ASCII, numbers of other shapes, fields of other
    types, unknown nested fields, duplicates, broken JSON): the fast path
    parses the first as ``from_json`` does, and leaves the others to it."""
    if shutil.which("javac") is None:
        pytest.skip("no JDK: from_json reads every line")
    assert jvm.available(spark)
    chain_lines = [
        {"kind": "start", "version": "synth", "settings": {"a": [1, 2.5, {"b": None}]}},
        {"kind": "publish", "key": "Vehicle.Speed", "key_id": 1, "version": 3, "changed": True},
        {"kind": "delivered", "app": "a", "key_id": 2, "seq": 9, "queue": 0, "sent_ns": -5},
        {"kind": "evicted", "app": "a", "reason": 'queue "full"\n\\ \t/\u00e9'},
        {"kind": "publish_batch", "writer": "p", "key_ids": [1, 2], "keys": ["A", None]},
        {"kind": "delivered_batch", "seqs": [], "queues": [0, 2147483647], "changes": [False]},
        {"kind": "journal_trimmed", "kept_offset": None, "trimmed_boot_id": "b", "files": 0},
        {"kind": "stop", "reason": "\U0001f600", "count": -9223372036854775808},
    ]
    good = [value for value, _ in lines(spark, chain_lines).collect()]
    line = good[1]
    odd = [
        line.replace(',"', ', "'),  # whitespace
        line.replace('"Vehicle.Speed"', '"Véhicule"'),  # raw non-ASCII
        line.replace('"version":3', '"version":3.0'),
        line.replace('"version":3', '"version":3e0'),
        line.replace('"version":3', '"version":03'),
        line.replace('"version":3', '"version":"3"'),
        line.replace('"version":3', '"version":9223372036854775808'),
        line.replace('"key_id":1', '"key_id":1,"key_id":2'),  # the last wins
        line.replace('"key":"Vehicle.Speed"', '"key":5'),
        line.replace('"changed":true', '"changed":1'),
        line.replace('"changed":true', '"changed":null'),
        line.replace('"kind"', '"x":{"y":[1,{"z":"}"}]},"kind"'),
        line.replace('"kind"', '"x":1.5e-3,"kind"'),
        line.replace('"kind"', '"x":1.,"kind"'),
        line.replace('"kind"', '"x":01,"kind"'),
        good[2].replace('"queue":0', '"queue":2147483648'),
        good[4].replace('"key_ids":[1,2]', '"key_ids":[1,"2"]'),
        good[4].replace('"key_ids":[1,2]', '"key_ids":[1,null]'),
        line.replace('"Vehicle.Speed"', '"Vehicle\\u0041\\ud83d"'),
        line[:-1],
        line + " ",
        line + "x",
        "{}",
        "[]",
        "{not json",
        "",
        line[:9] + line[9:73].upper() + line[73:],  # the hash in upper case: it fails
        '{"hash":"ab","kind":"x"}',  # shorter than the hash's prefix
        '{"hash":"' + "é" * 64 + '","kind":"x"}',  # characters of two bytes in the prefix
    ]
    df = spark.createDataFrame([(v, "s") for v in good + odd], "value string, source string")
    fast = transforms.parse_lines(df, fast=True)
    slow = transforms.parse_lines(df, fast=False)
    assert fast.exceptAll(slow).count() == 0
    assert slow.exceptAll(fast).count() == 0
    # The fast path read the lines the middleware writes, but for the start
    # record (its version is a string where the schema has a number) and the
    # ones with non-ASCII text (written raw): from_json read those.
    read = F.call_function(jvm.FUNCTION, F.col("value").cast("binary"), F.lit(jvm.SPEC))
    taken = {r.value for r in df.where(read.isNotNull()).collect()}
    expected = {good[i] for i in (1, 2, 4, 5, 6)}
    assert taken == expected | {odd[i] for i in (7, 10, 11, 12, 17, 22, 26, 27)}
    assert fast.where("hash_ok").count() == len(good)


def test_every_field_of_the_journals_records_reaches_the_dataset(spark: SparkSession) -> None:
    """The fields of records the analysis does not read (a consumer cut loose,
    a peer link, a refused cluster event, a stale key, a provider gone, the
    start's settings) are columns of the records, not dropped on the way: the
    journal's fields have one definition, and ingest reads by it."""
    written = [
        {"kind": "start", "address": "127.0.0.1:1", "level": "full", "settings": {"window": 16}},
        {
            "kind": "consumer_cut",
            "app": "collector",
            "component": "fleet",
            "lost_boot_id": "b0",
            "from_offset": 4294967290,
            "to_offset": 3,
            "count": 10,
            "reason": "bound",
        },
        {"kind": "peer_up", "peer": "b", "address": "127.0.0.1:2", "boot": "x1"},
        {"kind": "peer_down", "peer": "b", "address": "127.0.0.1:2", "error": "reset"},
        {
            "kind": "cluster_refused",
            "peer": "b",
            "reason": "tampered",
            "count": 2,
            "origin": "c",
            "seq": 7,
            "event_hash": "ab" * 32,
            "detail": "hash",
        },
        {
            "kind": "key_stale",
            "key": "Vehicle.Speed",
            "key_id": 1,
            "write_time_ns": 5,
            "period_ns": 100,
            "apps": ["dash", "log"],
            "transition": True,
        },
        {
            "kind": "provider_gone",
            "app": "p",
            "key_ids": [1],
            "keys": ["Vehicle.Speed"],
            "apps": [],
        },
    ]
    for fast in (True, False):
        parsed = transforms.good_records(transforms.parse_lines(lines(spark, written), fast=fast))
        got = {r.kind: r for r in parsed.collect()}
        assert json.loads(got["start"].settings) == {"window": 16}
        assert (got["start"].address, got["start"].level) == ("127.0.0.1:1", "full")
        cut = got["consumer_cut"]
        assert (cut.component, cut.from_offset, cut.to_offset, cut["count"]) == (
            "fleet",
            4294967290,
            3,
            10,
        )
        assert (got["peer_up"].peer, got["peer_up"].boot) == ("b", "x1")
        assert got["peer_down"].error == "reset"
        refused = got["cluster_refused"]
        assert (refused.origin, refused.seq, refused.event_hash, refused.detail) == (
            "c",
            7,
            "ab" * 32,
            "hash",
        )
        stale = got["key_stale"]
        assert (stale.period_ns, stale.apps, stale.transition) == (100, ["dash", "log"], True)
        assert got["provider_gone"].apps == []
    # Past the batches' expansion too, which keeps the arrays other kinds carry.
    events = transforms.expand_batches(
        transforms.good_records(transforms.parse_lines(lines(spark, written), fast=True))
    )
    gone = events.where("kind = 'provider_gone'").first()
    assert gone is not None
    assert (gone.key_ids, gone["keys"], gone.apps) == ([1], ["Vehicle.Speed"], [])
