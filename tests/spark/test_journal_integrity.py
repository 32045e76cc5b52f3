"""The journal's own integrity in the per-boot facts: retention's trims,
deletions, losses reported by a later boot (``lost_boot_id``), and the
collector's gaps (``collect_gap``)."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from vehicle_middleware.contract.journal.chain import (
    HASH_PREFIX_LEN,
    OFFSET_MOD,
    Chain,
    OffsetCounter,
)
from vehicle_middleware.telemetry_export import chain, transforms


class _Boot:
    """One boot's journal lines, made by the middleware's own chain code."""

    def __init__(self, vehicle: str, boot: str, start: int) -> None:
        self.vehicle, self.boot = vehicle, boot
        self.chain, self.offsets = Chain(), OffsetCounter(start)
        self.records: list[dict[str, Any]] = []
        self.lines: list[str] = []

    def write(self, kind: str, **fields: Any) -> dict[str, Any]:
        rec = {"kind": kind, "vehicle_id": self.vehicle, "boot_id": self.boot}
        rec |= {"offset": self.offsets.take(), "time_ns": 1_000 + len(self.records), **fields}
        self.lines.append(self.chain.line(rec).decode().rstrip("\n"))
        self.records.append(rec)
        return rec

    def run(self, n: int) -> _Boot:
        self.write("start")
        for _ in range(n):
            self.write("publish", key="Vehicle.Speed", key_id=1)
        return self

    def trim(self, n: int, by: _Boot | None) -> None:
        """Retention removes the first ``n`` lines; ``by`` (if any) says so."""
        kept = self.records[n]
        del self.lines[:n]
        if by is not None:
            by.write(
                "journal_trimmed",
                trimmed_boot_id=self.boot,
                files=1,
                bytes=4096,
                kept_offset=kept["offset"],
                kept_prev_hash=kept["prev_hash"],
            )


GAPS = "vehicle_id string, boot_id string, from_offset long, to_offset long, count long"


def facts_of_lines(
    spark: SparkSession,
    batches: list[list[str]],
    gaps: Sequence[tuple[str, str, int, int, int]] = (),
) -> dict[tuple[str, str], Any]:
    """Per boot, :func:`transforms.boot_facts` of journal lines ingested in
    ``batches`` (each cut into runs apart, as ingest's batches are) and the
    collector's ``gaps`` (vehicle, boot, from, to, count)."""

    def parsed(lines: list[str]) -> Any:
        rows = [(line, "seg") for line in lines]
        df = spark.createDataFrame(rows, "value string, source string")
        return transforms.good_records(transforms.parse_lines(df))

    everything = parsed([line for batch in batches for line in batch])
    active = transforms.activity(
        transforms.expand_batches(everything), bucket_ns=10**9, window_ns=10**9
    )
    runs = [chain.link_runs(parsed(batch).select(*chain.LINK_COLUMNS)) for batch in batches]
    all_runs = runs[0]
    for more in runs[1:]:
        all_runs = all_runs.unionByName(more)
    g = spark.createDataFrame(list(gaps), GAPS)
    chained = chain.chain_facts(all_runs, transforms.trims(active), g.drop("count"))
    not_collected = g.groupBy(*transforms.BOOT).agg(
        F.count(F.lit(1)).alias("collect_gaps"), F.sum("count").alias("not_collected")
    )
    by_boot = transforms.boot_facts(active, chained, not_collected).collect()
    return {(r.vehicle_id, r.boot_id): r for r in by_boot}


def facts(spark: SparkSession, *boots: _Boot) -> dict[tuple[str, str], Any]:
    return facts_of_lines(spark, [[line for b in boots for line in b.lines]])


def test_retention_trims_are_accepted_and_deletions_still_break_the_chain(
    spark: SparkSession,
) -> None:
    # Trimmed by retention, said by a later boot: intact.
    trimmed, later = _Boot("car-1", "t1", 2**32 - 3).run(10), _Boot("car-1", "t2", 7).run(3)
    trimmed.trim(4, by=later)  # its chain starts across the offset wrap
    # The same trim, and a record deleted in the middle: broken there.
    cut, cut_later = _Boot("car-2", "c1", 100).run(10), _Boot("car-2", "c2", 5).run(2)
    deleted = cut.records[7]
    cut.lines.remove(cut.lines[7])
    cut.trim(4, by=cut_later)
    # Records gone from the start and no trim record: missing before offset X.
    silent = _Boot("car-3", "s1", 50).run(10)
    silent.trim(3, by=None)
    # A trim record of another vehicle does not count for this one.
    other = _Boot("car-4", "o1", 50).run(10)
    other.trim(3, by=None)
    stranger = _Boot("car-5", "x", 1).run(1)
    stranger.write(
        "journal_trimmed",
        trimmed_boot_id="o1",
        files=1,
        bytes=1,
        kept_offset=other.records[3]["offset"],
        kept_prev_hash=other.records[3]["prev_hash"],
    )
    by_boot = facts(spark, trimmed, later, cut, cut_later, silent, other, stranger)
    t = by_boot["car-1", "t1"]
    assert (t.chain, t.broken_links, t.trimmed_files, t.trimmed_bytes) == ("trimmed", 0, 1, 4096)
    assert (t.records, t.missing_records) == (7, 0)
    assert by_boot["car-1", "t2"].chain == "intact"
    c = by_boot["car-2", "c1"]
    assert (c.chain, c.broken_links) == ("broken", 1)
    assert c.first_broken_offset == deleted["offset"] + 1
    assert c.missing_records == 1
    s = by_boot["car-3", "s1"]
    assert (s.chain, s.broken_links) == ("start missing", 1)
    assert s.first_broken_offset == silent.records[3]["offset"]
    assert by_boot["car-4", "o1"].chain == "start missing"
    # (car-5 names a boot of its own it has no record of: all removed.)
    assert (by_boot["car-5", "o1"].chain, by_boot["car-5", "o1"].records) == ("trimmed", 0)


def test_a_loss_reported_by_a_later_boot_counts_for_the_boot_that_lost_it(
    spark: SparkSession,
) -> None:
    crashed = _Boot("car-1", "b1", 10).run(5)
    crashed.offsets.take()  # a failed write it never reported
    crashed.offsets.take()
    crashed.write("publish", key="Vehicle.Speed", key_id=1)
    crashed.offsets.take()  # not written before the process ended: no gap
    nxt = _Boot("car-1", "b2", 99).run(2)
    nxt.write("journal_dropped", count=2, cause="write failed", lost_boot_id="b1")
    nxt.write(
        "journal_dropped", count=1, cause="not written before the process ended", lost_boot_id="b1"
    )
    nxt.offsets.take()  # its own buffer drop, reported by itself
    nxt.write("journal_dropped", count=1, cause="buffer full")
    nxt.offsets.take()  # and one nobody reports
    nxt.write("stop", reason="shutdown")
    by_boot = facts(spark, crashed, nxt)
    b1, b2 = by_boot["car-1", "b1"], by_boot["car-1", "b2"]
    assert (b1.missing_records, b1.reported_dropped, b1.unreported_lost) == (2, 3, 0)
    assert (b2.missing_records, b2.reported_dropped, b2.unreported_lost) == (2, 1, 1)
    assert (b1.clean_stop, b2.clean_stop) == (False, True)


def test_batch_records_count_as_their_events_and_as_one_line_each(spark: SparkSession) -> None:
    new = _Boot("car-1", "new", 2**32 - 2).run(0)
    new.write(
        "publish_batch",
        writer="p",
        key_ids=[1, 2],
        keys=["Vehicle.Speed", "Vehicle.Gear"],
        versions=[1, 1],
        changes=[True, True],
        sizes=[8, 8],
    )
    new.offsets.take()  # a lost line: one missing record, however many events it held
    new.write(
        "delivered_batch",
        app="a",
        sent_ns=5,
        key_ids=[1, 2, 1],
        seqs=[1, 1, 2],
        queues=[0, 0, 0],
        write_times_ns=[1, 2, 3],
    )
    new.write("stop", reason="shutdown")
    old = _Boot("car-1", "old", 5).run(0)
    for seq in (1, 2, 3):
        old.write("delivered", app="a", key_id=1, seq=seq, queue=0, write_time_ns=1, sent_ns=5)
    by_boot = facts(spark, new, old)
    n, o = by_boot["car-1", "new"], by_boot["car-1", "old"]
    assert (n.records, n.delivered, n.missing_records, n.chain) == (4, 3, 1, "intact")
    assert (o.records, o.delivered, o.chain) == (4, 3, "intact")
    rows = [(new.lines[2], "seg")]
    parsed = transforms.parse_lines(spark.createDataFrame(rows, "value string, source string"))
    events = transforms.expand_batches(transforms.good_records(parsed))
    got = events.orderBy("batch_index").collect()
    assert [(e.kind, e.key_id, e.seq, e.batch_index) for e in got] == [
        ("delivered", 1, 1, 0),
        ("delivered", 2, 1, 1),
        ("delivered", 1, 2, 2),
    ]
    assert {e.app for e in got} == {"a"}
    assert {(e.offset, e.hash) for e in got} == {(got[0].offset, got[0].hash)}
    # Alone, the batch line's chain start is missing: one broken link, not three.
    alone = facts_of_lines(spark, [[new.lines[2]]])["car-1", "new"]
    assert (alone.records, alone.delivered, alone.chain, alone.broken_links) == (
        1,
        3,
        "start missing",
        1,
    )


def ordered_pass(lines: list[str]) -> dict[tuple[str, str], tuple[int, int | None, int, str]]:
    """Per boot, the chain as one ordered pass over its records sees it (the
    definition :func:`chain.link_runs` and :func:`chain.chain_facts` split
    into two steps): broken links, the first broken offset, offsets missing
    between records, and the chain's start (trim records are not handled)."""
    boots: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for line in lines:
        r = json.loads(line)
        body = "{" + line[HASH_PREFIX_LEN:]
        r["_ok"] = hashlib.sha256(body.encode()).hexdigest() == r["hash"]
        boots.setdefault((r["vehicle_id"], r["boot_id"]), []).append(r)
    out = {}
    for key, records in boots.items():
        starts = [r["offset"] for r in records if r["kind"] == "start"]
        first = min(starts) if starts else min(records, key=lambda r: (r["time_ns"], r["offset"]))
        first = first if isinstance(first, int) else first["offset"]
        records.sort(key=lambda r: (r["offset"] - first) % OFFSET_MOD)
        broken, first_broken, missing, start = 0, None, 0, "intact"
        for i, r in enumerate(records):
            pos = (r["offset"] - first) % OFFSET_MOD
            if i == 0:
                late = pos == 0 and r["prev_hash"] != ""
                bad = not r["_ok"] or late
                start = "missing" if late else start
            else:
                prev = records[i - 1]
                bad = not r["_ok"] or r["prev_hash"] != prev["hash"]
                missing += max(pos - (prev["offset"] - first) % OFFSET_MOD - 1, 0)
            if bad:
                broken += 1
                first_broken = first_broken if first_broken is not None else r["offset"]
        out[key] = (broken, first_broken, missing, start)
    return out


def test_runs_cut_in_batches_and_chunks_link_as_one_ordered_pass(spark: SparkSession) -> None:
    """Boots across the 2^32 wrap and a 2^20 chunk edge, with records the journal
    lost (offsets skipped), records deleted and edited, a boot whose start is
    gone, its lines dealt at random to three ingest batches: every boot's
    chain facts are those of one ordered pass over all its records."""
    rng = random.Random(16)
    lines: list[str] = []
    for i, start in enumerate([OFFSET_MOD - 60, 3 * 2**20 - 40, 1000, 77]):
        boot = _Boot("car-1", f"b{i}", start)
        boot.write("start")
        for n in range(120):
            if rng.random() < 0.03:
                boot.offsets.take()  # lost by the journal: a gap, no broken link
            boot.write("publish", key="Vehicle.Speed", key_id=1, version=n)
        kept = list(boot.lines)
        for _ in range(2):  # deleted: a gap and a broken link
            del kept[rng.randrange(5, len(kept))]
        j = rng.randrange(5, len(kept))  # edited: its hash fails
        kept[j] = kept[j].replace('"version":', '"version":1')
        if i == 3:
            kept = kept[3:]  # its start is gone, nothing says why
        lines += kept
    batches: list[list[str]] = [[], [], []]
    for line in lines:
        batches[rng.randrange(3)].append(line)
    got = facts_of_lines(spark, batches)
    expected = ordered_pass(lines)
    assert set(got) == set(expected)
    for key, (broken, first_broken, missing, start) in expected.items():
        r = got[key]
        assert (r.broken_links, r.first_broken_offset, r.missing_records) == (
            broken,
            first_broken,
            missing,
        ), key
        assert r.chain == ("start missing" if start == "missing" else "broken"), key


def test_a_collector_gap_explains_the_discontinuity_it_covers(spark: SparkSession) -> None:
    """Records the collector could not collect, in the middle of a boot and at its
    start: the links across them are not broken, the offsets they hold are not
    the journal's losses; a journal loss beside one still counts, and an
    edited record is still broken."""
    middle = _Boot("car-1", "m", OFFSET_MOD - 5).run(30)  # the gap wraps
    middle.offsets.take()  # and one record the journal lost
    middle.write("publish", key="Vehicle.Speed", key_id=1)
    gap = middle.records[3:9]
    middle.lines[3:9] = []
    late = _Boot("car-1", "l", 500).run(10)  # the collector joined late
    late.lines[:4] = []
    edited = _Boot("car-2", "e", 9).run(10)
    edited.lines[6] = edited.lines[6].replace('"key_id":1', '"key_id":2')
    edited_gap = edited.records[2:4]
    edited.lines[2:4] = []
    by_boot = facts_of_lines(
        spark,
        [middle.lines[:10], middle.lines[10:] + late.lines + edited.lines],
        gaps=[
            ("car-1", "m", gap[0]["offset"], gap[-1]["offset"], len(gap)),
            ("car-1", "l", 500, 503, 4),
            ("car-2", "e", edited_gap[0]["offset"], edited_gap[-1]["offset"], 2),
        ],
    )
    m, lt, e = by_boot["car-1", "m"], by_boot["car-1", "l"], by_boot["car-2", "e"]
    assert (m.chain, m.broken_links, m.missing_records, m.unreported_lost) == (
        "not collected",
        0,
        1,
        1,
    )
    assert (m.collect_gaps, m.not_collected) == (1, 6)
    assert (lt.chain, lt.broken_links, lt.missing_records, lt.not_collected) == (
        "not collected",
        0,
        0,
        4,
    )
    assert (e.chain, e.broken_links, e.first_broken_offset) == ("broken", 1, 15)
