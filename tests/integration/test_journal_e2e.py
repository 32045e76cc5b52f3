"""The journal of a real middleware under a deliberately slow app tells exactly
what that app lost, and it verifies."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from middleware.client import AppClient, DataEvent, ProviderClient, QueueSpec, Sub
from middleware.journal import JournalReport, read_journal, verify
from middleware.server import start_server
from tests.integration.conftest import TEST_SETTINGS

SPEED = "Vehicle.Speed"


async def test_the_full_journal_accounts_for_every_event_a_slow_app_lost(tmp_path: Path) -> None:
    settings = dataclasses.replace(
        TEST_SETTINGS, journal_dir=str(tmp_path), journal_level="full", vehicle_id="car-7"
    )
    server = await start_server(settings)
    n = 3000
    received: list[DataEvent] = []
    try:
        async with ProviderClient(server.address, "sim") as provider:
            ids = await provider.add_keys([SPEED])
            slow = AppClient(server.address, "slow", queues=[QueueSpec(0, 0, 5)])
            async with slow:
                await slow.subscribe([Sub(SPEED)])
                for i in range(n):
                    await provider.publish({SPEED: i.to_bytes(4, "big") + bytes(4096)})
                await provider.flush()
                async for e in slow.events():
                    if isinstance(e, DataEvent):
                        received.append(e)
                        if e.seq == n:
                            break
    finally:
        await server.stop(0)
    report = JournalReport()
    records = read_journal([tmp_path], report)
    verify(records, report)
    boot = report.boots[server.runtime.boot_id]
    assert report.intact
    assert report.torn_lines == []
    assert boot.offset_gaps == 0
    assert {r["vehicle_id"] for r in records} == {"car-7"}
    kinds = [r["kind"] for r in records]
    assert kinds[0] == "start"
    assert kinds[-1] == "stop"
    assert kinds.count("publish") == n
    assert "key_added" in kinds
    assert "connect" in kinds
    assert "register" in kinds
    slow_drops = {
        r["seq"] for r in records if r["kind"] in ("evicted", "lost") and r["app"] == "slow"
    }
    got = {e.seq for e in received}
    missed = set(range(1, n + 1)) - got
    assert slow_drops  # the slow app did lose events
    assert slow_drops == missed  # exactly the ones it lost
    delivered = {r["seq"] for r in records if r["kind"] == "delivered" and r["app"] == "slow"}
    assert delivered == got
    queued = {r["seq"] for r in records if r["kind"] == "queued" and r["key_id"] == ids[SPEED]}
    assert got <= queued
    assert asyncio.get_running_loop()  # ran on the test's loop
