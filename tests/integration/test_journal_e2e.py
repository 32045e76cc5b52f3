"""The journal of a real middleware under a deliberately slow app tells exactly
what that app lost, and it verifies."""

from __future__ import annotations

from pathlib import Path

from vehicle_middleware.contract.journal.records import expand
from vehicle_middleware.contract.values import Failure, FailureCode, encode
from vehicle_middleware.sdk import ProviderClient
from vehicle_middleware.server.config import replace_settings
from vehicle_middleware.server.journal import JournalReport, read_journal, verify
from vehicle_middleware.server.server import start_server

from tests.integration.conftest import TEST_SETTINGS
from tests.integration.scenarios import slow_app


async def test_the_full_journal_accounts_for_every_event_a_slow_app_lost(tmp_path: Path) -> None:
    settings = replace_settings(
        TEST_SETTINGS, journal_dir=str(tmp_path), journal_level="full", vehicle_id="car-7"
    )
    server = await start_server(settings)
    n = 3000
    try:
        received = await slow_app(server.address, n)
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
    assert "queued" not in kinds  # derivable: delivered or dropped
    events = list(expand(records))
    kinds = [r["kind"] for r in events]
    assert kinds[0] == "start"
    assert kinds[-1] == "stop"
    assert kinds.count("publish") == n
    assert "key_added" in kinds
    assert "connect" in kinds
    assert "register" in kinds
    slow_drops = {
        r["seq"] for r in events if r["kind"] in ("evicted", "lost") and r["app"] == "slow"
    }
    got = {e.seq for e in received}
    missed = set(range(1, n + 1)) - got
    assert slow_drops  # the slow app did lose events
    assert slow_drops == missed  # exactly the ones it lost
    delivered = [r["seq"] for r in events if r["kind"] == "delivered" and r["app"] == "slow"]
    assert sorted(delivered) == sorted(got)  # each once
    # One record per batch, not per event.
    batches = [r for r in records if r["kind"] == "delivered_batch" and r["app"] == "slow"]
    assert len(batches) < len(delivered)


async def test_the_full_journal_records_each_write_of_a_request_with_its_own_version(
    tmp_path: Path,
) -> None:
    """What a fleet's analysis reads of each write: who wrote which key, the version
    that write made (a key written twice in one request: each its own), whether the
    value changed, and its size; one record per request."""
    settings = replace_settings(
        TEST_SETTINGS, journal_dir=str(tmp_path), journal_level="full", vehicle_id="car-8"
    )
    server = await start_server(settings)
    try:
        async with ProviderClient(server.address, "prov") as provider:
            await provider.add_keys(["Vehicle.A", "Vehicle.B"])
            await provider.publish([("Vehicle.A", b"1"), ("Vehicle.A", b"1"), ("Vehicle.B", b"xy")])
            await provider.publish([("Vehicle.A", b"2")])
            await provider.flush()
            assert await provider.set("Vehicle.B", b"xyz") == 2
            await provider.fail("Vehicle.A", FailureCode.SENSOR_FAULT, "stuck")
            await provider.publish([("Vehicle.A", b"3"), ("Vehicle.B", b"json")])
            await provider.flush()
    finally:
        await server.stop(0)
    report = JournalReport()
    records = read_journal([tmp_path], report)
    verify(records, report)
    assert report.intact
    ids = {r["key"]: r["key_id"] for r in records if r["kind"] == "key_added"}
    writes = [
        (r["writer"], r["key"], r["key_id"], r["version"], r["changed"], r["size"])
        for r in expand(records)
        if r["kind"] == "publish"
    ]
    failed = len(encode(Failure(FailureCode.SENSOR_FAULT, "stuck")))
    a, b = ids["Vehicle.A"], ids["Vehicle.B"]
    assert writes == [
        ("prov", "Vehicle.A", a, 1, True, 1),
        ("prov", "Vehicle.A", a, 2, False, 1),  # the same bytes again: a new version
        ("prov", "Vehicle.B", b, 1, True, 2),
        ("prov", "Vehicle.A", a, 3, True, 1),
        ("prov", "Vehicle.B", b, 2, True, 3),  # the unary Set
        ("prov", "Vehicle.A", a, 4, True, failed),  # a failure in place of a value
        ("prov", "Vehicle.A", a, 5, True, 1),
        ("prov", "Vehicle.B", b, 3, True, 4),
    ]
    batches = [len(r["key_ids"]) for r in records if r["kind"] == "publish_batch"]
    assert batches == [3, 1, 1, 1, 2]
    # Only the record with a failure says so: the code of each write, null for values.
    failures = [r.get("failures") for r in records if r["kind"] == "publish_batch"]
    assert failures == [None, None, None, ["sensor_fault"], None]
    assert [r.get("failure") for r in expand(records) if r["kind"] == "publish"][4:6] == [
        None,
        "sensor_fault",
    ]
