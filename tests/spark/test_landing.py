"""A landing area in the collector's layout, ingested by the streaming query in
two micro-batches (files landed, ``--once``, more landed, ``--once`` again),
and by the batch ingest: the same dataset, each record once; a file landed
twice is harmless, a ``collect_gap`` is reported as not collected (no broken
chain), a landing file edited by hand is a broken chain."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from vehicle_middleware.telemetry_export import chain, job
from vehicle_middleware.telemetry_export.dataset import Dataset
from vehicle_middleware.telemetry_export.ingest import ingest_batch
from vehicle_middleware.telemetry_export.synth import landing_files, write_fleet


def land(landing: Path, files: dict[str, bytes]) -> None:
    """Files appear whole, as the collector makes them appear (written aside, renamed)."""
    for name, data in files.items():
        path = landing / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = landing / "_tmp" / path.name
        tmp.parent.mkdir(exist_ok=True)
        tmp.write_bytes(data)
        tmp.rename(path)


def offsets(data: bytes) -> list[int]:
    return [json.loads(line)["offset"] for line in data.splitlines()]


def collector_file(vehicle: str, *records: dict[str, Any]) -> dict[str, bytes]:
    lines = "".join(
        json.dumps({"vehicle_id": vehicle, **r}, sort_keys=True) + "\n" for r in records
    )
    return {f"vehicle={vehicle}/collector-c1-1790000000000000000.jsonl": lines.encode()}


def chains(spark: SparkSession, dataset: Path) -> list[Any]:
    """Every boot's chain facts from a dataset's runs (however many batches cut them)."""
    trims = spark.createDataFrame(
        [], "vehicle_id string, boot_id string, kept_offset long, kept_prev_hash binary"
    )
    runs = spark.read.parquet(str(dataset / "links"))
    return sorted(chain.chain_facts(runs, trims).collect())


@dataclass
class Exported:
    facts: dict[str, Any]
    runs: list[dict[str, int]]
    batch_counts: dict[str, int]
    streamed: dict[str, Any]
    chains: tuple[list[Any], list[Any]]
    records: tuple[DataFrame, DataFrame]
    gap: tuple[str, int, int, int]
    edited: tuple[str, int]
    duplicate_lines: int
    report: str


@pytest.fixture(scope="module")
def exported(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Exported:
    root = tmp_path_factory.mktemp("export")
    facts = write_fleet(str(root / "fleet"), vehicles=3, records=2000, seed=21)
    files = landing_files(str(root / "fleet"), lines_per_file=300)
    names = list(files)
    # car-0000: a file in the middle of a boot the collector could not collect
    # (whole offsets, none the journal lost), and its collect_gap record.
    lost = next(
        n
        for n in names[2:]
        if n.startswith("vehicle=car-0000")
        and (o := offsets(files[n]))[-1] - o[0] + 1 == len(o)
        and "part-" in n
    )
    lost_offsets = offsets(files.pop(lost))
    boot = lost.split("/")[1].removeprefix("boot=")
    gap = ("car-0000", boot, lost_offsets[0], lost_offsets[-1])
    # car-0001: a value changed by hand in a landed file (its hash field kept).
    edited_name = next(n for n in names[3:] if n.startswith("vehicle=car-0001"))
    lines = files[edited_name].splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b'"kind":"delivered"' in line)
    lines[at] = lines[at].replace(b'"queue":0', b'"queue":1')
    files[edited_name] = b"".join(lines)
    edited = ("car-0001", json.loads(lines[at])["offset"])
    # car-0002: a file landed twice (a collector retrying under another name),
    # and the restart the collector followed.
    twice = next(n for n in names if n.startswith("vehicle=car-0002"))
    copy = twice.replace("part-", "part-copy-")
    boots = sorted({n.split("/")[1] for n in names if n.startswith("vehicle=car-0002")})
    notes = {
        **collector_file(
            "car-0000",
            {"kind": "collect_gap", "boot_id": boot, "from_offset": gap[2], "to_offset": gap[3]}
            | {"count": len(lost_offsets), "reason": "history overrun", "time_ns": 1}
            | {"collector": "c1"},
        ),
        **collector_file(
            "car-0002",
            {"kind": "collect_restart", "old_boot_id": boots[0][5:], "new_boot_id": boots[-1][5:]}
            | {"time_ns": 2, "collector": "c1"},
        ),
    }
    landing, dataset = root / "landing", root / "streamed"
    half = len(files) // 2
    land(landing, dict(list(files.items())[:half]))
    runs = [job.ingest_stream(spark, str(landing), str(dataset), once=True)]
    land(landing, {**dict(list(files.items())[half:]), copy: files[twice], **notes})
    runs.append(job.ingest_stream(spark, str(landing), str(dataset), once=True))
    runs.append(job.ingest_stream(spark, str(landing), str(dataset), once=True))  # nothing new
    batch_counts = job.ingest(spark, [str(landing)], str(root / "batched"))
    streamed = job.analyze(spark, str(dataset), str(root / "report-s"))
    return Exported(
        facts=facts,
        runs=runs,
        batch_counts=batch_counts,
        streamed=streamed,
        chains=(chains(spark, dataset), chains(spark, root / "batched")),
        records=(
            spark.read.parquet(str(dataset / "records")),
            spark.read.parquet(str(root / "batched" / "records")),
        ),
        gap=(*gap, len(lost_offsets)),
        edited=edited,
        duplicate_lines=len(files[twice].splitlines()),
        report=(root / "report-s" / "report.md").read_text(),
    )


def test_two_micro_batches_hold_each_landed_record_once_as_the_batch_ingest_does(
    exported: Exported,
) -> None:
    first, second, idle = exported.runs
    assert (first["batches"], second["batches"], idle["batches"]) == (1, 1, 0)
    # The file landed twice: its lines are dropped in the second micro-batch.
    assert (first["duplicates"], second["duplicates"]) == (0, exported.duplicate_lines)
    assert exported.batch_counts["duplicates"] == exported.duplicate_lines
    assert first["records"] + second["records"] == exported.batch_counts["records"]
    streamed, batched = exported.records
    assert streamed.count() == batched.count() == exported.batch_counts["records"]
    assert streamed.exceptAll(batched).count() == 0
    assert batched.exceptAll(streamed).count() == 0
    # Cut in other runs (two micro-batches), linked the same.
    assert exported.chains[0] == exported.chains[1]
    assert exported.streamed["records"] == exported.batch_counts["lines"]


def test_a_collect_gap_is_reported_as_not_collected_not_as_a_broken_chain(
    exported: Exported,
) -> None:
    vehicle, boot, _, _, count = exported.gap
    s = exported.streamed
    assert (s["collect_gaps"], s["not_collected_records"], s["collector_restarts"]) == (
        1,
        count,
        1,
    )
    # Only the edited file breaks a chain; the gap's offsets are not the journal's losses.
    assert s["broken_chains"] == 1
    assert s["missing_journal_records"] == exported.facts["missing_journal_records"]
    assert s["unreported_journal_losses"] == 0
    assert "## Not collected" in exported.report
    assert f"| {vehicle} | `{boot}` | 1 | **{count:,}** | history overrun |" in exported.report
    assert "intact where collected" in exported.report


def test_a_landing_file_edited_by_hand_is_a_broken_chain(exported: Exported) -> None:
    vehicle, offset = exported.edited
    assert exported.streamed["broken_chains"] == 1
    assert f"**broken at offset {offset}**" in exported.report
    assert f"- {vehicle} boot" in exported.report.split("**Hash chain broken**")[1]


def test_a_batch_run_again_commits_once_and_a_cut_commit_is_done_again(
    spark: SparkSession, tmp_path: Path
) -> None:
    fleet = tmp_path / "fleet"
    write_fleet(str(fleet), vehicles=1, records=300, seed=4)
    lines = [(line, "f") for p in fleet.rglob("*.jsonl") for line in p.read_text().splitlines()]
    df = spark.createDataFrame(lines, "value string, source string")
    ds = Dataset(spark, str(tmp_path / "dataset"))
    counts = ingest_batch(df, ds, "t-1")
    files = sorted(p.name for p in (tmp_path / "dataset" / "records").rglob("*.parquet"))
    assert ingest_batch(df, ds, "t-1") == counts  # replayed: nothing added
    assert sorted(p.name for p in (tmp_path / "dataset" / "records").rglob("*.parquet")) == files
    # A batch cut while its files were being moved: its moved files go, then it is done.
    stray = next((tmp_path / "dataset" / "records").rglob("*.parquet"))
    (stray.parent / f"t-2-{stray.name}").write_bytes(stray.read_bytes())
    (tmp_path / "dataset" / "_commits" / "t-2.moving").write_text("")
    again = ingest_batch(df.limit(10), ds, "t-2")
    assert (again["records"], again["duplicates"]) == (0, 10)  # all held already
    assert sorted(p.name for p in (tmp_path / "dataset" / "records").rglob("*.parquet")) == files
    assert spark.read.parquet(str(tmp_path / "dataset" / "records")).count() == counts["records"]
