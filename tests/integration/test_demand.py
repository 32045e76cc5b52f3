"""Providers told their keys' demand (``WatchDemand``) by a real server, as apps come and go.

The provider is the SDK's ``ProviderClient`` (and a raw KUKSA provider); apps are
``AppClient`` s, in this process or in their own (one killed with SIGKILL), and
subscriptions with filters registered in the server's ESS (the interval's source).
Waits poll for what the provider was told; the churn test bounds the messages by the
time it ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import textwrap
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest
from vehicle_middleware.ess import Filter, SubscriptionRequest
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2 as t2
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc
from vehicle_middleware.sdk import AppClient, KeyDemand, ProviderClient, Sub
from vehicle_middleware.server.server import RunningServer

from tests.conftest import eventually, fails
from tests.integration.conftest import Keys, NewServer, Stubs, start_ready, token_mode
from tests.integration.test_kuksa_client import FilteredProvider

SPEED = "Vehicle.Demand.Speed"
TEMP = "Vehicle.Demand.Temp"
KEYS = [SPEED, TEMP]
INTERVAL_S = 0.2


class Follower:
    """A provider's demand stream, followed in a task: the latest demand of each key
    and how many messages came."""

    def __init__(self, provider: ProviderClient, names: list[str]) -> None:
        self.latest: dict[str, KeyDemand] = {}
        self.messages = 0
        self._task = asyncio.create_task(self._follow(provider, names))

    async def _follow(self, provider: ProviderClient, names: list[str]) -> None:
        async for changed in provider.demand(names):
            self.latest.update(changed)
            self.messages += 1

    def watched(self, name: str) -> bool | None:
        demand = self.latest.get(name)
        return demand.watched if demand is not None else None

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


@contextlib.asynccontextmanager
async def following(server: RunningServer) -> AsyncIterator[Follower]:
    async with ProviderClient(server.address, "demand-provider") as provider:
        await provider.add_keys(KEYS)
        follower = Follower(provider, KEYS)
        try:
            await eventually(lambda: len(follower.latest) == len(KEYS), what="the first message")
            yield follower
        finally:
            await follower.stop()


APP = textwrap.dedent("""
    import asyncio, sys
    from vehicle_middleware.sdk import AppClient, Sub

    async def main():
        app = AppClient(sys.argv[1], sys.argv[2])
        await app.connect()
        await app.subscribe([Sub(k) for k in sys.argv[3:]])
        print("ready", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
""")


async def start_app(address: str, app_id: str, *keys: str) -> asyncio.subprocess.Process:
    """An app in a process of its own, subscribed to ``keys`` once it prints ready."""
    return await start_ready(APP, address, app_id, *keys)


@pytest.mark.settings(demand_interval_s=INTERVAL_S)
async def test_a_provider_hears_apps_come_and_go_a_killed_one_included(
    server: RunningServer,
) -> None:
    async with following(server) as follower:
        assert follower.latest == {SPEED: KeyDemand(SPEED, False), TEMP: KeyDemand(TEMP, False)}
        app = AppClient(server.address, "dashboard")
        await app.connect()
        await app.subscribe([Sub(SPEED)])
        await eventually(lambda: follower.watched(SPEED) is True, what="Speed watched")
        assert follower.latest[SPEED] == KeyDemand(SPEED, True, 0.0)  # every write wanted
        assert follower.watched(TEMP) is False
        await app.unsubscribe([SPEED])
        await eventually(lambda: follower.watched(SPEED) is False, what="Speed unwatched")

        proc = await start_app(server.address, "killed-app", TEMP)
        try:
            await eventually(lambda: follower.watched(TEMP) is True, what="Temp watched")
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
            await eventually(
                lambda: follower.watched(TEMP) is False, timeout=10, what="Temp unwatched"
            )
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        await app.close()
    server.runtime.ess.check()


@pytest.mark.settings(demand_interval_s=INTERVAL_S)
async def test_the_shortest_interval_asked_is_told_and_every_write_wins(
    server: RunningServer,
) -> None:
    ess = server.runtime.ess  # filters registered in the server's ESS: the interval's source
    async with following(server) as follower:
        ess.open_stream("slow-app")
        ess.register("slow-app", [SubscriptionRequest(SPEED, filter=Filter(500_000_000))])
        await eventually(
            lambda: follower.latest[SPEED] == KeyDemand(SPEED, True, 0.5), what="500 ms"
        )
        ess.open_stream("fast-app")
        ess.register("fast-app", [SubscriptionRequest(SPEED, filter=Filter(100_000_000))])
        await eventually(
            lambda: follower.latest[SPEED] == KeyDemand(SPEED, True, 0.1), what="100 ms"
        )
        ess.open_stream("every-write")
        ess.register("every-write", [SubscriptionRequest(SPEED)])
        await eventually(lambda: follower.latest[SPEED] == KeyDemand(SPEED, True, 0.0))
        # A shorter interval beside one that wants every write changes what a KUKSA
        # provider is told, not this stream's demand: no message, then the next change.
        told, batches = follower.messages, server.runtime.demand.batches
        ess.open_stream("faster-app")
        ess.register("faster-app", [SubscriptionRequest(SPEED, filter=Filter(20_000_000))])
        await eventually(lambda: server.runtime.demand.batches > batches, what="a batch taken")
        ess.remove_app("every-write")
        await eventually(lambda: follower.latest[SPEED] == KeyDemand(SPEED, True, 0.02))
        assert follower.messages == told + 1
        for app in ("faster-app", "fast-app"):
            ess.remove_app(app)
        await eventually(lambda: follower.latest[SPEED] == KeyDemand(SPEED, True, 0.5))
        ess.remove_app("slow-app")
        await eventually(lambda: follower.watched(SPEED) is False)


@pytest.mark.settings(
    demand_interval_s=INTERVAL_S, rate_limit_rps=100_000.0, rate_limit_burst=100_000
)
async def test_an_app_churning_costs_the_provider_one_message_per_interval_at_most(
    server: RunningServer,
) -> None:
    async with following(server) as follower:
        app = AppClient(server.address, "churner")
        await app.connect()
        first = follower.messages
        started = time.monotonic()
        rounds = 0
        while time.monotonic() - started < 1.0 or rounds < 50:
            await app.subscribe([Sub(SPEED)])
            await app.unsubscribe([SPEED])
            rounds += 1
        await app.subscribe([Sub(SPEED)])
        await eventually(lambda: follower.watched(SPEED) is True, what="the last subscribe")
        elapsed = time.monotonic() - started
        told = follower.messages - first
        # One take per interval, the first one at once: a message per interval, plus one.
        assert 1 <= told <= elapsed / INTERVAL_S + 2, (told, rounds, elapsed)
        assert told < rounds
        await app.close()


async def test_watch_demand_refuses_bad_requests_naming_the_field(
    server: RunningServer, connect: Callable[[str], Stubs]
) -> None:
    stubs = connect("bad-provider")
    await stubs.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=[SPEED]), metadata=stubs.md)

    async def first(*names: str) -> vstore_pb2.DemandUpdate:
        call = stubs.vstore.WatchDemand(
            vstore_pb2.WatchDemandRequest(names=names), metadata=stubs.md
        )
        try:
            return await call.read()  # type: ignore[return-value]
        finally:
            call.cancel()

    invalid = grpc.StatusCode.INVALID_ARGUMENT
    await fails(first(), invalid, "names", "must not be empty")
    await fails(first(*[f"Vehicle.K{i}" for i in range(1001)]), invalid, "names", "at most 1000")
    await fails(first(SPEED, "Vehicle..Bad"), invalid, "names[1]", "Vehicle..Bad")
    await fails(first(SPEED, SPEED), invalid, "names[1]", "named twice")
    await fails(first(SPEED, "Vehicle.Nope"), grpc.StatusCode.NOT_FOUND, "names[1]", "Vehicle.Nope")
    update = await first(SPEED)
    assert [(k.name, k.watched, k.min_interval_ms) for k in update.keys] == [(SPEED, False, 0)]


@pytest.mark.settings(max_publish_streams_per_app=1)
async def test_watch_demand_counts_as_a_provider_stream(
    server: RunningServer, connect: Callable[[str], Stubs]
) -> None:
    stubs = connect("one-stream")
    await stubs.vstore.AddKeys(vstore_pb2.AddKeysRequest(names=[SPEED]), metadata=stubs.md)
    request = vstore_pb2.WatchDemandRequest(names=[SPEED])
    held = stubs.vstore.WatchDemand(request, metadata=stubs.md)
    await held.read()
    second = stubs.vstore.WatchDemand(request, metadata=stubs.md)
    await fails(second.read(), grpc.StatusCode.RESOURCE_EXHAUSTED, "Publish streams", "limit is 1")
    held.cancel()


async def test_watch_demand_needs_the_provide_scope_for_each_key(
    new_server: NewServer, keys: Keys, tmp_path: Path
) -> None:
    server = await new_server(**token_mode(keys, tmp_path))
    token = keys.token("reader", "read:Vehicle.** create:Vehicle.** provide:Vehicle.Demand.Speed")
    md = (("authorization", f"Bearer {token}"),)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = vstore_pb2_grpc.VStoreStub(channel)
        await stub.AddKeys(vstore_pb2.AddKeysRequest(names=KEYS), metadata=md)
        call = stub.WatchDemand(vstore_pb2.WatchDemandRequest(names=KEYS), metadata=md)
        await fails(call.read(), grpc.StatusCode.PERMISSION_DENIED, "names[1]", TEMP)


async def test_a_middleware_without_watch_demand_wants_every_write() -> None:
    bare = grpc.aio.server()
    vstore_pb2_grpc.add_VStoreServicer_to_server(vstore_pb2_grpc.VStoreServicer(), bare)
    port = bare.add_insecure_port("127.0.0.1:0")
    await bare.start()
    try:
        provider = ProviderClient(f"127.0.0.1:{port}", "old-provider")
        told = [changed async for changed in provider.demand(KEYS)]
        assert told == [{SPEED: KeyDemand(SPEED, True), TEMP: KeyDemand(TEMP, True)}]
        await provider.close()
    finally:
        await bare.stop(0)


@pytest.mark.settings(demand_interval_s=INTERVAL_S)
async def test_a_kuksa_provider_is_told_the_shortest_interval_or_its_own(
    server: RunningServer,
) -> None:
    ess = server.runtime.ess
    async with grpc.aio.insecure_channel(server.address) as channel:
        added = await vstore_pb2_grpc.VStoreStub(channel).AddKeys(
            vstore_pb2.AddKeysRequest(names=KEYS), metadata=(("app-id", "kuksa-provider"),)
        )
        speed = added.keys[0].id
        provider = FilteredProvider(server, channel)
        await provider.provide({speed: 50})
        reader = asyncio.create_task(provider.read_filters())
        try:
            ess.open_stream("slow-app")
            ess.register("slow-app", [SubscriptionRequest(SPEED, filter=Filter(200_000_000))])
            await eventually(lambda: provider.interval(speed) == 200, what="200 ms asked")
            ess.open_stream("every-write")
            ess.register("every-write", [SubscriptionRequest(SPEED)])
            await eventually(lambda: provider.interval(speed) == 50, what="its own 50 ms")
            # Beside one that wants every write (its own 50 ms), a shorter interval asked wins.
            ess.open_stream("fast-app")
            ess.register("fast-app", [SubscriptionRequest(SPEED, filter=Filter(20_000_000))])
            await eventually(lambda: provider.interval(speed) == 20, what="20 ms asked")
            ess.remove_app("fast-app")
            await eventually(lambda: provider.interval(speed) == 50, what="its own 50 ms again")
            ess.remove_app("every-write")
            await eventually(lambda: provider.interval(speed) == 200, what="200 ms again")
            ess.remove_app("slow-app")
            await eventually(
                lambda: len(provider.filters) == 6 and provider.interval(speed) is None,
                what=lambda: f"a filter without interval; told {provider.filters}",
            )
            assert provider.filters[-1].filters_update[speed] == t2.Filter()
        finally:
            provider.call.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await reader
