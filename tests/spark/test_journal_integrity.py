"""The journal's own integrity at ingest and in the per-boot facts: retention's
trims, deletions, and losses reported by a later boot (``lost_boot_id``)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from middleware.journal.chain import Chain, OffsetCounter
from telemetry_export import transforms


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


def facts(spark: SparkSession, *boots: _Boot) -> dict[str, Any]:
    rows = [(line, "seg") for b in boots for line in b.lines]
    parsed = transforms.parse_lines(spark.createDataFrame(rows, "value string, source string"))
    linked = transforms.expand_batches(transforms.link_records(transforms.good_records(parsed)))
    active = transforms.activity(linked, bucket_ns=10**9, window_ns=10**9)
    return {(r.vehicle_id, r.boot_id): r for r in transforms.boot_facts(active).collect()}


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
    # Alone, the batch line's chain start is missing: only its first event says so.
    linked = transforms.link_records(transforms.good_records(parsed))
    events = transforms.expand_batches(linked).orderBy("batch_index").collect()
    assert [(e.kind, e.key_id, e.seq, e.batch_index) for e in events] == [
        ("delivered", 1, 1, 0),
        ("delivered", 2, 1, 1),
        ("delivered", 1, 2, 2),
    ]
    assert [e.link_ok for e in events] == [False, True, True]
    assert {e.app for e in events} == {"a"}
