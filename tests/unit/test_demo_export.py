"""The demo's export check: the journal against the landing area and the dataset."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from vehicle_middleware.demo.export import (
    Collected,
    Record,
    compare,
    read_dataset,
    read_landing,
)
from vehicle_middleware.demo.summary import judge, render

BOOT = "b1"


def _journal(n: int, *, boot: str = BOOT, start: int = 2**32 - 3) -> list[Record]:
    """``n`` records of one boot from ``start`` (across the wrap), the last a ``stop``."""
    return [
        Record(boot, (start + i) % 2**32, f"h{boot}{i}", "stop" if i == n - 1 else "x")
        for i in range(n)
    ]


def test_a_dataset_holding_every_record_once_is_clean() -> None:
    journal = _journal(6)
    check = compare(journal, journal, journal)
    assert check.problems() == []
    assert (check.journal, check.last.held, check.lost) == (6, 6, 0)


def test_a_missing_record_is_a_problem_the_final_stop_record_too() -> None:
    first, second = _journal(4, boot="b0"), _journal(4, boot="b1", start=7)
    journal = first + second
    held = [r for r in journal if r not in (first[-1], second[1], second[-1])]
    check = compare(journal, held, held)
    assert check.not_exported == {"x": 1, "stop": 2}
    assert check.lost == 3
    assert check.problems() == ["3 journal records are not in the dataset (2 stop, 1 x)"]


def test_records_held_twice_altered_or_never_written_are_each_named() -> None:
    journal = _journal(5)
    dataset = [
        *journal[:3],
        journal[1],  # twice
        Record(BOOT, journal[3].offset, "edited"),
        Record(BOOT, 12345, "h"),  # not the journal's
        journal[4],
    ]
    check = compare(journal, journal, dataset)
    assert (check.last.duplicated, check.last.altered, check.last.foreign) == (1, 1, 1)
    assert check.last.held == 4
    assert check.problems() == [
        "the dataset holds 1 journal records twice",
        "the dataset holds 1 journal records altered",
        "the dataset holds 1 records the journal never wrote",
    ]


def test_without_a_dataset_the_landing_area_is_what_is_judged() -> None:
    journal = _journal(4)
    check = compare(journal, journal[:2], None)
    assert check.dataset is None
    assert check.lost == 2
    assert "not in the landing area" in check.problems()[0]


def test_the_collectors_gaps_restarts_and_its_own_failures_are_problems() -> None:
    journal = _journal(3)
    notes = [
        {"kind": "collect_gap", "count": 7, "boot_id": BOOT},
        {"kind": "collect_restart", "old_boot_id": "a", "new_boot_id": "b"},
    ]
    collected = Collected.of(
        {
            "vehicles": {"car": {"records": 3, "files": 1, "bad_hash": 1}},
            "failed": {"x:1": "refused"},
        },
        "car",
    )
    assert (collected.landed, collected.files, collected.bad_hashes) == (3, 1, 1)
    check = compare(journal, journal, journal, collector_records=notes)
    check = replace(check, collected=collected)
    assert check.problems() == [
        "the collector recorded 7 offsets as not collected",
        "the collector saw the middleware restart 1 time(s)",
        "the collector failed on x:1: refused",
        "the collector received 1 records whose hash fails",
    ]


def test_the_landing_area_is_read_without_the_collectors_bookkeeping(tmp_path: Path) -> None:
    def line(offset: int) -> str:
        rec = {"hash": f"h{offset}", "boot_id": BOOT, "kind": "x", "offset": offset}
        return json.dumps(rec) + "\n"

    boot = tmp_path / "vehicle=car" / f"boot={BOOT}"
    boot.mkdir(parents=True)
    (boot / "part-0000000001-000000.jsonl").write_text(line(1) + line(2))
    (boot / "part-0000000003-000001.jsonl").write_text(line(3) + '{"torn": ')
    (tmp_path / "vehicle=car" / "_tmp").mkdir()
    (tmp_path / "vehicle=car" / "_tmp" / "part-0000000004-000002.jsonl.demo").write_text(line(4))
    (tmp_path / "_positions").mkdir()
    (tmp_path / "_positions" / "vehicle=car.json").write_text("{}")
    gap = {"kind": "collect_gap", "count": 2, "boot_id": BOOT, "from_offset": 5, "to_offset": 6}
    (tmp_path / "vehicle=car" / "collector-demo-1.jsonl").write_text(json.dumps(gap) + "\n")
    records, notes = read_landing(tmp_path)
    assert [r.offset for r in records] == [1, 2, 3]
    assert records[0] == Record(BOOT, 1, "h1", "x")
    assert notes == [gap]


def test_the_dataset_counts_a_batch_line_once(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    part = tmp_path / "records" / "vehicle_id=car" / "date=2026-01-01"
    part.mkdir(parents=True)
    table = pa.table(
        {
            "boot_id": [BOOT, BOOT, BOOT, BOOT],
            "offset": pa.array([1, 2, 2, 3], pa.int64()),
            "hash": [bytes([1]) * 32, bytes([2]) * 32, bytes([2]) * 32, bytes([3]) * 32],
            "kind": ["start", "publish", "publish", "stop"],
            # offset 2 is a batch line of two events: its second row is not a line.
            "batch_index": pa.array([None, 0, 1, None], pa.int32()),
        }
    )
    pq.write_table(table, part / "part-00000.parquet")
    (tmp_path / "records" / "_SUCCESS").write_text("")
    got = read_dataset(tmp_path)
    assert [(r.offset, r.hash) for r in got] == [(1, "01" * 32), (2, "02" * 32), (3, "03" * 32)]


def test_the_verdict_prints_the_export_and_fails_on_its_problems() -> None:
    journal = _journal(4)
    collected = Collected.of({"vehicles": {"car": {"records": 4, "files": 2}}}, "car")
    check = replace(compare(journal, journal, None), collected=collected)
    apps = {"logger": {"state": "stopped", "received": 1}}
    text = render(judge({"published": 1}, apps, None, check), report="r")
    assert "export      4 of 4 journal records landed (not ingested), none duplicated" in text
    assert "collector: 4 records landed in 2 files" in text
    assert "demo OK" in text
    short = judge({"published": 1}, apps, None, compare(journal, journal[:-1], None))
    assert not short.ok
    assert "1 journal records are not in the landing area (1 stop)" in short.problems
    bad = compare(journal, journal[:-1], [*journal[:-1], journal[0]])
    verdict = judge({"published": 1}, apps, None, bad)
    assert not verdict.ok
    assert "the dataset holds 1 journal records twice" in verdict.problems
    assert "1 DUPLICATED" in render(verdict, report="r")


def test_the_verdict_prints_the_providers_rate_with_and_without_the_demand() -> None:
    apps = {"logger": {"state": "stopped", "received": 1}}
    provider = {
        "published": 2_000,
        "keys": 270,
        "extra": {"published_per_s": 95.4, "own_rate": 690.2},
    }
    verdict = judge(provider, apps, None)
    assert render(verdict, report="r").splitlines()[0] == (
        "provider    270 keys, 2,000 updates published: 95/s following what the apps watch; "
        "without it, 690/s (every signal at its own rate)"
    )
    assert verdict.as_dict()["published_per_s_without_demand"] == 690.2
    assert render(judge({"published": 1, "keys": 1}, apps, None), report="r").startswith(
        "provider    1 keys, 1 updates published\n"
    )
