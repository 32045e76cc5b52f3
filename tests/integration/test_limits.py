"""Every limit is enforced with RESOURCE_EXHAUSTED naming it, and harms no other client;
what fits the limits in parts (a batch of large values) is sent in parts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import grpc
import pytest
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2 as types_v2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2 as val_v2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2_grpc as val_v2_grpc
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc
from vehicle_middleware.sdk import AppClient, DataEvent, ProviderClient, QueueSpec, Sub
from vehicle_middleware.server.server import RunningServer

from tests.conftest import eventually, fails
from tests.integration.conftest import NewServer

Code = grpc.StatusCode
BIG = 60 * 1024
"""A large value: 150 of them are more than one gRPC message holds."""


async def exhausted(call: Awaitable[Any], *fragments: str) -> None:
    await fails(call, Code.RESOURCE_EXHAUSTED, *fragments)


async def open_stream(s: Any) -> Any:
    call = s.events.GetEvents(
        ess_pb2.GetEventsRequest(
            queues=[ess_pb2.QueueConfig(queue=q, min_length=0, max_length=10) for q in range(3)]
        ),
        metadata=s.md,
    )
    await call.read()
    return call


@pytest.mark.settings(max_apps=2)
async def test_apps_with_open_streams_are_limited(server: RunningServer, connect: Any) -> None:
    calls = [await open_stream(connect(f"app{i}")) for i in range(2)]
    third = connect("app2")
    call = third.events.GetEvents(ess_pb2.GetEventsRequest(), metadata=third.md)
    await exhausted(call.read(), "apps with open streams", "the limit is 2")
    again = await open_stream(connect("app0"))  # an app already in replaces its own stream
    assert "app0" in server.runtime.streams
    for c in [*calls, again]:
        c.cancel()


@pytest.mark.settings(max_subscriptions_per_app=2)
async def test_subscriptions_per_app_are_limited(server: RunningServer, connect: Any) -> None:
    s = connect("dash")
    names = ["Vehicle.A", "Vehicle.B", "Vehicle.C"]
    await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=names), metadata=s.md)
    call = await open_stream(s)
    reg = s.events.Register
    await reg(
        ess_pb2.RegisterRequest(subscriptions=[ess_pb2.Subscription(key=n) for n in names[:2]]),
        metadata=s.md,
    )
    await reg(
        ess_pb2.RegisterRequest(subscriptions=[ess_pb2.Subscription(key="Vehicle.A", queue=1)]),
        metadata=s.md,
    )  # replacing one is not one more
    await exhausted(
        reg(
            ess_pb2.RegisterRequest(subscriptions=[ess_pb2.Subscription(key="Vehicle.C")]),
            metadata=s.md,
        ),
        "subscriptions",
        "would hold 3",
        "the limit is 2",
    )
    assert len(server.runtime.ess.subscriptions("dash")) == 2
    call.cancel()


@pytest.mark.settings(max_publish_streams_per_app=1)
async def test_publish_streams_per_app_are_limited(server: RunningServer, connect: Any) -> None:
    s = connect("prov")
    keys = await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=["Vehicle.A"]), metadata=s.md)
    update = vstore_pb2.PublishRequest(updates=[vstore_pb2.IdUpdate(id=keys.keys[0].id, data=b"1")])
    first = s.vstore.Publish(metadata=s.md)
    await first.write(update)
    second = s.vstore.Publish(metadata=s.md)
    await second.write(update)
    await exhausted(second, "Publish streams", "already has 1 open", "the limit is 1")
    await first.done_writing()
    assert (await first).batches == 1


@pytest.mark.settings(rate_limit_rps=5.0, rate_limit_burst=5)
async def test_the_request_rate_per_app_is_limited_without_harming_others(
    server: RunningServer, connect: Any
) -> None:
    greedy, polite = connect("greedy"), connect("polite")
    request = vstore_pb2.ListKeysRequest()
    for _ in range(5):
        await greedy.vstore.ListKeys(request, metadata=greedy.md)
    await exhausted(
        greedy.vstore.ListKeys(request, metadata=greedy.md),
        "rate limit",
        "more than 5 requests/s (burst 5)",
        "the limit is 5",
    )
    await polite.vstore.ListKeys(request, metadata=polite.md)  # its own bucket


@pytest.mark.settings(publish_messages_per_s=1.0, publish_burst=3)
async def test_messages_per_publish_stream_are_limited(server: RunningServer, connect: Any) -> None:
    s = connect("prov")
    keys = await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=["Vehicle.A"]), metadata=s.md)
    call = s.vstore.Publish(metadata=s.md)
    for i in range(4):
        await call.write(
            vstore_pb2.PublishRequest(
                updates=[vstore_pb2.IdUpdate(id=keys.keys[0].id, data=bytes([i]))]
            )
        )
    await exhausted(call, "Publish messages/s", "burst 3", "3 batches were written")
    assert server.runtime.store.get("Vehicle.A").data == b"\x02"


@pytest.mark.settings(max_message_bytes=64 * 1024 + 2048, max_value_size=64 * 1024)
async def test_messages_above_the_grpc_limit_are_refused(
    server: RunningServer, connect: Any
) -> None:
    s = connect("tool")
    names = [f"Vehicle.K{i}" for i in range(5000)]  # about 70 KiB of names
    await exhausted(
        s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=names), metadata=s.md), "larger than max"
    )
    assert len(server.runtime.store) == 0


# -- every limit on every API and transport, per app ------------------------------------


@pytest.mark.settings(max_apps=2, max_subscriptions_per_app=3)
async def test_kuksa_subscriptions_count_for_their_app_not_as_apps(
    server: RunningServer, connect: Any
) -> None:
    """One app opening many KUKSA subscriptions is one app of max_apps (it took one
    app's place each, shutting everyone else out), and its subscriptions on all of
    them count against its max_subscriptions_per_app."""
    s = connect("greedy")
    names = ["Vehicle.A", "Vehicle.B", "Vehicle.C", "Vehicle.D"]
    await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=names), metadata=s.md)
    kuksa = val_v2_grpc.VALStub(s.channel)
    subs = []
    for i, name in enumerate(names[:3]):
        subs.append(kuksa.Subscribe(val_v2.SubscribeRequest(signal_paths=[name]), metadata=s.md))
        await eventually(  # subscribed (no value yet: nothing to read)
            lambda i=i: len(server.runtime.streams.streams_of("greedy")) == i + 1,  # type: ignore[misc]
            timeout=30,
            what="the KUKSA subscription open",
        )
    over = kuksa.Subscribe(val_v2.SubscribeRequest(signal_paths=[names[3]]), metadata=s.md)
    await exhausted(over.read(), "subscriptions", "the limit is 3")
    other = await open_stream(connect("other"))  # a second app still gets in
    third = connect("third")
    call = third.events.GetEvents(ess_pb2.GetEventsRequest(), metadata=third.md)
    await exhausted(call.read(), "apps with open streams", "the limit is 2")
    for c in [*subs, other]:
        c.cancel()


@pytest.mark.settings(publish_messages_per_s=1.0, publish_burst=5, max_keys_per_request=10)
async def test_a_kuksa_provider_stream_keeps_the_publish_limits(
    server: RunningServer, connect: Any
) -> None:
    """OpenProviderStream has the Publish stream's message rate and entries limit."""
    s = connect("sensor")
    added = await s.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=["Vehicle.A"]), metadata=s.md)
    key_id = added.keys[0].id

    def values(n: int) -> val_v2.OpenProviderStreamRequest:
        point = types_v2.Datapoint(value=types_v2.Value(string="x"))
        return val_v2.OpenProviderStreamRequest(
            publish_values_request=val_v2.PublishValuesRequest(
                request_id=1, data_points={key_id + i * 1000: point for i in range(n)}
            )
        )

    kuksa = val_v2_grpc.VALStub(s.channel)
    big = kuksa.OpenProviderStream(metadata=s.md)
    await big.write(values(11))
    await fails(big.read(), Code.INVALID_ARGUMENT, "data_points", "at most 10")
    fast = kuksa.OpenProviderStream(metadata=s.md)

    async def publish_until_refused() -> None:
        # A signal no key has: each publish is answered (a publish is answered only
        # when a signal fails), so one message at a time and no write races the end.
        unknown = val_v2.OpenProviderStreamRequest(
            publish_values_request=val_v2.PublishValuesRequest(
                request_id=2, data_points={key_id + 999_000: types_v2.Datapoint()}
            )
        )
        for _ in range(50):  # far beyond a burst of 5 at 1/s, whatever the pace
            await fast.write(unknown)
            await fast.read()
        raise AssertionError("50 messages in a stream limited to a burst of 5 at 1/s")

    await exhausted(publish_until_refused(), "Publish messages/s", "the limit is 1")


async def test_apps_on_the_unix_socket_each_have_their_own_rate(
    new_server: NewServer, tmp_path: Path
) -> None:
    """Every Unix-socket caller shows the same peer: one bucket for all would let four
    apps well under their own limit refuse each other. (1 request/s: no refill to
    speak of while the test runs.)"""
    server = await new_server(
        unix_socket=str(tmp_path / "vehicle_middleware.sock"),
        rate_limit_rps=1.0,
        rate_limit_burst=5,
    )
    unix = next(a for a in server.addresses if a.startswith("unix:"))
    async with grpc.aio.insecure_channel(unix) as channel:
        stub = vstore_pb2_grpc.VStoreStub(channel)
        for app in ("a", "b", "c", "d"):
            for _ in range(5):  # each app's whole burst, no more
                await stub.ListKeys(vstore_pb2.ListKeysRequest(), metadata=(("app-id", app),))
        await exhausted(
            stub.ListKeys(vstore_pb2.ListKeysRequest(), metadata=(("app-id", "a"),)),
            "app 'a'",
        )


@pytest.mark.settings(max_value_size=BIG, event_budget=100_000, event_budget_per_app=200)
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
