"""docs/design.md's rules end to end over gRPC: a real server on 127.0.0.1, the SDKs, raw stubs."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import pytest
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2
from vehicle_middleware.sdk import (
    AppClient,
    DataEvent,
    KeyAddedEvent,
    ProviderClient,
    QueueSpec,
    StreamReplacedError,
    Sub,
)
from vehicle_middleware.server.server import RunningServer

from tests.conftest import eventually, fails

SPEED = "Vehicle.Speed"
TEMP = "Vehicle.Cabin.HVAC.AmbientAirTemperature"
WINDOW = "Vehicle.Body.Windows.Row2.Right.Level"


async def next_data(events: Any, n: int = 1, timeout: float = 5.0) -> list[DataEvent]:
    """The next ``n`` data events of an SDK event iterator (lifecycle events skipped)."""
    out: list[DataEvent] = []

    async def take() -> None:
        async for e in events:
            if isinstance(e, DataEvent):
                out.append(e)
                if len(out) == n:
                    return

    await asyncio.wait_for(take(), timeout)
    return out


@pytest.mark.usefixtures("each_codecs")
async def test_register_returns_current_values_and_events_follow_writes(
    server: RunningServer,
) -> None:
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys([SPEED, TEMP])
        await provider.publish({SPEED: b"50", TEMP: b"21"})
        await provider.flush()
        async with AppClient(server.address, "dash") as app:
            results = await app.subscribe(
                [Sub(SPEED, want_current=True), Sub(TEMP, on_update=True), Sub("Vehicle.Nope")]
            )
            assert [(r.key, r.status, r.current) for r in results] == [
                (SPEED, "OK", b"50"),
                (TEMP, "OK", None),
                ("Vehicle.Nope", "NOT_FOUND", None),
            ]
            events = app.events()
            for value in (b"50", b"51", b"51"):  # unchanged, changed, unchanged
                await provider.publish({SPEED: value, TEMP: b"21"})
            got = await next_data(events, 4)
            assert [(e.name, e.seq, e.data) for e in got] == [
                (TEMP, 1, None),
                (SPEED, 1, b"51"),
                (TEMP, 2, None),
                (TEMP, 3, None),
            ]
            assert all(e.missed == 0 for e in got)
            assert got[1].time_ns > 0


@pytest.mark.usefixtures("each_codecs")
async def test_publish_keeps_the_source_time_given_and_stamps_one_left_out(
    server: RunningServer,
) -> None:
    """A provider's ``time_ns`` is the value's time, 0 included (set, not absent);
    left out, the middleware's clock stamps the write."""
    store = server.runtime.store
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys([SPEED])
        key = provider.ids[SPEED]
        for data, given in ((b"1", 1_700_000_000_123_456_789), (b"2", 0), (b"3", None)):
            before = time.time_ns()
            await provider.publish({SPEED: data}, time_ns=given)
            await provider.flush()
            value, stamped = store.peek(key)
            assert value == data
            if given is None:
                assert before <= stamped <= time.time_ns()
            else:
                assert stamped == given


async def test_get_subscriptions_and_deregister(server: RunningServer) -> None:
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys([SPEED, TEMP])
        async with AppClient(server.address, "dash") as app:
            await app.subscribe([Sub(SPEED, queue=1), Sub(TEMP, on_update=True)])
            infos = await app.subscriptions()
            assert [(i.key, i.queue, i.trigger) for i in infos] == [
                (SPEED, 1, ess_pb2.TRIGGER_ON_CHANGE),
                (TEMP, 0, ess_pb2.TRIGGER_ON_UPDATE),
            ]
            first = await app.unsubscribe([SPEED])
            again = await app.unsubscribe([SPEED])
            assert [r.status for r in first + again] == ["OK", "OK"]
            assert [i.key for i in await app.subscriptions()] == [TEMP]
            assert server.runtime.ess.watched_keys() == [provider.ids[TEMP]]


@pytest.mark.usefixtures("each_codecs")
async def test_key_added_and_removed_reach_the_apps(server: RunningServer) -> None:
    async with AppClient(server.address, "dash") as app, ProviderClient(server.address, "sim") as p:
        events = app.events()
        ids = await p.add_keys([WINDOW])
        first = await asyncio.wait_for(events.__anext__(), 5)
        assert first == KeyAddedEvent(ids[WINDOW], WINDOW)
        assert app.names[ids[WINDOW]] == WINDOW
        await p.remove_keys([WINDOW])
        second = await asyncio.wait_for(events.__anext__(), 5)
        assert (type(second).__name__, second.key) == ("KeyRemovedEvent", ids[WINDOW])  # type: ignore[union-attr]
        assert ids[WINDOW] not in app.names


@pytest.mark.usefixtures("each_codecs")
async def test_slow_reader_loses_events_that_its_seq_gaps_account_for(
    server: RunningServer,
) -> None:
    """A reader that does not read: its queues fill, the drop rule acts, seq shows it."""
    n = 3000
    value = bytes(2048)
    async with ProviderClient(server.address, "sim") as provider:
        ids = await provider.add_keys([SPEED, TEMP])
        slow = AppClient(server.address, "slow", queues=[QueueSpec(0, 0, 5)])
        fast = AppClient(server.address, "fast", queues=[QueueSpec(0, 10, 200)])
        async with slow, fast:
            await slow.subscribe([Sub(SPEED)])
            await fast.subscribe([Sub(TEMP)])
            fast_events = fast.events()
            for i in range(n):
                await provider.publish({SPEED: i.to_bytes(4, "big") + value})
                if i % 100 == 0:
                    await provider.publish({TEMP: i.to_bytes(4, "big")})
            await provider.flush()
            fast_got = await next_data(fast_events, n // 100)
            assert sum(e.missed for e in fast_got) == 0
            drops = server.runtime.ess.drop_counts("slow")[(ids[SPEED], 0)]
            assert drops.evicted + drops.lost > 0
            # Now the slow app reads everything left.
            received: list[DataEvent] = []
            async for e in slow.events():
                if isinstance(e, DataEvent):
                    received.append(e)
                    if e.seq == n:
                        break
            assert received[-1].data is not None
            assert received[-1].data[:4] == (n - 1).to_bytes(4, "big")  # the latest value arrived
            assert len(received) + sum(e.missed for e in received) == n
            assert sum(e.missed for e in received) == drops.evicted + drops.lost
            assert [e.seq for e in received] == sorted(e.seq for e in received)


@pytest.mark.settings(event_budget_per_app=70)
async def test_an_app_whose_stream_ends_leaves_nothing_behind(server: RunningServer) -> None:
    ess = server.runtime.ess
    free = ess.budget_free
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys([SPEED, TEMP])
        app = AppClient(server.address, "crashy", queues=[QueueSpec(0, 50, 100)])
        await app.connect()
        await app.subscribe([Sub(SPEED), Sub(TEMP)])
        await provider.publish({SPEED: b"1", TEMP: b"2"})
        await provider.flush()
        assert ess.watched_keys() != []
        assert ess.budget_free < free
        await app.close()  # the process "crashes": its stream is cancelled
        await eventually(lambda: not ess.has_stream("crashy"), what="app removal")
        assert ess.watched_keys() == []
        assert ess.budget_free == free
        assert ess.subscriptions("crashy") == []
        ess.check()


async def test_a_second_get_events_replaces_the_first_and_starts_the_app_anew(
    server: RunningServer, connect: Any
) -> None:
    stubs = connect("twice")
    async with ProviderClient(server.address, "sim") as provider:
        ids = await provider.add_keys([SPEED])
        first = stubs.events.GetEvents(ess_pb2.GetEventsRequest(), metadata=stubs.md)
        await first.read()
        reply = await stubs.events.Register(
            ess_pb2.RegisterRequest(subscriptions=[ess_pb2.Subscription(key=SPEED)]),
            metadata=stubs.md,
        )
        assert reply.results[0].status == ess_pb2.STATUS_OK
        second = stubs.events.GetEvents(ess_pb2.GetEventsRequest(), metadata=stubs.md)
        started = await second.read()
        assert started.events[0].WhichOneof("event") == "started"

        async def read_until_the_end() -> None:
            while True:
                await first.read()

        await fails(read_until_the_end(), grpc.StatusCode.ABORTED, "replaced this one")
        listed = await stubs.events.GetSubscriptions(
            ess_pb2.GetSubscriptionsRequest(), metadata=stubs.md
        )
        assert list(listed.subscriptions) == []  # the first stream's went with it
        reply = await stubs.events.Register(
            ess_pb2.RegisterRequest(subscriptions=[ess_pb2.Subscription(key=SPEED)]),
            metadata=stubs.md,
        )
        assert (reply.results[0].status, reply.results[0].seq) == (ess_pb2.STATUS_OK, 0)
        await provider.publish({SPEED: b"9"})
        batch = await asyncio.wait_for(second.read(), 5)
        [event] = batch.events
        assert (event.data_updated.key, event.data_updated.seq) == (ids[SPEED], 1)
        second.cancel()


@pytest.mark.settings(grace_period_s=30.0)
async def test_with_a_grace_period_a_reconnecting_app_keeps_its_subscriptions(
    server: RunningServer,
) -> None:
    async with ProviderClient(server.address, "sim") as provider:
        await provider.add_keys([SPEED])
        app = AppClient(server.address, "flaky")
        await app.connect()
        await app.subscribe([Sub(SPEED)])
        await app.close()
        await eventually(lambda: "flaky" not in server.runtime.streams, what="stream end")
        assert server.runtime.ess.is_watched(provider.ids[SPEED])
        async with AppClient(server.address, "flaky") as again:
            assert [i.key for i in await again.subscriptions()] == [SPEED]


async def test_health_and_reflection_are_served(server: RunningServer) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    async with grpc.aio.insecure_channel(server.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(
            health_pb2.HealthCheckRequest(service="vehicle.ess.v1.EventService")
        )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        refl = reflection_pb2_grpc.ServerReflectionStub(channel)
        call = refl.ServerReflectionInfo()
        await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
        response = await call.read()
        await call.done_writing()
        names = {s.name for s in response.list_services_response.service}
        assert {
            "vehicle.ess.v1.EventService",
            "vehicle.vstore.v1.VStore",
            "grpc.health.v1.Health",
        } <= names


async def test_list_keys_answers_in_pages_that_together_hold_every_key(
    server: RunningServer, connect: Any
) -> None:
    s = connect("tool")
    names = sorted(f"Vehicle.K{i:03d}" for i in range(25))
    await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=names), metadata=s.md)
    seen: list[str] = []
    start = ""
    pages = 0
    while True:
        page = await s.vstore.ListKeys(
            vstore_pb2.ListKeysRequest(limit=10, start_after=start), metadata=s.md
        )
        seen += [k.name for k in page.keys]
        pages += 1
        start = page.next_start_after
        if not start:
            break
    assert seen == names
    assert pages == 3


async def test_a_second_client_of_the_same_app_takes_over_without_a_fight(
    server: RunningServer,
) -> None:
    first = AppClient(server.address, "dash")
    second = AppClient(server.address, "dash")
    try:
        await first.connect()
        events = first.events()
        await second.connect()  # replaces the first stream
        with pytest.raises(StreamReplacedError, match="another client of app 'dash'"):
            await asyncio.wait_for(events.__anext__(), 5)
        assert "dash" in server.runtime.streams
    finally:
        await first.close()
        await second.close()


@pytest.mark.settings(grace_period_s=30.0)
async def test_a_resumed_subscription_reports_no_false_gap(server: RunningServer) -> None:
    async with ProviderClient(server.address, "sim") as p:
        await p.add_keys(["Vehicle.Speed"])
        app = AppClient(server.address, "dash")
        await app.connect()
        await app.subscribe([Sub("Vehicle.Speed")])
        for v in range(5):
            await p.publish({"Vehicle.Speed": bytes([v])})
        await p.flush()
        await app.close()  # within the grace period its subscription stays, seq 5
        async with AppClient(server.address, "dash") as again:
            [r] = await again.subscribe([Sub("Vehicle.Speed")])
            assert r.ok
            events = again.events()
            await p.publish({"Vehicle.Speed": b"\x09"})
            e = await asyncio.wait_for(events.__anext__(), 5)
            assert isinstance(e, DataEvent)
            assert (e.seq, e.missed) == (6, 0)
            await again.unsubscribe(["Vehicle.Speed"])
            await again.subscribe([Sub("Vehicle.Speed")])  # new: from 1 again
            await p.publish({"Vehicle.Speed": b"\x0a"})
            e = await asyncio.wait_for(events.__anext__(), 5)
            assert isinstance(e, DataEvent)
            assert (e.seq, e.missed) == (1, 0)
