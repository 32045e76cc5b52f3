"""A hostile client against the APIs: the same abuses through each, the same answer
from each, and nothing changed for anyone else.

Bad values, through every API that writes one (INVALID_ARGUMENT naming the field and
the rule, nothing written): NaN for a signal with a range (NaN compares false with every bound, so a
range check alone lets it through), and a datapoint's timestamp that no uint64 of
nanoseconds since 1970 holds (negative nanos, before 1970, the year 9999).
Identities: no caller can name a stream the middleware opened for another app.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from vehicle_middleware.contract.values import encode
from vehicle_middleware.proto.kuksa.val.v1 import types_pb2 as t1
from vehicle_middleware.proto.kuksa.val.v1 import val_pb2 as v1
from vehicle_middleware.proto.kuksa.val.v1 import val_pb2_grpc as v1_grpc
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2 as t2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2 as v2
from vehicle_middleware.proto.kuksa.val.v2 import val_pb2_grpc as v2_grpc
from vehicle_middleware.proto.vehicle.ess.v1 import ess_pb2, ess_pb2_grpc
from vehicle_middleware.proto.vehicle.vstore.v1 import vstore_pb2, vstore_pb2_grpc
from vehicle_middleware.sdk import ProviderClient
from vehicle_middleware.server.server import RunningServer

from tests.conftest import fails

CATALOG = Path(__file__).with_name("kuksa_catalog.json")
SPEED = "Vehicle.Speed"  # float, 0 to 300 km/h in the test catalog

pytestmark = pytest.mark.settings(vss=(str(CATALOG),))


@pytest.fixture
async def channel(server: RunningServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(server.address) as ch:
        yield ch


Ts = Timestamp | None
Write = Callable[[grpc.aio.Channel, str, float, Ts], Awaitable[str]]
"""Writes a value (and a source time) through one API; returns the refusal's message
(raises if the write was accepted)."""


async def _own_api(
    channel: grpc.aio.Channel, address: str, value: float, ts: Timestamp | None
) -> str:
    assert ts is None  # the own API's time_ns is a uint64 field: no bad time to send
    async with ProviderClient(address, "hostile") as provider:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await provider.set(SPEED, encode(value))
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    return err.value.details() or ""


async def _kuksa_v1(
    channel: grpc.aio.Channel, address: str, value: float, ts: Timestamp | None
) -> str:
    point = t1.Datapoint(float=value)
    if ts is not None:
        point.timestamp.CopyFrom(ts)
    response = await v1_grpc.VALStub(channel).Set(
        v1.SetRequest(
            updates=[
                v1.EntryUpdate(entry=t1.DataEntry(path=SPEED, value=point), fields=[t1.FIELD_VALUE])
            ]
        ),
        metadata=(("app-id", "hostile"),),
    )
    assert response.error.code == 400, response
    assert [e.path for e in response.errors] == [SPEED]
    return response.errors[0].error.message


async def _kuksa_v2(
    channel: grpc.aio.Channel, address: str, value: float, ts: Timestamp | None
) -> str:
    point = t2.Datapoint(value=t2.Value(float=value))
    if ts is not None:
        point.timestamp.CopyFrom(ts)
    return await fails(
        v2_grpc.VALStub(channel).PublishValue(
            v2.PublishValueRequest(signal_id=t2.SignalID(path=SPEED), data_point=point),
            metadata=(("app-id", "hostile"),),
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    )


APIS: dict[str, Write] = {"own": _own_api, "kuksa-v1": _kuksa_v1, "kuksa-v2": _kuksa_v2}

ABUSES: dict[str, tuple[float, Timestamp | None, tuple[str, ...]]] = {
    "nan in a range": (math.nan, None, ("nan", "not a number", "0 to 300 km/h")),
    "negative nanos": (1.0, Timestamp(seconds=5, nanos=-3), ("timestamp.nanos", "-3")),
    "before 1970": (1.0, Timestamp(seconds=-5), ("timestamp", "1970-01-01")),
    "year 9999": (1.0, Timestamp(seconds=253402300799), ("timestamp", "2554-07-21")),
}


@pytest.mark.parametrize(
    ("api", "abuse"),
    [
        (api, abuse)
        for api in APIS
        for abuse, (_, ts, _) in ABUSES.items()
        if api != "own" or ts is None  # the own API's time is a uint64: none is bad
    ],
)
async def test_a_bad_value_is_refused_naming_the_rule_and_writes_nothing(
    server: RunningServer, channel: grpc.aio.Channel, api: str, abuse: str
) -> None:
    value, ts, words = ABUSES[abuse]
    message = await APIS[api](channel, server.address, value, ts)
    for word in words:
        assert word in message, message
    assert server.runtime.store.get(SPEED).data is None


async def test_an_app_stream_cannot_take_over_another_apps_kuksa_subscription(
    server: RunningServer, channel: grpc.aio.Channel
) -> None:
    """The subscription is an ESS app of its own; a caller naming it (as it is, or as
    it was once spelled, ``<app>.kuksa-sub-N``) neither replaces nor silences it."""
    async with ProviderClient(server.address, "sim") as provider:
        await provider.set(SPEED, encode(10.0))
        sub = v2_grpc.VALStub(channel).Subscribe(
            v2.SubscribeRequest(signal_paths=[SPEED]), metadata=(("app-id", "victim"),)
        )
        await sub.read()  # the current value: subscribed
        [internal] = [a for a in server.runtime.ess.apps() if a.startswith("victim")]
        stub = ess_pb2_grpc.EventServiceStub(channel)
        await fails(
            stub.GetEvents(ess_pb2.GetEventsRequest(), metadata=(("app-id", internal),)).read(),
            grpc.StatusCode.UNAUTHENTICATED,
        )
        lookalike = internal.replace("/", ".")
        other = stub.GetEvents(ess_pb2.GetEventsRequest(), metadata=(("app-id", lookalike),))
        await other.read()  # its own stream, opened beside the subscription
        await provider.set(SPEED, encode(20.0))
        update = await asyncio.wait_for(sub.read(), 30)
        assert update.entries[SPEED].value.float == 20.0
        other.cancel()
        sub.cancel()


# -- one request must not freeze the broker ----------------------------------------------


@pytest.mark.settings(max_keys=30_000)
async def test_a_huge_wildcard_request_is_refused_as_soon_as_it_cannot_fit(
    server: RunningServer, channel: grpc.aio.Channel
) -> None:
    """100 entries of ``Vehicle.X.**`` over 20,000 keys: the response is counted as it
    is built and refused once it cannot fit (it was built whole first: 45 MB, 7.7 s
    with every other client waiting); a subscription's paths are counted likewise."""
    vstore = vstore_pb2_grpc.VStoreStub(channel)
    md = (("app-id", "hostile"),)
    for b in range(20):
        names = [f"Vehicle.X.K{b}_{i}" for i in range(1000)]
        await vstore.AddKeys(vstore_pb2.AddKeysRequest(names=names), metadata=md)
    entry = v1.EntryRequest(path="Vehicle.X.**", view=t1.VIEW_ALL)
    huge = v1_grpc.VALStub(channel).Get(v1.GetRequest(entries=[entry] * 100), metadata=md)
    details = await fails(huge, grpc.StatusCode.RESOURCE_EXHAUSTED, "counted as far as entries[")
    counted = int(details.split("entries[")[1].split("]")[0])
    assert counted < 10, details  # about 4 MB of 100 paths of 20,000 keys: refused at once
    sub = v1_grpc.VALStub(channel).Subscribe(
        v1.SubscribeRequest(
            entries=[v1.SubscribeEntry(path="Vehicle.X.**", view=t1.VIEW_CURRENT_VALUE)] * 100
        ),
        metadata=md,
    )
    await fails(sub.read(), grpc.StatusCode.INVALID_ARGUMENT, "entries[0..0] of 100")
