"""The whole pipeline: journals -> ingest -> analyze, on a real middleware's
journal under a slow app, and on a synthetic fleet with restarts and tampering."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from vehicle_middleware.contract.journal.chain import Chain, OffsetCounter
from vehicle_middleware.contract.values import FailureCode, encode
from vehicle_middleware.ess import DropCounts
from vehicle_middleware.sdk import AppClient, DataEvent, ProviderClient, QueueSpec, Sub
from vehicle_middleware.server.config import Settings, replace_settings
from vehicle_middleware.server.server import RunningServer, start_server
from vehicle_middleware.telemetry_export import job
from vehicle_middleware.telemetry_export.__main__ import analyze_options, parser, synth_options
from vehicle_middleware.telemetry_export.synth import (
    FAILED_KEY,
    FILTERED_KEY,
    OPEN_FAILED_KEY,
    STALE_KEY,
    write_fleet,
)

from tests.integration.scenarios import slow_app

CROWDED_KEYS = [f"Vehicle.Crowd.K{i}" for i in range(6)]


async def crowded_app(address: str, rounds: int) -> dict[str, int]:
    """Six keys written in turn, ``rounds`` times, while an app with a 5-event queue
    does not read; then it reads what is left. Once the queue is full, each key's
    new value evicts its older one, but the sixth key's finds none of its own
    queued: it is lost. Returns what the app saw and what the middleware counted
    live, by cause."""
    async with ProviderClient(address, "sim-crowd") as provider:
        await provider.add_keys(CROWDED_KEYS)
        app = AppClient(address, "crowded", queues=[QueueSpec(0, 0, 5)])
        async with app:
            await app.subscribe([Sub(k) for k in CROWDED_KEYS])
            for i in range(rounds):
                await provider.publish({k: i.to_bytes(4, "big") for k in CROWDED_KEYS})
            await provider.flush()
            live = server_drops(address, "crowded")
            received: list[DataEvent] = []
            async for e in app.events():
                if isinstance(e, DataEvent):
                    received.append(e)
                    if e.name == CROWDED_KEYS[4] and e.seq == rounds:
                        break
    return {
        "received": len(received),
        "missed": sum(e.missed for e in received),
        "evicted": sum(c.evicted for c in live.values()),
        "lost": sum(c.lost for c in live.values()),
    }


_SERVERS: dict[str, RunningServer] = {}


def server_drops(address: str, app: str) -> dict[tuple[int, int], DropCounts]:
    """The middleware's own drop counters of ``app`` now, by (key, queue)."""
    return _SERVERS[address].runtime.ess.drop_counts(app)


FAILING = "Vehicle.Failing"


async def failing_provider(address: str) -> None:
    """A provider that says its key failed (twice: one interval), writes a value
    (the end of it), then fails again and stops there (an open interval)."""
    async with ProviderClient(address, "sim-fail") as provider:
        await provider.add_keys([FAILING])
        await provider.publish({FAILING: encode(1.0)})
        await provider.fail(FAILING, FailureCode.SENSOR_FAULT, "stuck at zero")
        await provider.fail(FAILING, FailureCode.SENSOR_FAULT, "stuck at zero")
        await provider.publish({FAILING: encode(2.0)})
        await provider.fail(FAILING, FailureCode.OVERLOAD)
        await provider.flush()


async def slow_app_journal(journal_dir: Path, n: int) -> dict[str, Any]:
    """Run a real middleware with a full journal, a deliberately slow app, a
    crowded one (:func:`crowded_app`) and a provider whose key fails
    (:func:`failing_provider`)."""
    settings = replace_settings(
        Settings(),
        listen="127.0.0.1:0",
        journal_dir=str(journal_dir),
        journal_level="full",
        vehicle_id="car-real",
    )
    server = await start_server(settings)
    _SERVERS[server.address] = server
    try:
        received = await slow_app(server.address, n)
        crowded = await crowded_app(server.address, 200)
        await failing_provider(server.address)
    finally:
        del _SERVERS[server.address]
        await server.stop(0)
    return {
        "received": len(received) + crowded["received"],
        "missed": sum(e.missed for e in received) + crowded["missed"],
        "crowded": crowded,
    }


def test_the_analysis_finds_exactly_the_drops_a_slow_app_saw(
    spark: SparkSession, tmp_path: Path
) -> None:
    n = 3000
    seen = asyncio.run(slow_app_journal(tmp_path / "journal", n))
    assert seen["missed"] > 0
    counts = job.ingest(spark, [str(tmp_path / "journal")], str(tmp_path / "dataset"))
    assert counts["bad_lines"] == 0
    summary = job.analyze(spark, str(tmp_path / "dataset"), str(tmp_path / "report"))
    assert summary["vehicles"] == 1
    assert summary["restarts"] == 0
    assert summary["broken_chains"] == 0
    assert summary["missing_journal_records"] == 0
    assert summary["missing_seqs"] == seen["missed"]
    assert summary["unexplained_seqs"] == 0
    assert summary["delivered"] == seen["received"]
    # Per app and queue (from the drop-rate table) add up to the fleet's totals
    # (from the per-boot facts).
    apps = summary["apps"].values()
    assert sum(a["delivered"] for a in apps) == summary["delivered"]
    assert sum(a["dropped"] for a in apps) == summary["dropped"] > 0
    assert all(sum(a["dropped_per_queue"].values()) == a["dropped"] for a in apps)
    # Drops by cause: as the middleware counted them live for the app, adding up
    # to what it saw (gaps) and what came after its last event of a key.
    crowded, live = summary["apps"]["crowded"], seen["crowded"]
    assert live["evicted"] > 0
    assert live["lost"] > 0
    assert (crowded["evicted"], crowded["lost"]) == (live["evicted"], live["lost"])
    assert crowded["evicted"] + crowded["lost"] == crowded["dropped"]
    assert crowded["dropped"] == live["missed"] + crowded["drops_after_last_delivery"]
    assert crowded["missing_seqs"] == live["missed"]
    slow = summary["apps"]["slow"]
    assert (slow["evicted"], slow["lost"]) == (slow["dropped"], 0)  # one key: always evicted
    assert (summary["evicted"], summary["lost"]) == (
        sum(a["evicted"] for a in apps),
        sum(a["lost"] for a in apps),
    )
    assert summary["evicted"] + summary["lost"] == summary["dropped"]
    # Beside the losses, what explains them: the queues and how fast it read.
    assert crowded["queue_min_max_events"]["0"] == [0, 5]
    assert crowded["batches_read"] > 0
    assert crowded["batches_read_per_s"] > 0
    assert json.loads((tmp_path / "report" / "summary.json").read_text()) == summary
    report = (tmp_path / "report" / "report.md").read_text()
    assert "every seq gap is explained by a drop record" in report
    [row] = [line for line in report.splitlines() if line.startswith("| car-real | crowded |")]
    assert f"| {live['evicted']:,} | {live['lost']:,} |" in row
    assert "q0 0..5" in row
    assert re.search(r"\| [\d.e+]+ batch(es)?/s \|", row), row
    assert (tmp_path / "report" / "drops.png").stat().st_size > 0
    # The provider's failures: one interval ended by a value, one still open;
    # apart from staleness, and no filter held anything back.
    assert summary["failure_intervals"] == 2
    assert summary["open_failure_intervals"] == 1
    assert summary["failure_intervals_per_code"] == {"overload": 1, "sensor_fault": 1}
    assert summary["filtered_writes"] == 0
    failures = spark.read.parquet(str(tmp_path / "report" / "failures")).orderBy("from_ns")
    [ended, still] = failures.collect()
    assert (ended.key, ended.code, still.code, still.to_ns) == (
        FAILING,
        "sensor_fault",
        "overload",
        None,
    )
    assert ended.to_ns > ended.from_ns
    assert "## Failures" in report
    [row] = [ln for ln in report.splitlines() if ln.startswith(f"| car-real | `{FAILING}` | over")]
    assert "**open**" in row


README = Path(__file__).parents[2] / "docs" / "fleet.md"


def readme_command(command: str) -> list[str]:
    """The flags of the README's example ``vehicle_middleware.telemetry_export COMMAND`` (its
    shell lines joined where they continue)."""
    text = README.read_text().replace("\\\n", " ")
    [line] = [
        ln for ln in text.splitlines() if f"-m vehicle_middleware.telemetry_export {command} " in ln
    ]
    words = shlex.split(line)
    return words[words.index(command) :]


def test_the_readme_example_finds_what_the_generator_planted(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The README's synth and analyze flags, on a smaller fleet: restarts, a
    crash, drops, the silent signal at the README's thresholds, tampering and
    retention's trim, each found as planted."""
    synth = parser().parse_args(
        [*readme_command("synth"), "--vehicles", "3", "--records", "20000", "--seed", "3"]
    )
    facts = write_fleet(str(tmp_path / "fleet"), **synth_options(synth))
    assert facts["trimmed"]
    assert facts["tampered"]
    assert facts["lost_reported_later"]
    torn = tmp_path / "fleet" / "car-0001" / "journal-99999999999999999999-torn-000001.jsonl"
    torn.write_text('{"hash":"x","kind":"lost","vehicle_id":"car-0001"\n{not json at all\n')
    counts = job.ingest(spark, [str(tmp_path / "fleet")], str(tmp_path / "dataset"))
    assert (counts["records"], counts["bad_lines"], counts["duplicates"]) == (
        facts["records"],
        2,
        0,
    )
    args = parser().parse_args([*readme_command("analyze"), "--input", "x", "--output", "y"])
    options = analyze_options(args)
    # The planted silence is longer than the README's threshold for it.
    assert facts["stale_gap_min_s"] * 1e9 > dict(options["thresholds"])["Vehicle.Cabin"]
    report = tmp_path / "report"
    summary = job.analyze(spark, str(tmp_path / "dataset"), str(report), **options)
    for name in ("vehicles", "boots", "restarts", "unclean_stops", "dropped", "delivered"):
        assert summary[name] == facts[name], name
    # The trimmed boot's seqs before its first segment on disk are not missing.
    assert summary["unexplained_seqs"] == 0
    assert summary["missing_journal_records"] == facts["missing_journal_records"]
    assert summary["reported_journal_drops"] == facts["reported_journal_drops"]
    assert summary["unreported_journal_losses"] == 0
    # Tampering breaks one chain; retention's trim is reported, not broken.
    assert summary["broken_chains"] == 1
    assert summary["trimmed_boots"] == 1
    integrity = {r.boot_id: r for r in spark.read.parquet(str(report / "boot_integrity")).collect()}
    [broken] = [r for r in integrity.values() if r.broken_links]
    assert (broken.chain, broken.first_broken_offset) == ("broken", facts["tampered"]["offset"])
    trimmed = integrity[facts["trimmed"]["trimmed_boot_id"]]
    assert (trimmed.chain, trimmed.broken_links) == ("trimmed", 0)
    assert (trimmed.trimmed_files, trimmed.trimmed_bytes) == (1, facts["trimmed"]["bytes"])
    # What a crashed boot lost is reported by the next boot, for the crashed one.
    for lost in facts["lost_reported_later"]:
        crashed = integrity[lost["boot_id"]]
        assert crashed.reported_dropped == 7 + sum(lost["counts"].values())
        assert crashed.unreported_lost == 0
    # The silent signal, in its writes and its deliveries to both apps.
    stale = spark.read.parquet(str(report / "stale"))
    assert stale.where("what = 'write'").count() == facts["stale_intervals"]
    assert stale.where("what = 'delivery'").count() == facts["stale_deliveries"]
    assert {r.key for r in stale.collect()} == {STALE_KEY}
    # The planted failures: one per boot ended by a value, one open per clean stop.
    assert summary["failure_intervals"] == facts["failure_intervals"] > 0
    assert summary["open_failure_intervals"] == facts["open_failure_intervals"] > 0
    failures = spark.read.parquet(str(report / "failures"))
    assert {r.key for r in failures.collect()} == {FAILED_KEY, OPEN_FAILED_KEY}
    # The dashboard's filtered subscription: writes held back, told apart from drops.
    assert summary["filtered_writes"] == facts["filtered_writes"] > 0
    assert summary["apps"]["dashboard"]["filtered_writes"] == facts["filtered_writes"]
    assert summary["apps"]["dashboard"]["dropped"] == 0
    # Drops over several of the README's windows, not one.
    windows = spark.read.parquet(str(report / "drop_rates")).select("window_start_ns").distinct()
    assert windows.count() > 3
    md = (report / "report.md").read_text()
    assert "Hash chain broken" in md
    assert "removed by retention (at least 1 files" in md
    assert "restart after an unclean stop" in md
    assert "no stop record: unclean" in md
    assert "30 s for keys under `Vehicle.Cabin`" in md
    assert "per 60 s window" in md
    assert f"`{STALE_KEY}` | its writes | 30 s |" in md
    assert f"`{FAILED_KEY}` | sensor_fault |" in md
    assert f'| dashboard | `{FILTERED_KEY}` | `{{"min_interval_ms":2000' in md
    assert (report / "drops.png").stat().st_size > 0
    assert (report / "staleness.png").stat().st_size > 0


def test_a_boot_across_midnight_keeps_its_chain_over_two_date_partitions(
    spark: SparkSession, tmp_path: Path
) -> None:
    midnight = 1_790_035_200 * 10**9  # 2026-09-22 00:00:00 UTC
    chain, offsets = Chain(), OffsetCounter(2**32 - 50)  # the offsets wrap too
    journal = tmp_path / "journal" / "car-late"
    journal.mkdir(parents=True)
    lines = []
    for i in range(200):
        record = {"kind": "start" if i == 0 else "publish", "vehicle_id": "car-late"}
        record |= {"boot_id": "b-late", "offset": offsets.take()}
        record |= {"time_ns": midnight + (i - 100) * 10**6, "key": "Vehicle.Speed", "key_id": 1}
        lines.append(chain.line(record))
        if i == 120:
            offsets.take()  # one record the journal's buffer dropped
    (journal / "journal-00000000000000000001-b-late-000001.jsonl").write_bytes(b"".join(lines))
    job.ingest(spark, [str(tmp_path / "journal")], str(tmp_path / "dataset"))
    dates = sorted(p.name for p in (tmp_path / "dataset/records/vehicle_id=car-late").iterdir())
    assert dates == ["date=2026-09-21", "date=2026-09-22"]
    summary = job.analyze(spark, str(tmp_path / "dataset"), str(tmp_path / "report"))
    assert summary["boots"] == 1
    assert summary["broken_chains"] == 0
    assert summary["missing_journal_records"] == 1
