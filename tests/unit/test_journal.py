"""The journal: offsets, the hash chain, segments, retention, torn lines, drops."""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from vehicle_middleware.contract.journal.chain import (
    HASH_PREFIX_LEN,
    Chain,
    canonical,
    line_of,
    record_hash,
    verify_line,
)
from vehicle_middleware.contract.journal.segments import segment_files
from vehicle_middleware.ess import DataUpdated, DropReason, Filter, KeyAdded, KeyRemoved, pack_queue
from vehicle_middleware.server.journal import (
    Journal,
    JournalReport,
    Level,
    OffsetCounter,
    read_journal,
    verify,
)
from vehicle_middleware.server.journal.directory_lock import DirectoryLock, JournalInUseError
from vehicle_middleware.server.journal.reserve import LOCK_NAME
from vehicle_middleware.server.journal.taps import DropJournal, filter_record, record_delivered
from vehicle_middleware.vstore import VStore

from tests.conftest import wait_until


def make(tmp_path: Path, **kw: object) -> Journal:
    ticks = itertools.count(1)
    return Journal(tmp_path, vehicle_id="car-1", boot_id="boot-a", clock=lambda: next(ticks), **kw)  # type: ignore[arg-type]


def test_offsets_start_where_told_and_wrap_modulo_2_to_the_32() -> None:
    c = OffsetCounter(2**32 - 2)
    assert [c.take() for _ in range(4)] == [2**32 - 2, 2**32 - 1, 0, 1]
    assert OffsetCounter().take() != OffsetCounter().take()  # random starts (2^-32 to fail)


def chained(n: int) -> list[dict[str, object]]:
    chain = Chain()
    return [
        chain.link({"kind": "publish", "boot_id": "b", "offset": i, "key": f"K{i}"})
        for i in range(n)
    ]


def test_an_untouched_chain_verifies() -> None:
    report = verify(chained(5))
    assert report.intact
    assert report.boots["b"].records == 5
    assert report.boots["b"].offset_gaps == 0


def test_an_edited_record_breaks_the_chain_at_that_record() -> None:
    records = chained(5)
    records[2]["key"] = "Tampered"
    report = verify(records)
    assert report.boots["b"].first_broken_link == 2
    assert "hash does not match" in report.boots["b"].broken_reason


def test_a_deleted_record_shows_as_a_broken_link_and_an_offset_gap() -> None:
    records = chained(5)
    del records[2]
    b = verify(records).boots["b"]
    assert b.first_broken_link == 3
    assert b.offset_gaps == 1


def _json_dumps_line(record: dict[str, object], prev: str) -> bytes:
    """A line as journals before orjson wrote it: ``json.dumps``, the hash last."""
    body = {**record, "prev_hash": prev}
    encoded = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    body["hash"] = hashlib.sha256(encoded.encode()).hexdigest()
    return json.dumps(body, ensure_ascii=False).encode() + b"\n"


def test_journals_written_by_json_dumps_still_verify() -> None:
    """Floats are where the two encoders differ (``1e-07`` and ``1e-7``): a record
    written by either checks, by the line and in the chain; an edit still fails."""
    old = {"kind": "slow_app", "boot_id": "b", "offset": 0, "lag_s": 1.5e-7, "x": float("nan")}
    line = _json_dumps_line(old, "")
    assert b"1.5e-07" in line
    record = verify_line(line)
    assert record["lag_s"] == 1.5e-7
    new = Chain()
    new.last = record["hash"]
    written = new.line({"kind": "slow_app", "boot_id": "b", "offset": 1, "lag_s": 2.5e-7})
    assert b"2.5e-7" in written  # today's encoder
    assert verify([json.loads(line), json.loads(written)]).intact
    with pytest.raises(ValueError, match="hash does not match"):
        verify_line(line.replace(b"1.5e-07", b"2.5e-07"))
    edited = json.loads(written)
    edited["lag_s"] = 3.5e-7
    assert not verify([json.loads(line), edited]).intact


def test_reordered_records_break_the_chain() -> None:
    records = chained(5)
    records[1], records[2] = records[2], records[1]
    assert verify(records).boots["b"].first_broken_link == 2


def test_records_are_written_chained_and_stamped(tmp_path: Path) -> None:
    j = make(tmp_path, offset_start=7)
    j.start(version="test")
    j.record("key_added", app="p", key="Vehicle.Speed", key_id=1)
    j.record(
        "publish", key="Vehicle.Speed", key_id=1, version=1, changed=True, size=2, writer="p"
    )  # FULL: not at the default level
    j.record("lost", app="a", key="Vehicle.Speed", key_id=1, queue=0, seq=3, reason="full")
    j.close()
    records = read_journal([tmp_path])
    assert [r["kind"] for r in records] == ["start", "key_added", "lost", "stop"]
    assert [r["offset"] for r in records] == [7, 8, 9, 10]
    assert {r["vehicle_id"] for r in records} == {"car-1"}
    assert records[0]["prev_hash"] == ""
    assert verify(records).intact


def _wakeups(thread_id: int) -> int:
    """How many times the thread has gone to sleep and woken since it began (Linux)."""
    status = Path(f"/proc/self/task/{thread_id}/status").read_text()
    return int(status.split("voluntary_ctxt_switches:")[1].split()[0])


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts a thread in /proc")
def test_an_idle_writer_backs_off_and_a_record_still_reaches_disk(tmp_path: Path) -> None:
    """Idle, the writer wakes about 10 times a second, not 200 (its 5 ms poll backs off
    to 100 ms while no record comes); the next record is still written."""
    j = make(tmp_path)
    j.start(version="test")
    try:
        wait_until(lambda: j.written == 1, what="the start record on disk")
        writer = j._thread.native_id
        assert writer is not None
        before = _wakeups(writer)
        time.sleep(1.0)  # the behaviour under test: what an idle second costs
        idle = _wakeups(writer) - before
        assert idle <= 40, f"the idle writer woke {idle} times in a second"
        j.record("key_added", app="p", key="Vehicle.Speed", key_id=1)
        wait_until(lambda: j.written == 2, what="the record written after the idle second")
    finally:
        j.close()
    assert [r["kind"] for r in read_journal([tmp_path])] == ["start", "key_added", "stop"]


def test_lifecycle_level_records_no_drops(tmp_path: Path) -> None:
    j = make(tmp_path, level=Level.LIFECYCLE)
    j.start()
    j.record("evicted", app="a", key="K", key_id=1, queue=0, seq=1, reason="full")
    j.close()
    assert [r["kind"] for r in read_journal([tmp_path])] == ["start", "stop"]


@pytest.mark.parametrize("compress", [False, True])
def test_segments_rotate_by_size_and_retention_removes_the_oldest(
    tmp_path: Path, compress: bool
) -> None:
    j = make(tmp_path, level=Level.FULL, segment_bytes=2_000, max_bytes=6_000, compress=compress)
    j.start()
    for i in range(200):
        j.record("queued", app="a", key_id=i, queue=0, seq=i + 1)
    j.close()
    files = segment_files(tmp_path)
    assert len(files) >= 2
    assert all(f.name.endswith(".jsonl.gz" if compress else ".jsonl") for f in files)
    assert sum(f.stat().st_size for f in files) <= 6_000 + 2_000
    records = read_journal([tmp_path])
    assert records[-1]["kind"] == "stop"
    # Retention removed the oldest segments and said so: what is left verifies, from its start.
    assert records[0]["kind"] != "start"
    report = verify(records)
    kept = report.boots["boot-a"]
    assert report.intact
    assert report.complete
    assert kept.first_broken_link is None
    assert kept.trimmed_files >= 1
    assert kept.trimmed_bytes > 0
    assert kept.offset_gaps == 0
    # Times never go back in written order, the trim records' included.
    times = [r["time_ns"] for r in records]
    assert times == sorted(times)


def trimmed_journal(tmp_path: Path) -> list[Path]:
    j = make(tmp_path, level=Level.FULL, segment_bytes=2_000, max_bytes=6_000)
    j.start()
    for i in range(300):
        j.record("queued", app="a", key_id=i, queue=0, seq=i + 1)
    j.close()
    return segment_files(tmp_path)


def test_the_verify_command_accepts_a_journal_trimmed_by_retention(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vehicle_middleware.server.__main__ import main

    trimmed_journal(tmp_path)
    assert main(["journal", "verify", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "chain intact" in out
    assert "retention removed its oldest segments" in out
    assert "BROKEN" not in out
    assert "NOT REPORTED" not in out


def test_a_record_deleted_in_the_middle_of_a_trimmed_journal_is_caught(tmp_path: Path) -> None:
    files = trimmed_journal(tmp_path)
    middle = files[len(files) // 2]
    lines = middle.read_bytes().splitlines(keepends=True)
    middle.write_bytes(b"".join(lines[:3] + lines[4:]))
    report = verify(read_journal([tmp_path]))
    assert not report.intact
    assert "prev_hash does not match" in report.boots["boot-a"].broken_reason


def test_a_segment_removed_by_hand_is_not_taken_for_retention(tmp_path: Path) -> None:
    files = trimmed_journal(tmp_path)
    files[0].unlink()  # the oldest kept one: no journal_trimmed record says so
    report = verify(read_journal([tmp_path]))
    assert not report.intact
    assert "no journal_trimmed record" in report.boots["boot-a"].broken_reason


def test_a_torn_last_line_is_skipped_and_reported(tmp_path: Path) -> None:
    j = make(tmp_path)
    j.start()
    j.close()
    [segment] = segment_files(tmp_path)
    with segment.open("ab") as fh:
        fh.write(b'{"kind":"lost","offset":99')  # the crash came mid-write
    report = JournalReport()
    records = read_journal([tmp_path], report)
    assert [r["kind"] for r in records] == ["start", "stop"]
    assert report.torn_lines == [f"{segment.name}:3"]


def test_a_full_buffer_drops_records_counts_them_and_says_so(tmp_path: Path) -> None:
    j = make(tmp_path, level=Level.FULL, buffer=10)
    # The writer is not running yet: the buffer fills as if the disk stalled.
    for i in range(25):
        j.record("queued", app="a", key_id=1, queue=0, seq=i + 1)
    assert j.dropped_total == 15
    j.start()  # the writer catches up (its own start record may find the buffer still full)
    wait_until(lambda: not j.pending(), what="the writer to drain the buffer")
    j.record("queued", app="a", key_id=1, queue=0, seq=26)
    j.close()
    records = read_journal([tmp_path])
    dropped = [r for r in records if r["kind"] == "journal_dropped"]
    assert [r["cause"] for r in dropped] == ["buffer full"]
    assert dropped[0]["count"] == j.dropped_total >= 15
    report = verify(records)
    boot = report.boots["boot-a"]
    assert report.intact
    assert boot.offset_gaps == boot.reported_dropped == j.dropped_total


def test_the_verify_command_reports_a_tampered_journal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vehicle_middleware.server.__main__ import main

    j = make(tmp_path)
    j.start()
    j.record("key_added", app="p", key="Vehicle.Speed", key_id=1)
    j.close()
    assert main(["journal", "verify", str(tmp_path)]) == 0
    assert "chain intact" in capsys.readouterr().out
    [segment] = segment_files(tmp_path)
    segment.write_text(segment.read_text().replace("Vehicle.Speed", "Vehicle.Spoof"))
    assert main(["journal", "verify", str(tmp_path)]) == 1
    assert "CHAIN BROKEN at offset" in capsys.readouterr().out


def test_each_line_carries_its_hash_first_over_its_own_bytes(tmp_path: Path) -> None:
    j = make(tmp_path, level=Level.FULL)
    j.start(address='ünïcödé and "quotes"')
    j.record("queued", app="a", key_id=1, queue=0, seq=1)
    j.close()
    [segment] = segment_files(tmp_path)
    for line in segment.read_bytes().splitlines():
        assert line.startswith(b'{"hash":"')
        body = b"{" + line[HASH_PREFIX_LEN:]
        assert hashlib.sha256(body).hexdigest().encode() == line[9:73]


@pytest.mark.parametrize("size", [40, 2_046, 2_047, 2_048, 4_094, 4_095, 4_096, 100_000])
def test_a_large_records_hash_is_sha256_over_its_line_whatever_the_pieces(size: int) -> None:
    """The writer hashes a body in pieces below 2,048 bytes (so the GIL stays with
    its thread): the digest is SHA-256 over the whole line's body all the same."""
    empty = len(canonical({"kind": "delivered_batch", "pad": ""}))
    wide = (size - empty) // 2  # two bytes each in UTF-8
    pad = "é" * wide + "a" * (size - empty - 2 * wide)
    record: dict[str, Any] = {"kind": "delivered_batch", "pad": pad}
    assert len(canonical(record)) == size
    line = line_of(record)
    body = b"{" + line[HASH_PREFIX_LEN:-1]
    assert len(body) == size
    assert hashlib.sha256(body).hexdigest() == record["hash"] == record_hash(record)
    assert verify_line(line)["hash"] == record["hash"]


def test_a_record_with_a_field_outside_the_format_is_refused(tmp_path: Path) -> None:
    """records.FIELDS is the journal's format: a field it lacks would be in the
    journal and in no reader's schema (dropped on the way to the dataset)."""
    j = make(tmp_path, level=Level.FULL)
    j.start(address="a")
    with pytest.raises(AssertionError, match="colour"):
        j.record("key_added", app="a", key="Vehicle.Speed", key_id=1, colour="red")
    j.record("key_added", app="a", key="Vehicle.Speed", key_id=1)
    j.close()
    kinds = [
        json.loads(line)["kind"] for line in segment_files(tmp_path)[0].read_text().splitlines()
    ]
    assert kinds == ["start", "key_added", "stop"]


class FullDisk:
    """Opens segments whose writes fail like a full disk while ``full`` (after ``room`` bytes).

    ``until_reserve_gone``: the disk is full until the journal removes its reserve file.
    """

    def __init__(self, directory: Path, *, until_reserve_gone: bool = False) -> None:
        self.full = False
        self.room = 0
        self.directory = directory
        self.until_reserve_gone = until_reserve_gone

    def is_full(self) -> bool:
        if self.until_reserve_gone and not (self.directory / ".journal-reserve").exists():
            return False
        return self.full

    def __call__(self, path: Path) -> object:
        disk = self
        raw = path.open("ab", buffering=0)

        class Segment:
            def write(self, data: bytes | memoryview) -> int:
                if disk.is_full():
                    if disk.room <= 0:
                        raise OSError(errno.ENOSPC, "No space left on device")
                    n = min(len(data), disk.room)
                    disk.room -= n
                    return raw.write(data[:n])
                return raw.write(data)

            def fileno(self) -> int:
                return raw.fileno()

            def seek(self, pos: int, whence: int = 0) -> int:
                return raw.seek(pos, whence)

            def close(self) -> None:
                raw.close()

        return Segment()


def test_records_a_full_disk_refuses_are_reported_once_writes_work_again(tmp_path: Path) -> None:
    disk = FullDisk(tmp_path)
    j = make(tmp_path, level=Level.FULL, opener=disk)
    j.start()
    wait_until(lambda: j.written == 1, what="the start record on disk")
    disk.full, disk.room = True, 150  # a torn line: part of one record fits
    for i in range(50):
        j.record("queued", app="a", key_id=1, queue=0, seq=i + 1)
    wait_until(lambda: not j.pending() and j._unreported, what="the writer to meet the full disk")
    disk.full = False
    j.record("queued", app="a", key_id=1, queue=0, seq=51)
    j.close()
    report = JournalReport()
    records = read_journal([tmp_path], report)
    assert report.torn_lines == []  # the torn line was cut back
    dropped = [r for r in records if r["kind"] == "journal_dropped"]
    assert [r["cause"] for r in dropped] == ["write failed"]
    verify(records, report)
    boot = report.boots["boot-a"]
    assert report.intact
    assert report.complete
    assert boot.offset_gaps == boot.reported_dropped == dropped[0]["count"] > 0
    assert records[-1]["kind"] == "stop"
    assert boot.stopped
    assert sum(r["kind"] == "queued" for r in records) + dropped[0]["count"] == 51


def test_a_disk_full_at_stop_still_gets_the_loss_count_and_stop_from_the_reserve(
    tmp_path: Path,
) -> None:
    disk = FullDisk(tmp_path, until_reserve_gone=True)
    j = make(tmp_path, level=Level.FULL, opener=disk)
    j.start()
    wait_until(lambda: j.written == 1, what="the start record on disk")
    disk.full = True
    for i in range(40):
        j.record("queued", app="a", key_id=1, queue=0, seq=i + 1)
    j.close()
    assert not (tmp_path / ".journal-reserve").exists()  # spent on the last records
    records = read_journal([tmp_path])
    assert [r["kind"] for r in records] == ["start", "journal_dropped", "stop"]
    assert records[1]["count"] == 41  # the 40 records and the first stop record
    report = verify(records)
    assert report.intact
    assert report.complete
    assert report.boots["boot-a"].stopped


def test_the_next_boot_reports_what_a_dead_boot_never_wrote(tmp_path: Path) -> None:
    from vehicle_middleware.server.journal.reserve import LossMarker, MarkerState

    first = make(tmp_path, level=Level.FULL)
    first.start()
    first.record("queued", app="a", key_id=1, queue=0, seq=1)
    first.close()
    # As if killed before its stop: drop that line, and leave the marker a dead boot leaves,
    # which says 5 records were taken beyond the last on disk (3 buffered, 2 refused by disk).
    [segment] = segment_files(tmp_path)
    segment.write_bytes(b"".join(segment.read_bytes().splitlines(keepends=True)[:-1]))
    last = read_journal([tmp_path])[-1]["offset"]
    marker = LossMarker(tmp_path)
    assert marker.open()
    marker.write(
        MarkerState(boot_id="boot-a", next_offset=last + 3, pending=3, unreported=2, stopped=False)
    )
    marker.close()
    second = Journal(tmp_path, vehicle_id="car-1", boot_id="boot-b", level=Level.FULL)
    second.start()
    second.close()
    records = read_journal([tmp_path])
    [note] = [r for r in records if r["kind"] == "journal_dropped"]
    assert note["boot_id"] == "boot-b"
    assert note["lost_boot_id"] == "boot-a"
    assert note["count"] == 5
    assert note["cause"] == "not written before the process ended"
    report = verify(records)
    assert report.boots["boot-a"].reported_dropped == 5
    assert not report.boots["boot-a"].stopped
    assert report.boots["boot-b"].stopped


def test_batch_records_expand_into_the_per_event_records_they_stand_for() -> None:
    from vehicle_middleware.contract.journal.records import expand

    batch = {
        "kind": "delivered_batch",
        "offset": 9,
        "app": "a",
        "sent_ns": 5,
        "key_ids": [1, 2],
        "seqs": [3, 4],
        "queues": [0, 1],
        "write_times_ns": [10, 11],
    }
    other = {"kind": "stop", "offset": 10}
    assert list(expand([batch, other])) == [
        {"kind": "delivered", "offset": 9, "app": "a", "sent_ns": 5, "key_id": 1, "seq": 3,
         "queue": 0, "write_time_ns": 10, "batch_index": 0},
        {"kind": "delivered", "offset": 9, "app": "a", "sent_ns": 5, "key_id": 2, "seq": 4,
         "queue": 1, "write_time_ns": 11, "batch_index": 1},
        other,
    ]  # fmt: skip


def test_a_batch_of_filtered_events_expands_to_each_events_writes() -> None:
    from vehicle_middleware.contract.journal.records import expand

    batch = {
        "kind": "delivered_batch",
        "offset": 9,
        "app": "a",
        "sent_ns": 5,
        "key_ids": [1, 2],
        "seqs": [3, 4],
        "queues": [0, 1],
        "write_times_ns": [10, 11],
        "write_counts": [1, 40],
    }
    assert [(r["seq"], r["queue"], r["writes"]) for r in expand([batch])] == [(3, 0, 1), (4, 1, 40)]


def test_filtered_events_journal_their_writes_and_registrations_their_filter(
    tmp_path: Path,
) -> None:
    """At the full level: ``write_counts`` in a delivered batch only where some event
    stood for several writes; ``writes`` in a drop record only above 1; ``filter``
    in a register record."""
    store = VStore()
    key = store.add_key("Vehicle.Speed")
    j = Journal(tmp_path, vehicle_id="car-1", boot_id="b", level=Level.FULL)
    j.start(address="a", level="full", settings={})
    record_delivered(j, "a", [(key, 1, 10, b"v", 0), (key, 2, 11, b"w", 1)], several=True)
    rows = [(key, 3, 12, b"v", pack_queue(2, 7)), (key, 4, 13, None, 0)]
    record_delivered(j, "a", rows, several=True)
    drops = DropJournal(j, store)
    drops.event_dropped("a", key, 0, 5, DropReason.EVICTED)
    drops.event_dropped("a", key, 0, 6, DropReason.LOST, 3)
    j.record(
        "register",
        app="a",
        key="Vehicle.Speed",
        key_id=key,
        queue=0,
        trigger="on_change",
        status="ok",
        filter=filter_record(Filter(min_interval_ns=100_000_000, range=(0.0, 1.5))),
    )
    j.close()
    records = read_journal([tmp_path])
    plain, filtered = [r for r in records if r["kind"] == "delivered_batch"]
    assert "write_counts" not in plain
    assert (filtered["queues"], filtered["write_counts"]) == ([2, 0], [7, 1])
    evicted, lost = [r for r in records if r["kind"] in ("evicted", "lost")]
    assert "writes" not in evicted
    assert lost["writes"] == 3
    [register] = [r for r in records if r["kind"] == "register"]
    assert register["filter"] == {"min_interval_ms": 100, "threshold": None, "range": [0.0, 1.5]}
    assert filter_record(None) is None


def test_the_trim_record_is_on_disk_before_any_segment_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A crash between the two would otherwise look like tampering.
    seen: list[bool] = []
    unlink = Path.unlink

    def checked_unlink(self: Path, missing_ok: bool = False) -> None:
        if self.name.startswith("journal-"):
            on_disk = read_journal([tmp_path])
            seen.append(any(r["kind"] == "journal_trimmed" for r in on_disk))
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", checked_unlink)
    trimmed_journal(tmp_path)
    assert seen
    assert all(seen)


def test_a_delivered_batch_records_its_data_events_only_whatever_comes_first(
    tmp_path: Path,
) -> None:
    """As the streams drain them: data events as plain tuples or ``DataUpdated``s,
    lifecycle events first where there are any, and a batch of lifecycle events
    alone (no record)."""
    j = make(tmp_path, level=Level.FULL)
    j.start()
    data = [(3, 7, 1_000, b"\x01", 0), DataUpdated(4, 9, 2_000, None, 2)]
    record_delivered(j, "a", data, several=False)
    record_delivered(
        j, "b", [KeyAdded(5, "Vehicle.New"), KeyRemoved(6, "Vehicle.Old"), *data], several=False
    )
    record_delivered(j, "c", [KeyAdded(5, "Vehicle.New")], several=False)
    record_delivered(j, "d", [], several=False)
    j.close()
    delivered = [r for r in read_journal([tmp_path]) if r["kind"] == "delivered_batch"]
    assert [r["app"] for r in delivered] == ["a", "b"]
    for r in delivered:
        assert r["key_ids"] == [3, 4]
        assert r["seqs"] == [7, 9]
        assert r["queues"] == [0, 2]
        assert r["write_times_ns"] == [1_000, 2_000]


def test_the_directory_lock_tells_a_removed_directory_and_never_takes_another_holders(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "journal"
    lock = DirectoryLock(directory)
    lock.acquire()
    assert lock.lost() == ""
    shutil.rmtree(directory)
    assert "was removed" in lock.lost()
    lock.retake()  # made again, and held
    assert lock.lost() == ""
    assert (directory / LOCK_NAME).exists()
    shutil.rmtree(directory)
    other = DirectoryLock(directory)
    other.acquire()  # a second writer got there first
    assert "is another file" in lock.lost()
    with pytest.raises(JournalInUseError, match="in use by another middleware"):
        lock.retake()
    assert other.lost() == ""
    lock.release()
    other.release()
