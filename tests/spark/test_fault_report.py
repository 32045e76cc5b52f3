"""The fleet analysis of a journal a real middleware wrote under faults: a boot
trimmed by retention while a slow app lost events, then killed (kill -9), and a
clean boot after it.

Retention is not tampering, the killed boot is an unclean stop in the summary
and in report.md, and no loss goes unreported.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from pyspark.sql import SparkSession
from vehicle_middleware.sdk import AppClient, DataEvent, ProviderClient, QueueSpec, Sub
from vehicle_middleware.telemetry_export import job

from tests.conftest import eventually
from tests.integration.test_journal_faults import kill9, publish, serve, verify_cli
from tests.integration.test_process import stop


async def _slow_reader(address: str, n: int) -> None:
    """A provider writes ``n`` values of 4 KiB to 4 keys, about 1,000 a second,
    while an app with a 5-event queue reads 100 a second: deliveries and drops
    interleave, a few drops between two deliveries of a key."""
    keys = [f"Vehicle.Test{i}" for i in range(4)]
    async with ProviderClient(address, "sim") as provider:
        await provider.add_keys(keys)
        # A window of one batch: deliveries and drops interleave all along, so the
        # part of the journal retention keeps holds both, whatever transport
        # buffers could hold.
        async with AppClient(address, "slow", queues=[QueueSpec(0, 0, 5)], window=1) as app:
            await app.subscribe([Sub(k) for k in keys])

            read = 0

            async def reader_loop() -> None:
                nonlocal read
                async for e in app.events():
                    if isinstance(e, DataEvent):
                        read += 1
                        await asyncio.sleep(0.01)  # the slow app's pace: the behaviour tested

            reader = asyncio.create_task(reader_loop())
            for i in range(n):
                await provider.publish({keys[i % 4]: i.to_bytes(4, "big") + bytes(4096)})
                await asyncio.sleep(0.001)  # the provider's pace, not synchronisation
            await provider.flush()
            # Deliveries go on after the writes stopped, behind their drops (what the
            # window, a batch, and the full queue still hold): wait until the app has
            # read everything, i.e. nothing more arrives for half a second.
            seen = -1

            def quiet() -> bool:  # nothing read since the last look, half a second ago
                nonlocal seen
                still, seen = seen == read, read
                return still

            await eventually(quiet, timeout=30, poll=0.5, what="the slow app to stop reading")
            reader.cancel()


async def _faulty_journal(journal: Path) -> None:
    small = ("--journal-level", "full", "--journal-segment-bytes", "20000")
    proc, address = serve(journal, *small, "--journal-max-bytes", "200000")
    try:
        await publish(address, 1500)
        await _slow_reader(address, 2000)
    finally:
        kill9(proc)
    proc, address = serve(journal, *small, "--journal-max-bytes", "10000000")
    try:
        await publish(address, 10)
    finally:
        code, err = stop(proc)
    assert code == 0, err


def test_retention_and_a_killed_boot_read_as_such_in_verify_and_the_report(
    spark: SparkSession, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    asyncio.run(_faulty_journal(journal))
    code, out = verify_cli(journal)
    assert code == 0, out
    assert "retention removed its oldest segments" in out
    assert out.count("UNCLEAN STOP") == 1

    counts = job.ingest(spark, [str(journal)], str(tmp_path / "dataset"))
    assert counts["bad_lines"] == 0
    summary = job.analyze(spark, str(tmp_path / "dataset"), str(tmp_path / "report"))
    assert summary["restarts"] == 1
    assert summary["broken_chains"] == 0
    assert summary["trimmed_boots"] == 1
    assert summary["unclean_stops"] == 1
    assert summary["unreported_journal_losses"] == 0
    assert summary["missing_seqs"] > 0  # the slow app's drops, after the trimmed start
    assert summary["unexplained_seqs"] == 0
    report = (tmp_path / "report" / "report.md").read_text()
    assert "no stop record: unclean" in report
    assert "restart after an unclean stop" in report
    assert "broken at offset" not in report
    assert "records missing before offset" not in report
