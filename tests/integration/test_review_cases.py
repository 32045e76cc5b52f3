"""Cases found in review: large values, paging, identity clashes, resumed seqs,
undecodable requests and shutdown."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import pytest
from vmw.proto.ess.v1 import ess_pb2
from vmw.proto.vstore.v1 import vstore_pb2
from vmw.sdk import (
    AppClient,
    DataEvent,
    ProviderClient,
    QueueSpec,
    StreamReplacedError,
    Sub,
)
from vmw.server.config import replace_settings
from vmw.server.server import RunningServer, start_server

from tests.conftest import fails
from tests.integration.conftest import TEST_SETTINGS

BIG = 60 * 1024


@pytest.mark.settings(max_value_size=BIG, event_budget=100_000)
async def test_batches_of_large_values_are_split_to_fit_the_message_limit(
    server: RunningServer,
) -> None:
    names = [f"Vehicle.Blob{i}" for i in range(150)]
    async with ProviderClient(server.address, "sim") as p:
        await p.add_keys(names)
        app = AppClient(server.address, "big", queues=[QueueSpec(0, 150, 200)])
        async with app:
            await app.subscribe([Sub(n) for n in names])
            events = app.events()
            for i, name in enumerate(names):  # 150 x 60 KiB queue up before the app reads
                await p.publish({name: bytes([i % 256]) * BIG})
            await p.flush()
            got: list[DataEvent] = []

            async def take() -> None:
                async for e in events:
                    if isinstance(e, DataEvent):
                        got.append(e)
                        if len(got) == len(names):
                            return

            await asyncio.wait_for(take(), 10)
            assert sorted(e.name or "" for e in got) == sorted(names)
            assert all(e.missed == 0 and e.data is not None and len(e.data) == BIG for e in got)


@pytest.mark.settings(max_value_size=BIG, max_message_bytes=1024 * 1024)
async def test_responses_that_would_not_fit_are_refused_before_changing_anything(
    server: RunningServer, connect: Any
) -> None:
    s = connect("tool")
    names = [f"Vehicle.Blob{i}" for i in range(20)]
    await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=names), metadata=s.md)
    for half in (names[:10], names[10:]):  # a request must fit the limit too
        await s.vstore.Set(
            vstore_pb2.SetRequest(
                updates=[vstore_pb2.Update(name=n, data=bytes(BIG)) for n in half]
            ),
            metadata=s.md,
        )
    await fails(
        s.vstore.Get(vstore_pb2.GetRequest(names=names), metadata=s.md),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "get fewer keys per request",
    )
    call = s.events.GetEvents(ess_pb2.GetEventsRequest(), metadata=s.md)
    await call.read()
    await fails(
        s.events.Register(
            ess_pb2.RegisterRequest(
                subscriptions=[ess_pb2.Subscription(key=n, want_current=True) for n in names]
            ),
            metadata=s.md,
        ),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "current values asked for",
    )
    assert server.runtime.ess.subscriptions("tool") == []
    call.cancel()


async def test_list_keys_is_paged(server: RunningServer, connect: Any) -> None:
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


async def test_shutdown_ends_open_streams_at_once_with_unavailable() -> None:
    running = await start_server(replace_settings(TEST_SETTINGS, grace_period_s=30.0))
    async with grpc.aio.insecure_channel(running.address) as channel:
        from vmw.proto.ess.v1 import ess_pb2_grpc

        call = ess_pb2_grpc.EventServiceStub(channel).GetEvents(
            ess_pb2.GetEventsRequest(), metadata=(("app-id", "dash"),)
        )
        await call.read()
        t0 = time.monotonic()
        await running.stop(10.0)
        assert time.monotonic() - t0 < 3.0
        await fails(call.read(), grpc.StatusCode.UNAVAILABLE)
    assert running.runtime.ess.apps() == []
