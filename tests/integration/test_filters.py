"""Subscription filters end to end: a real server on 127.0.0.1, the SDKs, raw stubs.

Every write a filtered subscription's trigger selects is counted in exactly one
event (``writes``), seq has no gap, and an interval bounds the events.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from vehicle_middleware.contract.journal.records import expand
from vehicle_middleware.contract.values import encode
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2
from vehicle_middleware.sdk import AppClient, DataEvent, Filter, ProviderClient, Sub
from vehicle_middleware.server.journal import read_journal
from vehicle_middleware.server.server import RunningServer

from tests.conftest import eventually
from tests.integration.conftest import NewServer

SPEED = "Vehicle.Speed"
NAME = "Vehicle.Driver.Name"


async def collect(events: Any, into: list[DataEvent]) -> None:
    async for e in events:
        if isinstance(e, DataEvent):
            into.append(e)


@pytest.mark.usefixtures("each_codecs")
async def test_an_interval_filter_counts_every_write_in_its_few_events(
    server: RunningServer,
) -> None:
    """600 writes as fast as the provider makes them, seen by an app asking one event
    per 50 ms: every write is in exactly one event, no seq gap, at most one event per
    interval of the time the writes and their events took, and the last value
    arrives (held to the end of its interval)."""
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys([SPEED])
        await provider.flush()
        async with AppClient(server.address, "dash") as app:
            [r] = await app.subscribe([Sub(SPEED, filter=Filter(min_interval=0.05))])
            assert r.ok
            got: list[DataEvent] = []
            reader = asyncio.create_task(collect(app.events(), got))
            began = time.monotonic()
            n = 600
            for i in range(1, n + 1):
                await provider.publish({SPEED: encode(float(i))})
            await provider.flush()
            await eventually(
                lambda: sum(e.writes for e in got) == n,
                what=lambda: f"{sum(e.writes for e in got)} of {n} writes in {len(got)} events",
            )
            # Every event was sent within this span, at least 50 ms after the one before.
            took = time.monotonic() - began
            [info] = await app.subscriptions()
            assert Filter.of_pb(info.filter) == Filter(min_interval=0.05)
            reader.cancel()
    assert [e.seq for e in got] == list(range(1, len(got) + 1))
    assert all(e.missed == 0 for e in got)
    assert got[-1].data == encode(float(n))
    assert len(got) <= took / 0.05 + 1, (n, len(got), took)
    assert max(e.writes for e in got) > 1


async def test_threshold_and_range_filters_pass_the_writes_their_rules_select(
    server: RunningServer,
) -> None:
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys([SPEED, "Vehicle.Range"])
        # Numeric by their values (no catalog here).
        await provider.publish({SPEED: encode(0.0), "Vehicle.Range": encode(0.0)})
        await provider.flush()
        async with AppClient(server.address, "dash") as app:
            results = await app.subscribe(
                [
                    Sub(SPEED, filter=Filter(threshold=5.0)),
                    Sub("Vehicle.Range", filter=Filter(range=(10.0, 20.0))),
                ]
            )
            assert [r.status for r in results] == ["OK", "OK"]
            got: list[DataEvent] = []
            reader = asyncio.create_task(collect(app.events(), got))
            for v in (10.0, 12.0, 14.9, 15.0, 11.0, 9.9):
                await provider.publish({SPEED: encode(v)})
            for v in (5.0, 6.0, 10.0, 15.0, 20.0, 21.0):
                await provider.publish({"Vehicle.Range": encode(v)})
            await provider.flush()
            await eventually(lambda: sum(e.writes for e in got) == 12)
            reader.cancel()
    assert [(e.name, e.data, e.writes) for e in got] == [
        (SPEED, encode(10.0), 1),
        (SPEED, encode(15.0), 3),
        (SPEED, encode(9.9), 2),
        ("Vehicle.Range", encode(5.0), 1),
        ("Vehicle.Range", encode(10.0), 2),
        ("Vehicle.Range", encode(21.0), 3),
    ]


async def test_a_bad_filter_is_the_keys_invalid_argument_and_changes_nothing(
    server: RunningServer, connect: Any
) -> None:
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys([SPEED, NAME, "Vehicle.Unwritten"])
        await provider.publish({SPEED: encode(1.0), NAME: encode("Ada")})
        await provider.flush()
    stubs = connect("dash")
    stream = stubs.events.GetEvents(ess_pb2.GetEventsRequest(), metadata=stubs.md)
    await stream.read()  # StreamStarted: the stream is open
    cases = [
        (ess_pb2.Filter(min_interval_ms=0), SPEED, "filter.min_interval_ms: 0 ms is outside"),
        (ess_pb2.Filter(min_interval_ms=3_600_001), SPEED, "allowed 1 to 3600000 ms"),
        (ess_pb2.Filter(threshold=0.0), SPEED, "filter.threshold: 0.0 is not a finite number"),
        (ess_pb2.Filter(threshold=float("nan")), SPEED, "filter.threshold: nan"),
        (
            ess_pb2.Filter(range=ess_pb2.Range(lo=2, hi=1)),
            SPEED,
            "filter.range: lo 2.0 is above hi 1.0",
        ),
        (
            ess_pb2.Filter(threshold=1.0),
            NAME,
            "filter.threshold: key 'Vehicle.Driver.Name' is not numeric: it has no VSS "
            "datatype and its value is not a number",
        ),
        (
            ess_pb2.Filter(range=ess_pb2.Range(lo=0, hi=1)),
            "Vehicle.Unwritten",
            "it has no VSS datatype and has never been written",
        ),
    ]
    response = await stubs.events.Register(
        ess_pb2.RegisterRequest(
            subscriptions=[ess_pb2.Subscription(key=k, filter=f) for f, k, _ in cases]
        ),
        metadata=stubs.md,
    )
    for result, (_, key, detail) in zip(response.results, cases, strict=True):
        assert result.key == key
        assert result.status == ess_pb2.STATUS_INVALID_ARGUMENT
        assert detail in result.detail, result.detail
    subs = await stubs.events.GetSubscriptions(ess_pb2.GetSubscriptionsRequest(), metadata=stubs.md)
    assert list(subs.subscriptions) == []
    stream.cancel()


@pytest.mark.settings(vss=("tests/integration/kuksa_catalog.json",))
async def test_a_keys_vss_datatype_says_whether_it_is_numeric(
    server: RunningServer, connect: Any
) -> None:
    stubs = connect("dash")
    stream = stubs.events.GetEvents(ess_pb2.GetEventsRequest(), metadata=stubs.md)
    await stream.read()
    response = await stubs.events.Register(
        ess_pb2.RegisterRequest(
            subscriptions=[
                ess_pb2.Subscription(key=SPEED, filter=ess_pb2.Filter(threshold=1.0)),
                ess_pb2.Subscription(
                    key="Vehicle.Cabin.Infotainment.Source",
                    filter=ess_pb2.Filter(threshold=1.0),
                ),
            ]
        ),
        metadata=stubs.md,
    )
    ok, text = response.results
    assert ok.status == ess_pb2.STATUS_OK  # numeric by its datatype, never written
    assert text.status == ess_pb2.STATUS_INVALID_ARGUMENT
    assert text.detail.startswith(
        "filter.threshold: key 'Vehicle.Cabin.Infotainment.Source' is not numeric: "
        "its VSS datatype is string"
    )
    stream.cancel()


async def test_the_full_journal_counts_every_write_of_a_filtered_subscription(
    tmp_path: Path, new_server: NewServer
) -> None:
    """The register record carries the filter; the delivered batches' write_counts
    add up to the writes published."""
    server = await new_server(journal_dir=str(tmp_path), journal_level="full")
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys([SPEED])
        await provider.flush()
        async with AppClient(server.address, "dash") as app:
            await app.subscribe([Sub(SPEED, filter=Filter(min_interval=0.05))])
            got: list[DataEvent] = []
            reader = asyncio.create_task(collect(app.events(), got))
            for n in range(1, 201):
                await provider.publish({SPEED: encode(float(n))})
            await provider.flush()
            await eventually(lambda: sum(e.writes for e in got) == 200)
            reader.cancel()
    await server.stop(0)
    records = read_journal([tmp_path])
    [register] = [r for r in records if r["kind"] == "register" and r["app"] == "dash"]
    assert register["filter"] == {"min_interval_ms": 50, "threshold": None, "range": None}
    delivered = [r for r in expand(records) if r["kind"] == "delivered" and r["app"] == "dash"]
    assert sum(r.get("writes", 1) for r in delivered) == 200
    assert len(delivered) == len(got)
